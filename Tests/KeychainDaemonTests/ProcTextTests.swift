import XCTest

@testable import KeychainDaemon

/// The `/proc` files the daemon reads for every caller, split as bytes: a command name may hold
/// spaces and parentheses, a path may not be UTF-8, and values are padded with spaces and tabs.
final class ProcTextTests: XCTestCase {
    func testStatFieldsStartAfterTheLastParenthesisOfTheCommandName() throws {
        // A process may name itself ") S 1 2 3 (": the fields are those after the last ')'.
        let stat = Array("4242 (evil) S 1 2 3 () R 17 4242 4242 34817 5 0\n".utf8)
        let fields = try XCTUnwrap(ProcText.statFields(stat))
        XCTAssertEqual(fields.prefix(6), ["R", "17", "4242", "4242", "34817", "5"])
        XCTAssertNil(ProcText.statFields(Array("no parenthesis here".utf8)))
    }

    func testNamedFieldsAreTrimmedAndTheFirstOfANameWins() {
        let status = Array("Name:\tsecurity\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\nTracerPid:\t99\n".utf8)
        XCTAssertEqual(ProcText.field("TracerPid", in: status).map { Array($0) }, Array("0".utf8))
        XCTAssertEqual(ProcText.field("Uid", in: status).map { Array($0) }, Array("1000\t1000\t1000\t1000".utf8))
        XCTAssertNil(ProcText.field("Tracer", in: status), "a name is matched whole, up to its colon")
        let info = ProcText.fields(Array("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t123456\n".utf8))
        XCTAssertEqual(info["flags"], "02000002")
        XCTAssertEqual(info["mnt_id"], "15")
        XCTAssertEqual(info["ino"], "123456")
    }

    func testAMapLineKeepsItsPathAsTheKernelWroteIt() throws {
        let padded = ArraySlice(
            Array("7f00-7f10 r-xp 00000000 fe:00 1234                       /opt/my app/lib.so ".utf8))
        let mapping = try XCTUnwrap(ProcText.executableMapping(padded))
        // The padding before the path is the kernel's; the space it ends with is the file's name.
        XCTAssertEqual(mapping.text, "/opt/my app/lib.so ")
        XCTAssertEqual(mapping.inode, 1234)
        // A path that is not UTF-8 keeps its bytes (the file is looked up by them); only the text is repaired.
        let raw = ArraySlice(Array("7f00-7f10 r-xp 00000000 fe:00 99 /tmp/".utf8) + [0xff, 0x61])
        let odd = try XCTUnwrap(ProcText.executableMapping(raw))
        XCTAssertEqual(odd.path, Array("/tmp/".utf8) + [0xff, 0x61])
        XCTAssertEqual(odd.text, "/tmp/\u{FFFD}a")
        // Anonymous executable memory has no path; a mapping without x is not code; a short line is nothing.
        XCTAssertEqual(
            ProcText.executableMapping(ArraySlice(Array("7f00-7f10 rwxp 00000000 00:00 0".utf8))),
            ProcText.ExecutableMapping(path: [], inode: 0))
        XCTAssertNil(ProcText.executableMapping(ArraySlice(Array("7f00-7f10 r--p 00000000 fe:00 1234 /lib/a.so".utf8))))
        XCTAssertNil(ProcText.executableMapping(ArraySlice(Array("7f00-7f10 r-xp 0".utf8))))
        XCTAssertNil(
            ProcText.executableMapping(ArraySlice(Array("7f00-7f10 r-xp 00000000 fe:00 notanumber /lib/a.so".utf8)))?
                .inode)
        XCTAssertEqual(ProcText.lines(Array("a\n\nb\n".utf8)).map { ProcText.text($0) }, ["a", "b"])
    }
}
