import Foundation
import KeychainCore
import KeychainTestSupport
import XCTest

/// App delete and reinstall, as on iOS: removing an app from the registry leaves its items; the same
/// app registered again has them back; another program does not get them.
final class AppReinstallTests: XCTestCase {
    func testAnUninstalledAppsItemsStayAndComeBackWithItsRegistration() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        let other = try programs.app("other")
        try daemon.register(executable: app, identifier: "TEAM.mail", groups: ["TEAM.mail"])
        try daemon.register(executable: other, identifier: "TEAM.other", groups: ["TEAM.other"])
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "mail", "me", "kept", "", "ak"], daemon: daemon).output, "status 0")

        // Uninstall: the app is no longer served, and its items stay.
        let security = ClientPrograms.built("security")
        XCTAssertEqual(try ClientPrograms.run(security, ["app", "remove", app], daemon: daemon).status, 0)
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "status -34018")
        XCTAssertEqual(
            try ClientPrograms.run(other, ["read", "mail", "me"], daemon: daemon).output, "status -25300",
            "another program does not get them")

        // Reinstall: the same identifier and groups, and the items are there.
        try daemon.register(executable: app, identifier: "TEAM.mail", groups: ["TEAM.mail"])
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "me"], daemon: daemon).output, "kept")
    }

    /// The option Apple tried in the iOS 10.3 beta, never the default: `app remove --delete-items`
    /// deletes the items of the groups no other registered app has, and keeps a group another app shares.
    func testRemovingWithDeleteItemsDeletesTheGroupsNoOtherAppHas() throws {
        let daemon = try TestDaemon()
        let programs = try ClientPrograms()
        let app = try programs.app("app")
        let other = try programs.app("other")
        try daemon.register(executable: app, identifier: "TEAM.mail", groups: ["TEAM.mail", "TEAM.shared"])
        try daemon.register(executable: other, identifier: "TEAM.other", groups: ["TEAM.shared"])
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "mail", "own", "mine", "TEAM.mail"], daemon: daemon).output, "status 0")
        XCTAssertEqual(
            try ClientPrograms.run(app, ["put", "mail", "shared", "ours", "TEAM.shared"], daemon: daemon).output,
            "status 0")
        let security = ClientPrograms.built("security")
        let removed = try ClientPrograms.run(security, ["app", "remove", app, "--delete-items"], daemon: daemon)
        XCTAssertEqual(removed.status, 0, removed.output)
        XCTAssertEqual(
            try ClientPrograms.run(other, ["read", "mail", "shared"], daemon: daemon).output, "ours",
            "another app's group stays")
        try daemon.register(executable: app, identifier: "TEAM.mail", groups: ["TEAM.mail", "TEAM.shared"])
        XCTAssertEqual(
            try ClientPrograms.run(app, ["read", "mail", "own"], daemon: daemon).output, "status -25300",
            "the group only it had went with it")
        XCTAssertEqual(try ClientPrograms.run(app, ["read", "mail", "shared"], daemon: daemon).output, "ours")
    }
}
