// libssl, loaded when the first TLS context is made rather than linked: only sync talks TLS, and the
// `security` command, which links sync and starts for every call, would otherwise load libssl and bind
// its symbols at every start. libcrypto (which libssl needs, and which it finds already loaded) is
// linked as usual.
#include <dlfcn.h>
#include <stddef.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#define KEYCHAIN_SSL_FUNCTIONS(X) \
    X(TLS_server_method) \
    X(TLS_client_method) \
    X(SSL_CTX_new) \
    X(SSL_CTX_free) \
    X(SSL_CTX_ctrl) \
    X(SSL_CTX_use_certificate_chain_file) \
    X(SSL_CTX_use_PrivateKey_file) \
    X(SSL_CTX_check_private_key) \
    X(SSL_CTX_set_verify) \
    X(SSL_CTX_load_verify_locations) \
    X(SSL_CTX_set_default_verify_paths) \
    X(SSL_new) \
    X(SSL_free) \
    X(SSL_set_fd) \
    X(SSL_accept) \
    X(SSL_connect) \
    X(SSL_get0_param) \
    X(SSL_set1_host) \
    X(SSL_ctrl) \
    X(SSL_get_verify_result) \
    X(SSL_read_ex) \
    X(SSL_write_ex) \
    X(SSL_get_error) \
    X(SSL_shutdown)

#define KEYCHAIN_SSL_FIELD(name) __typeof__(&name) name;
/// The libssl functions the keychain uses, each found in the library by its name.
struct keychain_ssl {
    KEYCHAIN_SSL_FUNCTIONS(KEYCHAIN_SSL_FIELD)
};
#undef KEYCHAIN_SSL_FIELD

/// Loads libssl and fills `functions`; 0 when every function was found, -1 otherwise.
static inline int keychain_ssl_load(struct keychain_ssl *functions) {
    void *library = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return -1;
#define KEYCHAIN_SSL_LOOKUP(name) \
    functions->name = (__typeof__(&name))dlsym(library, #name); \
    if (functions->name == NULL) return -1;
    KEYCHAIN_SSL_FUNCTIONS(KEYCHAIN_SSL_LOOKUP)
#undef KEYCHAIN_SSL_LOOKUP
    return 0;
}

// Macros of libssl in a form Swift can call, through the loaded functions.
static inline long tls_context_require_tls13(const struct keychain_ssl *functions, SSL_CTX *context) {
    return functions->SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_3_VERSION, NULL);
}
static inline long tls_set_server_name(const struct keychain_ssl *functions, SSL *session, const char *name) {
    return functions->SSL_ctrl(session, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, (void *)name);
}
