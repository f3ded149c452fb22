import Foundation
import KeychainBytes
import KeychainCore

/// Conversion between Foundation's bridged objects and the engine's `ItemValue`.
package enum ValueBridging {
    struct InvalidKey: Error {
        let typeName: String
    }

    /// A query dictionary as the engine's plain dictionary. Keys must be strings (errSecParam otherwise).
    static func dictionary(_ dictionary: CFDictionary) throws(InvalidKey) -> [String: ItemValue] {
        var result: [String: ItemValue] = [:]
        result.reserveCapacity(dictionary.count)
        var invalidKey: InvalidKey?
        // enumerateKeysAndObjects walks the storage once; iterating does a hashed lookup per key.
        dictionary.enumerateKeysAndObjects { key, value, stop in
            // Foundation hands keys and values over already bridged (NSString as String), so String comes
            // first: casting a String to a class type first tries to bridge it back, which costs.
            guard let name = (key as? String) ?? (key as? SecConstantString)?.value else {
                invalidKey = InvalidKey(typeName: "\(type(of: key))")
                stop.pointee = true
                return
            }
            result[name] = name == "v_Data" ? secretValue(value) : itemValue(value)
        }
        if let invalidKey { throw invalidKey }
        return result
    }

    /// `kSecValueData`: copied into wiped memory at once, so that what crosses to the engine or the
    /// daemon is never a plain buffer (the app's own `Data` stays the app's).
    static func secretValue(_ value: Any) -> ItemValue {
        switch value {
        case let data as NSData:
            let length = data.length
            return .secret(SecureBytes(copying: UnsafeRawBufferPointer(start: data.bytes, count: length)))
        case let data as Data: return .secret(SecureBytes(copying: data))
        default: return itemValue(value)
        }
    }

    static func itemValue(_ value: Any) -> ItemValue {
        // Most common first: each failed cast costs, and the protocol check last costs most.
        switch value {
        case let string as String: return .string(string)
        case let constant as SecConstantString: return .string(constant.value)
        case let number as NSNumber:
            // The Objective-C type code tells a boolean (c, B) and a floating point number (f, d) apart.
            switch UInt8(bitPattern: number.objCType.pointee) {
            case UInt8(ascii: "c"), UInt8(ascii: "B"): return .bool(number.boolValue)
            case UInt8(ascii: "f"), UInt8(ascii: "d"): return .double(number.doubleValue)
            default: return .integer(number.int64Value)
            }
        case let data as NSData: return .data(data.contiguousData)  // `as Data` walks it byte by byte
        case let data as Data: return .data(data)
        case let date as Date: return .date(date)
        case is NSNull: return .null
        case let policy as SecAccessControl: return .accessControl(policy.policy)
        case let array as [Any]: return .array(array.map(itemValue))
        case let context as SecAuthenticationContextObject:
            return .authenticationContext(context.authenticationContextReference)
        case is SecKey: return .valueReference(ValueReference(kind: .key))
        case is SecCertificate: return .valueReference(ValueReference(kind: .certificate))
        case is SecIdentity: return .valueReference(ValueReference(kind: .identity))
        case Optional<Any>.none: return .null
        default: return .unsupported("\(type(of: value))")
        }
    }

    /// An engine result as the objects Apple's API returns (NSData, NSDictionary, NSArray...).
    static func object(_ result: ItemResult) -> AnyObject {
        switch result {
        case .data(let data): return data as NSData
        case .secret(let secret): return secret.withUnsafeBytes { Data($0) } as NSData
        case .dictionary(let dictionary):
            var keys: [NSString] = []
            var objects: [AnyObject] = []
            keys.reserveCapacity(dictionary.count)
            objects.reserveCapacity(dictionary.count)
            for (key, value) in dictionary {
                guard let object = object(value) else { continue }
                keys.append(key as NSString)
                objects.append(object)
            }
            return NSDictionary(objects: objects, forKeys: keys)
        case .array(let items): return items.map { object($0) } as NSArray
        }
    }

    package static func object(_ value: ItemValue) -> AnyObject? {
        switch value {
        case .string(let string): return string as NSString
        case .data(let data): return data as NSData
        case .secret(let secret): return secret.withUnsafeBytes { Data($0) } as NSData
        case .integer(let number): return NSNumber(value: number)
        case .double(let number): return NSNumber(value: number)
        case .bool(let flag): return NSNumber(value: flag)
        case .date(let date): return date as NSDate
        case .array(let values): return values.compactMap { object($0) } as NSArray
        case .accessControl(let policy): return SecAccessControl(policy: policy)
        // Objects for references arrive with keys and certificates.
        case .authenticationContext, .valueReference, .null, .unsupported: return nil
        }
    }
}
