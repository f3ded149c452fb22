import Foundation

/// One table of the benchmark's output: a label, the median and p99, and ratios. The label column is as
/// wide as the longest label, so that a label longer than the others (an algorithm's full name) is never
/// cut to fit a fixed width.
struct TimingTable {
    struct Row {
        let label: String
        let median: Double
        let p99: Double
        let ratios: [Double]
        let note: String
    }

    /// The headings of the ratio columns, in order ("× floor").
    let ratioHeadings: [String]
    private(set) var rows: [Row] = []

    init(ratioHeadings: [String] = ["× floor"]) { self.ratioHeadings = ratioHeadings }

    mutating func add(_ label: String, _ latencies: Latencies, ratios: [Double], note: String = "") {
        rows.append(Row(label: label, median: latencies.median, p99: latencies.p99, ratios: ratios, note: note))
    }

    var labelWidth: Int { rows.map(\.label.count).reduce("operation".count, max) }

    func lines() -> [String] {
        let ratioWidths = ratioHeadings.map { max($0.count, 8) }
        var header = "  " + Self.padded("operation", labelWidth) + "  " + Self.aligned("median", 10) + "  "
        header += Self.aligned("p99", 10)
        for (heading, width) in zip(ratioHeadings, ratioWidths) { header += "  " + Self.aligned(heading, width) }
        return [header]
            + rows.map { row in
                var line =
                    "  " + Self.padded(row.label, labelWidth) + "  " + format(row.median) + "  " + format(row.p99)
                for (ratio, width) in zip(row.ratios, ratioWidths) {
                    line += "  " + Self.aligned(String(format: "%.2f", ratio), width)
                }
                return line + row.note
            }
    }

    func print() { for line in lines() { Swift.print(line) } }

    // Counted in characters rather than UTF-16 units, which is what a terminal shows of "→" and "µ".
    private static func padded(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }

    private static func aligned(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }
}
