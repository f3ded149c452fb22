import Foundation
import KeychainBytes
import KeychainCore
import XCTest

@testable import SecurityCommandLine

/// The readers of other stores' files: what they give from real files, and that damaged ones are
/// refused with a reason, never a crash or a partial list.
final class SecretImportFormatTests: XCTestCase {
    static let keyring = SecurityCommandTests.packageRoot + "/Tests/Fixtures/gnome-keyring/login.keyring"

    func testAKeyringWrittenByGnomeKeyringOpensWithItsPassword() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.keyring))
        let keyring = try GnomeKeyringFile.read(data, password: SecureBytes(copying: Array("loginpw".utf8)))
        XCTAssertEqual(keyring.name, "Login")
        let byLabel = Dictionary(uniqueKeysWithValues: keyring.secrets.map { ($0.label, $0) })
        XCTAssertEqual(byLabel["Mail"]?.attributes, ["service": "mail", "user": "ann"])
        XCTAssertEqual(byLabel["Mail"]?.secret, SecureBytes(copying: Array("s1".utf8)))
        XCTAssertEqual(byLabel["Other"]?.attributes, ["xdg:schema": "org.example.Pw", "app": "demo"])
        XCTAssertEqual(byLabel["Other"]?.secret, SecureBytes(copying: Array("multi\nline".utf8)))
        XCTAssertEqual(byLabel["Other"]?.collection, "Login")
    }

    func testAWrongPasswordAndDamagedKeyringsAreRefused() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.keyring))
        let password = SecureBytes(copying: Array("loginpw".utf8))
        XCTAssertThrowsError(try GnomeKeyringFile.read(data, password: SecureBytes(copying: Array("nope".utf8)))) {
            XCTAssertTrue("\($0)".contains("password is wrong"), "\($0)")
        }
        // Every truncation, and every single-byte change, is refused or reads the same file: never a
        // crash, and never secrets that were not in it.
        for length in 0..<data.count {
            XCTAssertThrowsError(try GnomeKeyringFile.read(data.prefix(length), password: password), "\(length)")
        }
        let original = try GnomeKeyringFile.read(data, password: password).secrets
        for index in stride(from: 0, to: data.count, by: 3) {
            var damaged = data
            damaged[index] ^= 0x41
            if let read = try? GnomeKeyringFile.read(damaged, password: password) {
                XCTAssertEqual(read.secrets.map(\.secret), original.map(\.secret), "byte \(index)")
            }
        }
    }

    func testAKWalletExportGivesEachEntryWithItsFolderAndKey() throws {
        let export = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE KWallet>
            <wallet name="work">
             <!-- exported -->
             <folder name="Passwords">
              <password name="imap://ann@example.com">pa&amp;ss &lt;1&gt; &#x263A;</password>
              <map name="web"><mapentry name="login">ann</mapentry><mapentry name="password">x</mapentry></map>
              <stream name="blob">AAEC/w==</stream>
             </folder>
             <folder name="Empty"/>
            </wallet>
            """
        let secrets = try KWalletExport.read(Data(export.utf8))
        XCTAssertEqual(secrets.count, 3)
        XCTAssertEqual(secrets[0].collection, "work")
        XCTAssertEqual(secrets[0].label, "imap://ann@example.com")
        XCTAssertEqual(
            secrets[0].attributes,
            ["kwallet.folder": "Passwords", "kwallet.key": "imap://ann@example.com", "kwallet.type": "password"])
        XCTAssertEqual(secrets[0].secret, SecureBytes(copying: Array("pa&ss <1> ☺".utf8)))
        XCTAssertEqual(secrets[1].secret, SecureBytes(copying: Array(#"{"login":"ann","password":"x"}"#.utf8)))
        XCTAssertEqual(secrets[1].contentType, "application/json")
        XCTAssertEqual(secrets[2].secret, SecureBytes(copying: [0, 1, 2, 255]))
        // KWallet's default wallet is the default collection.
        let standard = try KWalletExport.read(
            Data(#"<wallet name="kdewallet"><folder name="f"><password name="k">v</password></folder></wallet>"#.utf8))
        XCTAssertEqual(standard.first?.collection, "")
    }

    func testMalformedExportsAreRefusedWithWhereAndWhy() throws {
        let cases: [(String, String)] = [
            ("<wallet name=\"w\"><folder name=\"f\"><password name=\"k\">v</folder></wallet>", "closes <password>"),
            ("<wallet name=\"w\"><folder><password name=\"k\">v</password></folder></wallet>", "without its name"),
            ("<wallet name=\"w\"><folder name=\"f\"><secret name=\"k\">v</secret></folder></wallet>", "<secret>"),
            (
                "<wallet name=\"w\"><folder name=\"f\"><password name=\"k\">&bogus;</password></folder></wallet>",
                "&bogus;"
            ),
            ("<wallet name=\"w\"></wallet><wallet name=\"x\"></wallet>", "after the document"),
            ("<wallet name=\"w\"><folder name=\"f\"><stream name=\"s\">***</stream></folder></wallet>", "not base64"),
            ("<wallet name=\"w\">", "never comes"),
            ("<keyring/>", "not a <wallet>"),
            (String(repeating: "<a>", count: 20), "too deep"),
        ]
        for (document, reason) in cases {
            XCTAssertThrowsError(try KWalletExport.read(Data(document.utf8)), document) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(document): \(error)")
            }
        }
        XCTAssertThrowsError(try KWalletExport.read(Data([0xff, 0xfe])))
    }
}
