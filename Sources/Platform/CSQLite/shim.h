// SQLite, loaded when the first database is opened rather than linked: the `security` command starts
// for every call, and through the daemon it never opens a database; linked, libsqlite3 would be loaded
// and its 1,600 symbol relocations bound at every start all the same. (Tests that read a database
// directly link it themselves.)
#include <dlfcn.h>
#include <stddef.h>
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro cast of -1 that Swift cannot import; give it a name Swift can use.
static inline sqlite3_destructor_type csqlite_transient(void) { return (sqlite3_destructor_type)-1; }

#define KEYCHAIN_SQLITE_FUNCTIONS(X) \
    X(sqlite3_open_v2) \
    X(sqlite3_close_v2) \
    X(sqlite3_extended_result_codes) \
    X(sqlite3_busy_timeout) \
    X(sqlite3_changes64) \
    X(sqlite3_last_insert_rowid) \
    X(sqlite3_get_autocommit) \
    X(sqlite3_errmsg) \
    X(sqlite3_errstr) \
    X(sqlite3_system_errno) \
    X(sqlite3_prepare_v3) \
    X(sqlite3_finalize) \
    X(sqlite3_reset) \
    X(sqlite3_clear_bindings) \
    X(sqlite3_bind_int64) \
    X(sqlite3_bind_null) \
    X(sqlite3_bind_blob64) \
    X(sqlite3_bind_text) \
    X(sqlite3_step) \
    X(sqlite3_column_int64) \
    X(sqlite3_column_type) \
    X(sqlite3_column_bytes) \
    X(sqlite3_column_blob) \
    X(sqlite3_column_text)

#define KEYCHAIN_SQLITE_FIELD(name) __typeof__(&name) name;
/// The SQLite functions the keychain uses, each found in the library by its name.
struct keychain_sqlite {
    KEYCHAIN_SQLITE_FUNCTIONS(KEYCHAIN_SQLITE_FIELD)
};
#undef KEYCHAIN_SQLITE_FIELD

/// Loads libsqlite3 and fills `functions`: NULL when every function was found, else the loader's
/// reason (the library is missing, or too old to have one of them).
static inline const char *keychain_sqlite_load(struct keychain_sqlite *functions) {
    void *library = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return dlerror();
#define KEYCHAIN_SQLITE_LOOKUP(name) \
    functions->name = (__typeof__(&name))dlsym(library, #name); \
    if (functions->name == NULL) return "a function is missing: " #name;
    KEYCHAIN_SQLITE_FUNCTIONS(KEYCHAIN_SQLITE_LOOKUP)
#undef KEYCHAIN_SQLITE_LOOKUP
    return NULL;
}
