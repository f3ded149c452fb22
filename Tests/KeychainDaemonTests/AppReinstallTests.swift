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
}
