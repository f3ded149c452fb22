import CSQLite

/// libsqlite3's functions, loaded when the first connection opens (see the CSQLite shim), or why they
/// could not be: the library is missing, or lacks one of them. Each connection and statement keeps a
/// copy, so the calls on the lookup path go straight through a pointer; every one of them was found.
let sqliteLibrary: Result<keychain_sqlite, StorageError> = {
    var functions = keychain_sqlite()
    guard let problem = keychain_sqlite_load(&functions) else { return .success(functions) }
    return .failure(
        StorageError(
            kind: .cannotOpen, code: SQLITE_CANTOPEN,
            message: "cannot load libsqlite3.so.0 (Debian's libsqlite3-0, 3.37 or later): \(String(cString: problem))"))
}()
