import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// Every event the encoder writes reads back as itself (what an executor's head relies on to
/// re-report a remote task), times and all at the encoder's resolution.
@Suite struct EventDecoderTests {
    static let encoder = EventEncoder(runID: "r", wallOffsetNanoseconds: 0)
    static let task = TaskRef(id: 3, name: "train")

    static func roundTrip(_ kind: TaskEvent.Kind) throws -> TaskEvent.Kind? {
        let line = encoder.line(for: TaskEvent(task: task, time: MonotonicInstant(nanoseconds: 5_000_000_000), kind: kind))
        let value = try JSONValue.parse(Array(line.dropLast()))
        return try EventDecoder.decode(value)?.kind
    }

    static let outcome: TaskOutcome = {
        var o = TaskOutcome(task: TaskRef(id: 0, name: "train"), pid: 4242, termination: .signaled(.kill), cancelReason: .memory,
                            killed: false, elapsed: .milliseconds(2500), lastProgress: Progress(completed: 3, total: 10, title: "t", bar: "b"),
                            result: .object([("loss", .number(0.5))]), protocolErrors: 2, wasReady: true)
        o.oomKills = 1
        o.cancelWhy = "last progress 3 s ago, from bar 't' (rank 1)"
        o.signalSender = .outside
        o.usage = ResourceUsage(peakMemory: 209_715_200, cpuUser: .milliseconds(1250), cpuSystem: .milliseconds(250), memorySource: .cgroup)
        return o
    }()

    @Test(arguments: [
        TaskEvent.Kind.started(pid: 42),
        .progress(Progress(completed: 1, total: 4, title: "Epoch", detail: "loss 1", bar: "tqdm-1"), remaining: .seconds(30)),
        .progress(Progress(fraction: 0.25), remaining: nil),
        .progress(Progress(completed: 40, total: 100, bar: "tqdm-1", closed: true, reporter: "rank 1", reporting: 2), remaining: .seconds(9)),
        .heartbeat(remaining: .milliseconds(1500)),
        .ready,
        .result(.array([.number(1), .string("x")])),
        .budgetChanged(remaining: .seconds(10), cause: .start),
        .budgetChanged(remaining: nil, cause: .childExtend(asked: .seconds(60), why: "index", granted: true)),
        .budgetChanged(remaining: .seconds(70), cause: .operatorExtend(amount: .seconds(60), pastMax: true, clipped: false)),
        .budgetChanged(remaining: .zero, cause: .revoke(after: .zero)),
        .expiring(remaining: .seconds(5)),
        .engineExpiring(remaining: .seconds(45), source: .slurm),
        .cancelSent(reason: .failFast, grace: .seconds(10)),
        .cancelSent(reason: .timeout, grace: .seconds(10), why: "last progress 10 s ago, from bar 'Tokenizing' (pid 4242), which closed at 15:03:45"),
        .killSent,
        .protocolError(ProtocolError(.notJSON, "not JSON"), excerpt: "garbage"),
        .operatorRequest(action: "extend 10m00s", uid: 1000),
        .reporterRefused(pid: 7, uid: nil),
        .reporterRefused(pid: 8, uid: 65534, count: 4321),
        .reporters(count: 3),
        .notified(key: "STOPPING", value: "1"),
        .memoryWarning(used: 190_000_000, limit: 200_000_000),
        .diagnosing(reason: .timeout, limit: .seconds(10)),
        .reporterQuiet(name: "rank 2"),
        .reporterQuiet(name: "sd_notify"),
    ])
    func readsBackAsItself(_ kind: TaskEvent.Kind) throws {
        #expect(try Self.roundTrip(kind) == kind)
    }

    @Test func anExitedLineReadsBackAsItsOutcome() throws {
        guard case let .exited(outcome)? = try Self.roundTrip(.exited(Self.outcome)) else {
            Issue.record("not an exited event")
            return
        }
        #expect(outcome.termination == .signaled(.kill) && outcome.cancelReason == .memory && outcome.kind == .oom)
        #expect(outcome.exitCode == Self.outcome.exitCode && outcome.pid == 4242 && outcome.elapsed == .milliseconds(2500))
        #expect(outcome.lastProgress == Self.outcome.lastProgress && outcome.result == Self.outcome.result)
        #expect(outcome.usage == Self.outcome.usage && outcome.oomKills == 1 && outcome.signalSender == .outside)
        #expect(outcome.protocolErrors == 2 && outcome.wasReady)
        for termination in [Termination.exited(3), .failedToStart(SpawnFailure(errno: ErrorNumber.ENOENT, message: "x: command not found"))] {
            var o = Self.outcome
            o.termination = termination
            o.cancelReason = nil
            guard case let .exited(back)? = try Self.roundTrip(.exited(o)) else { Issue.record("\(termination)"); continue }
            #expect(back.exitCode == o.exitCode && back.kind == o.kind, "\(termination)")
        }
    }

    @Test func repliesThinnedLinesAndNewerKindsAreNotEvents() throws {
        #expect(try EventDecoder.decode(JSONValue.parse(Array(#"{"ok":true,"watching":true}"#.utf8))) == nil)
        #expect(try EventDecoder.decode(JSONValue.parse(Array(#"{"task":"t","event":"thinned","kind":"progress","count":3}"#.utf8))) == nil)
        #expect(try EventDecoder.decode(JSONValue.parse(Array(#"{"task":"t","event":"from-the-future"}"#.utf8))) == nil)
        #expect(throws: ProtocolError.self) { try EventDecoder.decode(JSONValue.parse(Array(#"{"task":"t","event":"cancel","reason":"whim","grace":1}"#.utf8))) }
        #expect(throws: ProtocolError.self) { try EventDecoder.decode(JSONValue.parse(Array(#"{"event":"ready"}"#.utf8))) }
    }
}
