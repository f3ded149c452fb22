/// The item classes (`kSecClass` values) with their storage numbers.
public enum ItemClass: Int, CaseIterable, Sendable {
    case genericPassword = 1
    case internetPassword = 2
    case certificate = 3
    case key = 4

    public var name: String {
        switch self {
        case .genericPassword: "genp"
        case .internetPassword: "inet"
        case .certificate: "cert"
        case .key: "keys"
        }
    }

    public init?(name: String) {
        guard let found = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = found
    }

    /// The identity class (`idnt`) is a join of certificates and private keys, not a table.
    public static let identityName = "idnt"
}
