import CSystemdBus

#if canImport(Glibc)
    import Glibc
#endif

/// libsystemd's sd-bus, loaded the first time a bus connection is made (see the shim: a program that
/// never uses a bus never loads it). Every call goes through the table of functions found in it; a
/// table that failed to load makes every connection fail with the reason.
enum SystemdBus {
    private static let loaded: keychain_sd_bus? = {
        var functions = keychain_sd_bus()
        return keychain_sd_bus_load(&functions) == 0 ? functions : nil
    }()

    /// The functions, or why there are none.
    static func functions() throws(DBusError) -> keychain_sd_bus {
        guard let loaded else {
            throw DBusError(.connection, "libsystemd (sd-bus) cannot be loaded: install libsystemd0")
        }
        return loaded
    }

    /// An sd-bus return code as a reason.
    static func describe(_ code: Int32) -> String { String(cString: strerror(-code)) }
}
