/// This project's version, as `security --version` and `securityd --version` print it: one constant, so
/// that the command and the daemon of one build never name different versions.
public enum ProjectVersion {
    /// The version, as `MAJOR.MINOR.PATCH`.
    public static let string = "0.1.0"
}
