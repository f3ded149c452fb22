// sd-bus (libsystemd), loaded when the first bus connection is made rather than linked: the library
// and the five it needs would otherwise be loaded at every start of every program that can talk to a
// bus, the `security` command included, which starts for every call and rarely uses one.
#include <dlfcn.h>
#include <stddef.h>
#include <systemd/sd-bus.h>

#define KEYCHAIN_SD_BUS_FUNCTIONS(X) \
    X(sd_bus_new) \
    X(sd_bus_set_address) \
    X(sd_bus_set_bus_client) \
    X(sd_bus_set_method_call_timeout) \
    X(sd_bus_start) \
    X(sd_bus_flush_close_unref) \
    X(sd_bus_get_unique_name) \
    X(sd_bus_send) \
    X(sd_bus_call) \
    X(sd_bus_process) \
    X(sd_bus_wait) \
    X(sd_bus_message_new_method_call) \
    X(sd_bus_message_new_signal) \
    X(sd_bus_message_new_method_return) \
    X(sd_bus_message_new_method_error) \
    X(sd_bus_message_set_expect_reply) \
    X(sd_bus_message_unref) \
    X(sd_bus_message_ref) \
    X(sd_bus_message_get_type) \
    X(sd_bus_message_get_cookie) \
    X(sd_bus_message_get_reply_cookie) \
    X(sd_bus_message_get_path) \
    X(sd_bus_message_get_interface) \
    X(sd_bus_message_get_member) \
    X(sd_bus_message_get_destination) \
    X(sd_bus_message_get_sender) \
    X(sd_bus_message_get_error) \
    X(sd_bus_message_append_basic) \
    X(sd_bus_message_open_container) \
    X(sd_bus_message_close_container) \
    X(sd_bus_message_read_basic) \
    X(sd_bus_message_enter_container) \
    X(sd_bus_message_exit_container) \
    X(sd_bus_message_peek_type) \
    X(sd_bus_error_free) \
    X(sd_bus_message_read_array) \
    X(sd_bus_message_append_array) \
    X(sd_bus_negotiate_fds) \
    X(sd_bus_is_open) \
    X(sd_bus_message_set_destination)

#define KEYCHAIN_SD_BUS_FIELD(name) __typeof__(&name) name;
/// The sd-bus functions the keychain uses, each found in the library by its name.
struct keychain_sd_bus {
    KEYCHAIN_SD_BUS_FUNCTIONS(KEYCHAIN_SD_BUS_FIELD)
};
#undef KEYCHAIN_SD_BUS_FIELD

/// Loads libsystemd and fills `functions`; 0 when every function was found, -1 otherwise (the
/// library is not installed, or is too old).
static inline int keychain_sd_bus_load(struct keychain_sd_bus *functions) {
    void *library = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return -1;
#define KEYCHAIN_SD_BUS_LOOKUP(name) \
    functions->name = (__typeof__(&name))dlsym(library, #name); \
    if (functions->name == NULL) return -1;
    KEYCHAIN_SD_BUS_FUNCTIONS(KEYCHAIN_SD_BUS_LOOKUP)
#undef KEYCHAIN_SD_BUS_LOOKUP
    return 0;
}
