import Testing
@testable import OvertimeCore

/// The table of docs/hangs.md ("What each option catches, measured"): for each pace trace,
/// under a fixed window, fixed windows by phase, and `--window auto`, how long after a hang
/// the task is caught (the median over the trace's hang points) and how often its soft
/// deadline passed with no hang. Printed as markdown:
///
///     swift test --filter PaceTraceTable
///
/// Replayed under `--on-stall warn`, so one false positive does not end the run and hide
/// the next; a hang is caught at the first passed deadline after it.
@Suite struct PaceTraceTable {
    struct Row {
        var trace: PaceTrace
        var cells: [HangOption: Cell] = [:]
    }

    struct Cell {
        var window: String
        /// The median time from the last report to the deadline passed, over the hang points.
        var detection: Duration?
        /// By hang point, in the trace's order.
        var byPoint: [(String, Duration?)]
        var falsePositives: [PaceReplay.Trip]
    }

    static func measure(_ trace: PaceTrace, _ option: HangOption) -> Cell {
        let policy = option.policy(for: trace, onStall: .warn)
        let whole = PaceReplay.run(trace.messages, policy: policy)
        let byPoint = trace.hangs.map { hang -> (String, Duration?) in
            let before = trace.hung(after: hang.after)
            let replay = PaceReplay.run(before, policy: policy, thenSilenceFor: .seconds(7 * 3600))
            return (hang.name, replay.trips.first { $0.at > hang.after }.map { $0.at - before.last!.at })
        }
        let detections = byPoint.compactMap(\.1).sorted()
        let window: String = switch option {
        case .fixedWorst:
            "\(PaceTrace.seconds(policy.window!)) s"
        case .phaseWindows:
            ([PhaseNames.initial: policy.window!].merging(policy.phaseWindows) { a, _ in a })
                .sorted { $0.key < $1.key }.map { "\($0.key) \(PaceTrace.seconds($0.value)) s" }.joined(separator: ", ")
        case .learned:
            // Each phase's first window told, and its last where it moved.
            Dictionary(grouping: whole.learned, by: \.phase).sorted { $0.key < $1.key }.map { phase, told in
                let (first, last) = (PaceTrace.seconds(told.first!.window), PaceTrace.seconds(told.last!.window))
                return first == last ? "\(phase) \(first) s" : "\(phase) \(first) → \(last) s"
            }.joined(separator: ", ")
        }
        return Cell(window: window, detection: detections.isEmpty ? nil : detections[detections.count / 2],
                    byPoint: byPoint, falsePositives: whole.trips)
    }

    static func table(_ rows: [Row]) -> String {
        var lines = [
            "| trace | origin | longest silence | fixed window: window | caught after | false positives "
                + "| phases: caught after | false positives | `--window auto`: windows learned | caught after | false positives |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in rows {
            var cells = [row.trace.name, row.trace.origin, "\(PaceTrace.seconds(row.trace.longestSilence)) s"]
            for option in HangOption.allCases {
                let cell = row.cells[option]!
                if option != .phaseWindows { cells.append(cell.window.isEmpty ? "none" : cell.window) }
                cells.append(cell.detection.map { "\(PaceTrace.seconds($0)) s" } ?? "not caught")
                cells.append("\(cell.falsePositives.count)")
            }
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }

    /// Each hang point on its own: the median above hides which ones the budget catches.
    static func pointTable(_ rows: [Row]) -> String {
        var lines = ["| trace | hang point | fixed window | phases | `--window auto` |", "|---|---|---|---|---|"]
        for row in rows {
            for (i, hang) in row.trace.hangs.enumerated() {
                let cells = HangOption.allCases.map { option in
                    row.cells[option]!.byPoint[i].1.map { "\(PaceTrace.seconds($0)) s" } ?? "not caught"
                }
                lines.append("| \(row.trace.name) | \(hang.name) | " + cells.joined(separator: " | ") + " |")
            }
        }
        return lines.joined(separator: "\n")
    }

    @Test func printTheTable() throws {
        var rows: [Row] = []
        for trace in try PaceTrace.all() {
            var row = Row(trace: trace)
            for option in HangOption.allCases { row.cells[option] = Self.measure(trace, option) }
            rows.append(row)
        }
        print(Self.table(rows))
        print("\n" + Self.pointTable(rows))
        print("\nFalse positives under --window auto:")
        for row in rows {
            for trip in row.cells[.learned]!.falsePositives {
                print("- \(row.trace.name): \(PaceTraceTests.describe(trip))")
            }
        }
        // Windows set to the worst silence never trip on the trace they were set from.
        for row in rows {
            #expect(row.cells[.fixedWorst]!.falsePositives.isEmpty, "\(row.trace.name)")
            #expect(row.cells[.phaseWindows]!.falsePositives.isEmpty, "\(row.trace.name)")
        }
    }
}
