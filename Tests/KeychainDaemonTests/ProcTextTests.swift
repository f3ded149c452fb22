import XCTest

@testable import KeychainDaemon

/// The `/proc` files the daemon reads for every caller, split as bytes: a command name may hold
/// spaces and parentheses, a path may not be UTF-8, and values are padded with spaces and tabs.
final class ProcTextTests: XCTestCase {
    func testStatFieldsStartAfterTheLastParenthesisOfTheCommandName() {
        // A process may name itself ") S 1 2 3 (": the fields are those after the last ')'.
        let stat = Array("4242 (evil) S 1 2 3 () R 17 4242 4242 34817 5 0\n".utf8)
        XCTAssertEqual((4...8).map { ProcText.statNumber($0, in: stat) }, [17, 4242, 4242, 34817, 5])
        XCTAssertNil(ProcText.statNumber(4, in: Array("no parenthesis here".utf8)))
    }

    func testAStatFieldIsFoundByItsNumberInPlace() {
        // Fields as proc(5) numbers them: 3 is the state, 6 the session, 7 the terminal.
        let stat = Array("4242 (a) b) (c) S 1 2 3 34817 5 0\n".utf8)
        XCTAssertEqual(ProcText.statNumber(4, in: stat), 1)
        XCTAssertEqual(ProcText.statNumber(7, in: stat), 34817)
        XCTAssertEqual(ProcText.statNumber(9, in: stat), 0)
        XCTAssertNil(ProcText.statNumber(3, in: stat), "the state is a letter, not a number")
        XCTAssertNil(ProcText.statNumber(10, in: stat), "past the last field")
        XCTAssertNil(ProcText.statNumber(2, in: stat), "the command name is not a numbered field here")
        XCTAssertNil(ProcText.statNumber(4, in: Array("no parenthesis 1 2 3".utf8)))
        // The fields a plain split gives, for this process's whole stat line (its name has no space).
        let text = (try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8)) ?? ""
        let own = Array(text.utf8)
        let fields = text.split(separator: " ")
        XCTAssertGreaterThan(fields.count, 50)
        for number in [4, 6, 7, 22, 50, 51] {
            XCTAssertEqual(ProcText.statNumber(number, in: own), UInt64(fields[number - 1]), "field \(number)")
        }
    }

    func testDecimalsAreDigitsOnlyAndNeverOverflow() {
        XCTAssertEqual(ProcText.decimal(ArraySlice(Array("18446744073709551615".utf8))), UInt64.max)
        XCTAssertNil(ProcText.decimal(ArraySlice(Array("18446744073709551616".utf8))))
        XCTAssertNil(ProcText.decimal(ArraySlice(Array("-1".utf8))))
        XCTAssertNil(ProcText.decimal(ArraySlice(Array("+1".utf8))))
        XCTAssertNil(ProcText.decimal(ArraySlice(Array("1 ".utf8))))
        XCTAssertNil(ProcText.decimal([]))
        XCTAssertEqual(ProcText.decimal(ArraySlice(Array("0042".utf8))), 42)
    }

    func testLinesAreVisitedInPlaceUntilTheVisitorStops() {
        var seen: [String] = []
        ProcText.forEachLine(Array("a\n\nb\nc".utf8)) { line in
            seen.append(ProcText.text(line))
            return seen.count < 2
        }
        XCTAssertEqual(seen, ["a", "b"], "empty lines are skipped, and the visit ends when asked")
        var all: [String] = []
        ProcText.forEachLine(Array("x\ny\n".utf8)) { line in
            all.append(ProcText.text(line))
            return true
        }
        XCTAssertEqual(all, ["x", "y"])
    }

    func testNamedFieldsAreTrimmedAndTheFirstOfANameWins() {
        let status = Array("Name:\tsecurity\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\nTracerPid:\t99\n".utf8)
        XCTAssertEqual(ProcText.field("TracerPid", in: status).map { Array($0) }, Array("0".utf8))
        XCTAssertEqual(ProcText.field("Uid", in: status).map { Array($0) }, Array("1000\t1000\t1000\t1000".utf8))
        XCTAssertNil(ProcText.field("Tracer", in: status), "a name is matched whole, up to its colon")
        let info = Array("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t123456\n".utf8)
        XCTAssertEqual(ProcText.field("flags", in: info).map(ProcText.text), "02000002")
        XCTAssertEqual(ProcText.field("mnt_id", in: info).map(ProcText.text), "15")
        XCTAssertEqual(ProcText.field("ino", in: info).map(ProcText.text), "123456")
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
        var lines: [String] = []
        ProcText.forEachLine(Array("a\n\nb\n".utf8)) { line in
            lines.append(ProcText.text(line))
            return true
        }
        XCTAssertEqual(lines, ["a", "b"])
    }
}
