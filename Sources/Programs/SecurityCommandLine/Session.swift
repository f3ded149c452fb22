import Foundation
import KeychainBytes
import KeychainCore
import Security
import SecurityCommandCore

extension Session {
    /// Every item of `itemClass` the caller can see, synchronizable or not, as the query's `returning`
    /// keys give them (attributes, references...), each cast to `T`; none when there is none. A locked
    /// class asks for the passcode on a terminal, as every search of the command does.
    func allItems<T>(of itemClass: CFString, returning: [String: Any], as _: T.Type, function: String)
        throws(Failure) -> [T]
    {
        var query: [String: Any] = [
            kSecClass as String: itemClass, kSecMatchLimit as String: kSecMatchLimitAll,
            kSecAttrSynchronizable as String: kSecAttrSynchronizableAny,
        ]
        query.merge(returning) { $1 }
        var result: CFTypeRef?
        let status = try retryingWhenLocked { SecItemCopyMatching(query as CFDictionary, &result) }
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let items = result as? [T] else {
            throw .keychain(status == errSecSuccess ? errSecInternalComponent : status, function: function)
        }
        return items
    }

    /// The data of an item found with its persistent reference, asked for alone: Foundation on Linux
    /// bridges an `NSData` inside a dictionary to `Data` a byte at a time (about half a second for
    /// 10 MiB), while data returned alone is copied at once. Nil when the item came without a persistent
    /// reference (it was not asked for).
    func secret(of item: [String: Any]) throws(Failure) -> Data? {
        guard let reference = item[kSecValuePersistentRef as String] as? Data else { return nil }
        let query: [String: Any] = [kSecValuePersistentRef as String: reference, kSecReturnData as String: true]
        var result: CFTypeRef?
        let status = try retryingWhenLocked { SecItemCopyMatching(query as CFDictionary, &result) }
        guard status == errSecSuccess, let data = result as? NSData else {
            throw .keychain(status == errSecSuccess ? errSecItemNotFound : status, function: Function.search)
        }
        return Data(bytes: data.bytes, count: data.length)
    }
}

extension Session {
    /// The keychain's passcode for a request that reads or writes every group (a backup, a restore, an
    /// import): `-p`, else asked for on a terminal or read as a line of standard input when the keychain
    /// has one and the request needs it (through a daemon always; embedded, while it is locked).
    func wholeKeychainPasscode(_ arguments: Arguments) throws(Failure) -> SecureBytes? {
        if let given = arguments.bytes("p") { return SecureBytes(copying: given) }
        let status = try status()
        guard status.passcodeSet else { return nil }
        guard KeychainServices.daemonSocketInUse() != nil || status.lockState != .unlocked else { return nil }
        let passcode =
            Terminal.inputIsTerminal ? Terminal.readPasscode(prompt: "keychain passcode: ") : Terminal.readLine()
        guard let passcode else { throw .message("no keychain passcode entered") }
        return passcode
    }
}
