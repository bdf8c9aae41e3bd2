import OvertimeProtocol
import Synchronization
import Testing
@testable import Overtime

/// The supervisor's event fan-out: every sink sees every event in order, the JSON line is
/// made once for all that ask, and a sink steers tasks at once through their handles.
@Suite struct EventSinkTests {
    final class Recorder: EventSink, Sendable {
        let wantsBytes: Bool
        private let seen = Mutex<[(kind: TaskEvent.Kind, line: [UInt8]?)]>([])
        init(wantsBytes: Bool) { self.wantsBytes = wantsBytes }
        func receive(_ event: inout EncodedEvent) {
            let line = wantsBytes ? event.line() : nil
            seen.withLock { $0.append((event.event.kind, line)) }
        }
        var kinds: [TaskEvent.Kind] { seen.withLock { $0.map(\.kind) } }
        var lines: [[UInt8]] { seen.withLock { $0.compactMap(\.line) } }
    }

    /// Cancels the task (reason `deadline`) from inside its first progress event.
    final class CancelOnProgress: EventSink, Sendable {
        let handle = Mutex<TaskHandle?>(nil)
        func receive(_ event: inout EncodedEvent) {
            guard case .progress = event.event.kind, let handle = handle.withLock({ $0 }) else { return }
            #expect(handle.syncOperations.cancel(reason: .deadline, grace: .seconds(5)) == .cancelling)
            #expect(handle.syncOperations.status()?.state == .cancelling(.deadline))
        }
    }

    @Test func everySinkSeesEveryEventInOrderAndTheLineIsShared() async throws {
        let typed = Recorder(wantsBytes: false)
        let first = Recorder(wantsBytes: true)
        let second = Recorder(wantsBytes: true)
        let supervisor = try Supervisor(sinks: [typed, first, second])
        defer { supervisor.shutdown() }
        let task = supervisor.spawn(TaskSpec(name: "sh", arguments: ["/bin/sh", "-c", #"printf '{"type":"progress","completed":1}\n' >&3"#],
                                             stdin: .null, stdout: .discard, stderr: .discard))
        #expect(await task.outcome.succeeded)
        #expect(typed.kinds.count >= 4, "started, budget, progress, exited: \(typed.kinds)")
        #expect(typed.kinds == first.kinds && first.kinds == second.kinds)
        #expect(first.lines == second.lines)
        let encoder = EventEncoder(runID: supervisor.runID)
        let texts = first.lines.map { String(decoding: $0, as: UTF8.self) }
        #expect(texts.first?.contains(#""event":"started""#) == true, "\(texts)")
        #expect(texts.last?.contains(#""event":"exited""#) == true, "\(texts)")
        #expect(texts.allSatisfy { $0.hasSuffix("\n") && $0.contains(#""run":"\#(encoder.runID)""#) })
    }

    @Test func aSinkCancelsThroughTheHandleAtOnce() async throws {
        let recorder = Recorder(wantsBytes: false)
        let canceller = CancelOnProgress()
        let supervisor = try Supervisor(sinks: [canceller, recorder])
        defer { supervisor.shutdown() }
        let task = supervisor.spawn(TaskSpec(name: "sh", arguments: ["/bin/sh", "-c", #"sleep 0.3; printf '{"type":"progress","completed":1}\n' >&3; sleep 30"#],
                                             policy: BudgetPolicy(budget: .seconds(60)), stdin: .null, stdout: .discard, stderr: .discard))
        canceller.handle.withLock { $0 = task }
        let outcome = await task.outcome
        #expect(outcome.cancelReason == .deadline, "\(outcome)")
        // The cancel was made inside the progress event's fan-out: its event is the very
        // next one the later sink sees, no loop turn in between.
        let kinds = recorder.kinds
        let progress = try #require(kinds.firstIndex { if case .progress = $0 { true } else { false } })
        #expect(kinds[progress + 1] == .cancelSent(reason: .deadline, grace: .seconds(5)), "\(kinds)")
    }
}
