import CTSS2
import Foundation

/// The TPM's dictionary-attack protection: every wrong authorization of a protected object counts; at
/// `maxTries` the TPM refuses every protected object until the count decays (one failure forgotten
/// every `recoveryTime` seconds).
public struct TPMLockoutState: Sendable, Equatable {
    public var failures: UInt32
    public var maxTries: UInt32
    /// Seconds after which one counted failure is forgotten.
    public var recoveryTime: UInt32
    /// Seconds before the lockout authorization may be tried again after a wrong one.
    public var lockoutRecovery: UInt32
    public var inLockout: Bool
    /// Whether the lockout hierarchy has an authorization: without one, anyone who can send TPM
    /// commands can reset the lockout (TPM2_DictionaryAttackLockReset) and guess on.
    public var lockoutAuthorizationSet: Bool = false
    /// Whether the owner hierarchy has an authorization (the keychain needs it empty).
    public var ownerAuthorizationSet: Bool = false
}

/// What the TPM says about itself, for `show-keychain-info`.
public struct TPMIdentity: Sendable, Equatable {
    /// The manufacturer's four-letter code (for example `IBM` for the reference TPM that swtpm runs).
    public var manufacturer: String
    public var vendor: String
    public var firmware: String
}

/// Property numbers (Part 2, TPM_PT): the header's definitions are arithmetic, which Swift does not import.
private enum Property {
    static let fixed: UInt32 = 0x100
    static let variable: UInt32 = 0x200
    static let manufacturer = fixed + 5
    static let vendorString1 = fixed + 6
    static let vendorString2 = fixed + 7
    static let firmwareVersion1 = fixed + 11
    static let permanent = variable + 0
    static let lockoutCounter = variable + 14
    static let maxAuthFail = variable + 15
    static let lockoutInterval = variable + 16
    static let lockoutRecovery = variable + 17
}

extension TPM {
    /// Sets the dictionary-attack parameters with the lockout authorization (empty on a new TPM).
    public func setLockoutParameters(maxTries: UInt32, recoveryTime: UInt32, lockoutRecovery: UInt32) throws {
        try run("setting the dictionary-attack parameters") { context, _ in
            try Self.check(
                Esys_DictionaryAttackParameters(
                    context, ESYS_TR(ESYS_TR_RH_LOCKOUT), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE),
                    ESYS_TR(ESYS_TR_NONE), maxTries, recoveryTime, lockoutRecovery),
                "setting the dictionary-attack parameters")
        }
    }

    public func lockoutState() throws -> TPMLockoutState {
        let values = try properties(from: Property.lockoutCounter, count: 4)
        let permanent = try properties(from: Property.permanent, count: 1)[Property.permanent] ?? 0
        let inLockout = permanent & UInt32(TPMA_PERMANENT_INLOCKOUT) != 0
        return TPMLockoutState(
            failures: values[Property.lockoutCounter] ?? 0, maxTries: values[Property.maxAuthFail] ?? 0,
            recoveryTime: values[Property.lockoutInterval] ?? 0,
            lockoutRecovery: values[Property.lockoutRecovery] ?? 0, inLockout: inLockout,
            lockoutAuthorizationSet: permanent & UInt32(TPMA_PERMANENT_LOCKOUTAUTHSET) != 0,
            ownerAuthorizationSet: permanent & UInt32(TPMA_PERMANENT_OWNERAUTHSET) != 0)
    }

    public func identity() throws -> TPMIdentity {
        let values = try properties(from: Property.manufacturer, count: 7)
        func text(_ property: UInt32) -> String {
            let value = values[property] ?? 0
            let bytes = withUnsafeBytes(of: value.bigEndian) { Array($0) }
            return String(decoding: bytes.filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self)
        }
        let firmware = values[Property.firmwareVersion1] ?? 0
        return TPMIdentity(
            manufacturer: text(Property.manufacturer),
            vendor: text(Property.vendorString1) + text(Property.vendorString2),
            firmware: "\(firmware >> 16).\(firmware & 0xFFFF)")
    }

    private func properties(from first: UInt32, count: UInt32) throws -> [UInt32: UInt32] {
        try run("reading the TPM's properties") { context, _ in
            var more = TPMI_YES_NO(0)
            var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
            try Self.check(
                Esys_GetCapability(
                    context, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                    TPM2_CAP(TPM2_CAP_TPM_PROPERTIES), first, count, &more, &data),
                "reading the TPM's properties")
            defer { Esys_Free(data) }
            guard let data else { return [:] }
            var found: [UInt32: UInt32] = [:]
            let list = data.pointee.data.tpmProperties
            withUnsafeBytes(of: list.tpmProperty) { raw in
                let capacity = raw.count / MemoryLayout<TPMS_TAGGED_PROPERTY>.stride
                for position in 0..<min(Int(list.count), capacity) {
                    let entry = raw.load(
                        fromByteOffset: position * MemoryLayout<TPMS_TAGGED_PROPERTY>.stride,
                        as: TPMS_TAGGED_PROPERTY.self)
                    found[entry.property] = entry.value
                }
            }
            return found
        }
    }
}
