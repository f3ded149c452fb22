import Foundation
import KeychainEngine

// The SecItem API with Darwin's exact signatures. Each call converts the query, runs it on the
// keychain engine and maps the outcome to Apple's OSStatus.

/// Adds an item. With a kSecReturn* key, `result` receives what SecItemCopyMatching would return.
@discardableResult
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCall.run(result) { keychain, client, query in try keychain.add(query, client: client) }(attributes)
}

/// Finds items; by default the first match, and nothing in `result` unless a kSecReturn* key asks.
@discardableResult
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCall.run(result, requirePointerForReturn: true) { keychain, client, query in
        try keychain.copyMatching(query, client: client)
    }(query)
}

/// Changes every item the query matches.
@discardableResult
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    let changes: [String: ItemValue]
    do {
        changes = try ValueBridging.dictionary(attributesToUpdate)
    } catch {
        return errSecParam
    }
    return SecItemCall.run(nil) { keychain, client, query in
        try keychain.update(query, attributes: changes, client: client)
        return nil
    }(query)
}

/// Deletes every item the query matches.
@discardableResult
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    SecItemCall.run(nil) { keychain, client, query in
        try keychain.delete(query, client: client)
        return nil
    }(query)
}

enum SecItemCall {
    typealias Body = (Keychain, ClientIdentity, [String: ItemValue]) throws -> ItemResult?

    static func run(
        _ result: UnsafeMutablePointer<CFTypeRef?>?, requirePointerForReturn: Bool = false, _ body: @escaping Body
    ) -> (CFDictionary) -> OSStatus {
        { dictionary in
            let query: [String: ItemValue]
            do {
                query = try ValueBridging.dictionary(dictionary)
            } catch {
                return errSecParam
            }
            if requirePointerForReturn, result == nil, wantsResult(query) { return errSecParam }
            do {
                let keychain = try EmbeddedKeychain.current()
                let answer = try body(keychain, EmbeddedKeychain.client(), query)
                if let result, let answer { result.pointee = ValueBridging.object(answer) }
                return errSecSuccess
            } catch let error as KeychainError {
                return SecStatus.status(for: error)
            } catch {
                return errSecInternalComponent
            }
        }
    }

    private static func wantsResult(_ query: [String: ItemValue]) -> Bool {
        ["r_Data", "r_Attributes", "r_Ref", "r_PersistentRef"].contains { query[$0] == .bool(true) }
    }
}

enum SecStatus {
    static func status(for error: KeychainError) -> OSStatus {
        switch error {
        case .invalidParameter: errSecParam
        case .noSuchAttribute: errSecNoSuchAttr
        case .noSuchClass: errSecNoSuchClass
        case .duplicateItem: errSecDuplicateItem
        case .itemNotFound: errSecItemNotFound
        case .interactionNotAllowed: errSecInteractionNotAllowed
        case .notAvailable: errSecNotAvailable
        case .missingEntitlement: errSecMissingEntitlement
        case .unimplemented: errSecUnimplemented
        case .authenticationFailed: errSecAuthFailed
        case .ioError: errSecIO
        case .readOnly: errSecReadOnly
        case .diskFull: errSecDiskFull
        case .allocationFailed: errSecAllocate
        case .internalError: errSecInternalComponent
        }
    }
}
