// docs/design.md's table of stages × inputs, read from the page and held against the
// machine: its stages are the machine's, its inputs are the machine's methods (read from
// TaskMachine.swift), and each cell says rightly whether the input hands back actions in
// that stage. A new input or stage that the table leaves out fails here.

import Foundation
import OvertimeProtocol
import OvertimeTestSupport
import Testing
@testable import OvertimeCore

@Suite("TaskMachine: the table in docs/design.md")
struct TaskMachineTableTests {
    /// The table: its stage names (the header after the first cell) and each row's cells.
    static func table() throws -> (stages: [String], rows: [(input: String, cells: [String])]) {
        let page = try String(contentsOfFile: Checkout.path("docs/design.md"), encoding: .utf8)
        let lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("| input ↓ / stage → |") }) else {
            throw TableFailure("no '| input ↓ / stage → |' table in docs/design.md")
        }
        func cells(_ line: String) -> [String] {
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let stages = Array(cells(lines[header]).dropFirst())
        var rows: [(String, [String])] = []
        for line in lines[(header + 2)...] {
            guard line.hasPrefix("|") else { break }
            let all = cells(line)
            rows.append((all[0], Array(all.dropFirst())))
        }
        return (stages, rows)
    }

    struct TableFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static let t0 = MonotonicInstant(nanoseconds: 1_000_000_000_000)

    /// A machine in `stage`, with every limit the inputs below need: a 10 s budget, a 2 s
    /// warning, a 5 s grace, a 3 s diagnose limit, a memory max of 1,000 bytes.
    static func machine(in stage: String) -> (TaskMachine, MonotonicInstant) {
        var policy = BudgetPolicy(budget: .seconds(10), grace: .seconds(5), warnBefore: .seconds(2))
        policy.diagnoseLimit = .seconds(3)
        var machine = TaskMachine(policy: policy, memory: MemoryPolicy(max: 1_000), startedAt: t0)
        var ignored: [TaskMachine.Action] = []
        machine.start(pid: 42, now: t0, into: &ignored)
        var now = t0 + .seconds(1)
        switch stage {
        case "diagnosing":
            now = t0 + .seconds(10)
            machine.tick(now: now, into: &ignored)
        case "cancelling":
            _ = machine.cancel(reason: .user, now: now, into: &ignored)
        case "exited":
            machine.exited(into: &ignored)
        default:
            break
        }
        return (machine, now)
    }

    /// Each row of the table, as an input given to a machine at `now` (one second after it
    /// reached its stage, or where the row's condition says).
    static let inputs: [String: @Sendable (inout TaskMachine, MonotonicInstant, inout [TaskMachine.Action]) -> Void] = [
        "`start`": { m, now, a in m.start(pid: 42, now: now, into: &a) },
        "`receive` progress, heartbeat": { m, now, a in m.receive(.heartbeat, now: now, into: &a) },
        "`receive` phase": { m, now, a in m.receive(.phase(name: "eval", window: nil), now: now, into: &a) },
        "`receive` extend": { m, now, a in m.receive(.extend(seconds: 60, why: nil), now: now, into: &a) },
        "`receive` ready, result": { m, now, a in m.receive(.ready, now: now, into: &a) },
        "`notify` (sd_notify)": { m, now, a in m.notify(.status("loading"), now: now, into: &a) },
        "`reporterJoined`": { m, now, a in m.reporterJoined(ReporterID(1), now: now, into: &a) },
        "`reporterLeft`": { m, now, a in m.reporterLeft(ReporterID(1), into: &a) },
        "`reporterNamed`": { m, _, _ in m.reporterNamed(.leader, "rank 0") },
        "`memorySample`": { m, now, a in m.memorySample(950, now: now, into: &a) },
        "`engineExpiring`": { m, now, a in m.engineExpiring(remaining: .seconds(60), source: .warnLead, now: now, into: &a) },
        "`rejectLine`": { m, _, a in m.rejectLine(ProtocolError(.notJSON, "x"), excerpt: "x", into: &a) },
        "`tick`, deadline passed": { m, _, a in m.tick(now: t0 + .seconds(30), into: &a) },
        // Running: 1 s before the deadline, within the 2 s warning. Elsewhere: before the
        // diagnosis's limit or the kill time, with nothing due.
        "`tick`, within warn-before": { m, now, a in m.tick(now: m.phase == .running ? t0 + .seconds(9) : now, into: &a) },
        "`diagnosisEnded`": { m, now, a in m.diagnosisEnded(now: now, into: &a) },
        "`cancel` (reason, grace)": { m, now, a in _ = m.cancel(reason: .user, now: now, into: &a) },
        "`escalate`": { m, now, a in m.escalate(now: now, into: &a) },
        "`operatorExtend`": { m, now, a in _ = m.operatorExtend(by: .seconds(60), pastMax: false, now: now, into: &a) },
        "`revoke` (after)": { m, now, a in _ = m.revoke(after: .seconds(60), now: now, into: &a) },
        "`exited` (reaped)": { m, _, a in m.exited(into: &a) },
    ]

    @Test("its stages are the machine's, in order")
    func stages() throws {
        let (stages, _) = try Self.table()
        #expect(stages == ["running", "diagnosing", "cancelling", "exited"])
        for stage in stages {
            let (machine, _) = Self.machine(in: stage)
            #expect(String(describing: machine.stage).hasPrefix(stage), "set up for \(stage), the machine is \(machine.stage)")
        }
    }

    @Test("its inputs are the machine's methods, every one")
    func inputsAreTheMachines() throws {
        let (_, rows) = try Self.table()
        let source = try String(contentsOfFile: Checkout.path("Sources/OvertimeCore/TaskMachine.swift"), encoding: .utf8)
        let methods = Set(source.matches(of: /public mutating func (\w+)\(/).map { String($0.1) })
        let named = Set(rows.compactMap { $0.input.firstMatch(of: /`(\w+)`/).map { String($0.1) } })
        #expect(named == methods, "in the table, not the machine: \(named.subtracting(methods)); in the machine, not the table: \(methods.subtracting(named))")
        #expect(Set(rows.map(\.input)) == Set(Self.inputs.keys), "rows this test cannot drive, or drives and the table lacks")
    }

    @Test("each cell says whether the input hands back actions in that stage")
    func cells() throws {
        let (stages, rows) = try Self.table()
        for (input, cells) in rows {
            guard let drive = Self.inputs[input] else { continue }   // inputsAreTheMachines says so
            #expect(cells.count == stages.count, "row \(input)")
            for (stage, cell) in zip(stages, cells) where !cell.hasPrefix("never") {
                let quiet = cell == "—" || cell.hasPrefix("record only") || cell.hasPrefix("answer")
                var (machine, now) = Self.machine(in: stage)
                var actions: [TaskMachine.Action] = []
                drive(&machine, now, &actions)
                if quiet {
                    #expect(actions.isEmpty, "\(input) while \(stage) (\"\(cell)\") handed back \(actions)")
                } else {
                    #expect(!actions.isEmpty, "\(input) while \(stage) (\"\(cell)\") handed back nothing")
                }
            }
        }
    }
}
