import Foundation

/// The class of every kSec string constant: an `NSString` (so it is a `CFString` and an `AnyObject`)
/// that hashes as the plain Swift string it holds.
///
/// On Linux `AnyHashable(NSString("acct")) != AnyHashable("acct")`, while client code mixes
/// `kSecAttrAccount` and `"acct"` as keys of the same `[AnyHashable: Any]`; giving the constants a
/// custom AnyHashable representation makes them interchangeable as on Darwin.
final class SecConstantString: NSString {
    /// The Swift string itself, so bridging a constant out of a dictionary costs no copying.
    let value: String
    private let units: [unichar]

    required init(string: String) {
        value = string
        units = Array(string.utf16)
        super.init(characters: units, length: units.count)
    }

    required init?(coder: NSCoder) { nil }

    required convenience init(stringLiteral value: StaticString) { self.init(string: value.description) }

    required convenience init(unicodeScalarLiteral value: StaticString) { self.init(string: value.description) }

    required convenience init(extendedGraphemeClusterLiteral value: StaticString) {
        self.init(string: value.description)
    }

    override var length: Int { units.count }

    override func character(at index: Int) -> unichar { units[index] }

    override var description: String { value }
}

extension SecConstantString: _HasCustomAnyHashableRepresentation {
    func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(value) }
}
