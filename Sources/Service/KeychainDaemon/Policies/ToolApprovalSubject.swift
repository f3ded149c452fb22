import Foundation
import KeychainBytes
import KeychainCore

/// What a user's approval of a general-purpose tool's request is given to, for its reuse in the same
/// terminal session: the tool's executable, by digest. The `security` command is two executables,
/// `security` and `security-full` beside it (the verbs the first hands on), which `app register`
/// registers alike: an approval given to either serves both, as it served the one executable the command
/// was. Entries are a pair when they are in one directory, one of them is named `security-full`, and
/// they agree on everything the approval concerns (application identifier, groups, tool, reuse); only
/// who may register apps can make two entries so.
enum ToolApprovalSubject {
    static func of(_ app: AppRegistration, in registry: [AppRegistration]) -> String {
        let directory = (app.executablePath as NSString).deletingLastPathComponent
        let alike = registry.filter { other in
            (other.executablePath as NSString).deletingLastPathComponent == directory
                && other.applicationIdentifier == app.applicationIdentifier
                && other.accessGroups == app.accessGroups && other.isGeneralPurposeTool == app.isGeneralPurposeTool
                && other.approvalReuseSeconds == app.approvalReuseSeconds
        }
        let hasFullHalf = alike.contains { ($0.executablePath as NSString).lastPathComponent == "security-full" }
        guard hasFullHalf, alike.count > 1, alike.contains(where: { $0.executablePath == app.executablePath }) else {
            return name(of: app)
        }
        return alike.map(name(of:)).sorted().joined(separator: "+")
    }

    /// An entry's executable: its digest, or its path for one trusted by path (development).
    private static func name(of app: AppRegistration) -> String {
        app.executableDigest.map { Hex.encode($0) } ?? app.executablePath
    }
}
