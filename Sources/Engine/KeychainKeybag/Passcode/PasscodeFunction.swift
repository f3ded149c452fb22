import Dispatch
import FoundationEssentials
import KeychainBytes
import KeychainCore
import KeychainCrypto

/// How a passcode is stretched into the key that wraps the class keys, with its cost. Stored in the
/// keybag, so a keybag keeps working when the default changes.
///
/// The cost is what someone holding a copy of the keychain directory *and* its device root pays for
/// each guess offline; without the root they cannot guess at all (the result is entangled with it).
public enum PasscodeFunction: Equatable, Sendable {
    /// PBKDF2-HMAC-SHA256; only read from keybags made before scrypt, and replaced at their next unlock.
    case pbkdf2(iterations: UInt32)
    /// scrypt with N = 2^logN: memory-hard, so parallel guessing on GPUs costs memory as well as time.
    case scrypt(logN: UInt8, r: UInt32, p: UInt32)

    /// The least this keychain ever uses: OWASP's minimum for scrypt in its equal-strength form
    /// N = 2^15 (32 MiB), r = 8, p = 3 (Password Storage Cheat Sheet).
    public static let minimum = PasscodeFunction.scrypt(logN: 15, r: 8, p: 3)

    /// The minimum, or more memory (doubling N) where this machine derives it in less than `target`
    /// seconds: never weaker than the minimum, however loaded the machine is while measuring.
    public static func calibrated(target: TimeInterval = 0.09) -> PasscodeFunction {
        guard case .scrypt(var logN, let r, let p) = minimum else { return minimum }
        // scrypt's time is linear in N: measure an eighth of the minimum and scale.
        var elapsed = seconds(for: .scrypt(logN: logN - 3, r: r, p: p)) * 8
        while elapsed * 2 <= target, logN < 20 {
            logN += 1
            elapsed *= 2
        }
        return .scrypt(logN: logN, r: r, p: p)
    }

    /// Seconds one derivation takes here.
    public static func seconds(for function: PasscodeFunction) -> TimeInterval {
        let start = DispatchTime.now().uptimeNanoseconds
        _ = try? function.derive(SecureBytes(copying: Array("calibrate".utf8)), salt: Data(count: 16))
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// The stretched passcode (32 bytes), before it is entangled with the device root.
    public func derive(_ passcode: SecureBytes, salt: Data) throws -> SecureBytes {
        switch self {
        case .pbkdf2(let iterations):
            return try KeyDerivation.pbkdf2(password: passcode, salt: salt, iterations: Int(iterations))
        case .scrypt(let logN, let r, let p):
            return try KeyDerivation.scrypt(password: passcode, salt: salt, logN: logN, r: r, p: p)
        }
    }

    /// Whether a keybag's stored function is within what this build accepts: a keybag is authenticated
    /// by the root, but a cost that would take hours or all memory is refused all the same.
    var isAcceptable: Bool {
        switch self {
        case .pbkdf2(let iterations): (1...100_000_000).contains(iterations)
        case .scrypt(let logN, let r, let p): (1...22).contains(logN) && (1...32).contains(r) && (1...64).contains(p)
        }
    }
}
