import CSQLite

/// libsqlite3's functions, loaded when the first connection opens (see the CSQLite shim); nil when the
/// library cannot be loaded or lacks one of them. Each connection and statement keeps a copy, so the
/// calls on the lookup path go straight through a pointer.
let sqliteLibrary: keychain_sqlite? = {
    var functions = keychain_sqlite()
    return keychain_sqlite_load(&functions) == 0 ? functions : nil
}()
