import Foundation
import KeychainCore

// The SecItem API with Darwin's exact signatures. Each call converts the query, hands it to this
// process's keychain service (KeychainServices) and maps the outcome to Apple's OSStatus.

/// Adds an item. With a kSecReturn* key, `result` receives what SecItemCopyMatching would return.
@discardableResult
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCall.run(attributes, result: result, operation: .add) { service, query in try service.add(query) }
}

/// Finds items; by default the first match, and nothing in `result` unless a kSecReturn* key asks.
@discardableResult
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCall.run(query, result: result, requirePointerForReturn: true, operation: .copy) { service, query in
        try service.copyMatching(query)
    }
}

/// Changes every item the query matches.
@discardableResult
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    guard let changes = try? ValueBridging.dictionary(attributesToUpdate) else { return errSecParam }
    return SecItemCall.run(query, result: nil) { service, query in
        try service.update(query, attributes: changes)
        return nil
    }
}

/// Deletes every item the query matches.
@discardableResult
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    SecItemCall.run(query, result: nil, operation: .delete) { service, query in
        try service.delete(query)
        return nil
    }
}

/// The part every SecItem function shares: bridge the query in, run it on this process's keychain
/// service, bridge the answer out, and turn failures into OSStatus.
enum SecItemCall {
    enum Operation { case add, copy, delete, other }

    static func run(
        _ dictionary: CFDictionary, result: UnsafeMutablePointer<CFTypeRef?>?, requirePointerForReturn: Bool = false,
        operation: Operation = .other, _ body: (any KeychainService, [String: ItemValue]) throws -> ItemResult?
    ) -> OSStatus {
        guard var query = try? ValueBridging.dictionary(dictionary) else { return errSecParam }
        if requirePointerForReturn, result == nil, wantsResult(query) { return errSecParam }
        do {
            // Identities are certificates paired with keys, found, added and deleted here (rare paths).
            if IdentityItems.isIdentityQuery(query) {
                let reference = KeyItems.valueObject(in: dictionary)
                let service = try KeychainServices.current()
                switch operation {
                case .copy:
                    let found = try IdentityItems.copyMatching(query, reference: reference, service: service)
                    if let result, let found { result.pointee = found }
                case .add:
                    guard let identity = reference as? SecIdentity else {
                        throw KeychainError.invalidParameter("an identity is added as a SecIdentity in kSecValueRef")
                    }
                    try IdentityItems.add(identity, query: query, service: service)
                case .delete:
                    try IdentityItems.delete(query, reference: reference, service: service)
                case .other:
                    throw KeychainError.unimplemented("identities are updated through their certificate or their key")
                }
                return errSecSuccess
            }
            // Key objects in, key objects out (rare: the common calls pass straight through).
            let asked = query
            if let key = KeyItems.valueKey(in: dictionary, bridged: query) {
                query =
                    operation == .add
                    ? try KeyItems.addition(of: key, to: query) : try KeyItems.matching(key, in: query)
            } else if let certificate = KeyItems.valueCertificate(in: dictionary, bridged: query) {
                query =
                    operation == .add
                    ? try KeyItems.addition(of: certificate, to: query)
                    : try KeyItems.matching(certificate, in: query)
            }
            let keyObjects = KeyItems.wantsKeyObjects(query)
            if keyObjects { query = KeyItems.askingForKeyMaterial(query) }
            let answer = try body(try KeychainServices.current(), query)
            if let result, let answer {
                result.pointee =
                    keyObjects ? try KeyItems.objects(from: answer, query: asked) : ValueBridging.object(answer)
            }
            return errSecSuccess
        } catch let error as KeychainError {
            SecItemFailure.record(error)
            return error.osStatus
        } catch {
            return errSecInternalComponent
        }
    }

    private static func wantsResult(_ query: [String: ItemValue]) -> Bool {
        ["r_Data", "r_Attributes", "r_Ref", "r_PersistentRef"].contains { query[$0] == .bool(true) }
    }
}
