import Glibc
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

    /// Cancels each task from inside its `started` event, having first taken a copy of the
    /// task's fd 3 (`pidfd_getfd`): the task dies of the SIGTERM before it runs a single
    /// instruction of its own, so the copy is how the test hears what the task was told.
    final class CancelOnStart: EventSink, Sendable {
        let supervisor = Mutex<Supervisor?>(nil)
        let taskChannel = Mutex<Int32>(-1)

        func receive(_ event: inout EncodedEvent) {
            guard case let .started(pid) = event.event.kind, let supervisor = supervisor.withLock({ $0 }) else { return }
            taskChannel.withLock { $0 = Self.copy(descriptor: 3, of: pid) }
            let handle = TaskHandle(ref: event.event.task, supervisor: supervisor)
            #expect(handle.syncOperations.cancel(reason: .user, grace: .seconds(5)) == .cancelling)
        }

        /// A descriptor of another process, duplicated into this one (Linux 5.6).
        static func copy(descriptor: Int32, of pid: Int32) -> Int32 {
            typealias PidfdOpen = @convention(c) (Int32, UInt32) -> Int32
            typealias PidfdGetfd = @convention(c) (Int32, Int32, UInt32) -> Int32
            let libc = dlopen(nil, RTLD_NOW)
            guard let open = dlsym(libc, "pidfd_open"), let getfd = dlsym(libc, "pidfd_getfd") else { return -1 }
            let pidfd = unsafeBitCast(open, to: PidfdOpen.self)(pid, 0)
            guard pidfd >= 0 else { return -1 }
            defer { close(pidfd) }
            return unsafeBitCast(getfd, to: PidfdGetfd.self)(pidfd, descriptor, 0)
        }
    }

    @Test func aSinkThatCancelsOnStartedLeavesTheCancelLastOnTheChannel() async throws {
        let canceller = CancelOnStart()
        let supervisor = try Supervisor(sinks: [canceller])
        defer { supervisor.shutdown() }
        canceller.supervisor.withLock { $0 = supervisor }
        defer { canceller.supervisor.withLock { $0 = nil } }
        let task = supervisor.spawn(TaskSpec(name: "sleep", arguments: ["/bin/sleep", "30"], policy: BudgetPolicy(budget: .seconds(60)),
                                             stdin: .null, stdout: .discard, stderr: .discard))
        let outcomeTask = Task { await task.outcome }
        // Read what was written on the task's channel, up to two lines (the budget, the cancel).
        var channel: Int32 = -1
        let clock = ContinuousClock()
        let end = clock.now + .seconds(10)
        while channel < 0, clock.now < end {
            channel = canceller.taskChannel.withLock { $0 }
            if channel < 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
        try #require(channel >= 0, "no copy of the task's fd 3 (pidfd_getfd): errno \(errno)")
        var heard: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while heard.count(where: { $0 == UInt8(ascii: "\n") }) < 2, clock.now < end {
            var ready = pollfd(fd: channel, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let count = read(channel, &buffer, buffer.count)
            if count <= 0 { break }
            heard += buffer[..<count]
        }
        close(channel)
        let outcome = await outcomeTask.value
        #expect(outcome.cancelReason == .user, "\(outcome)")
        let lines = String(decoding: heard, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.contains(#""type":"budget""#) == true, "the budget first: \(lines)")
        #expect(lines.last?.contains(#""type":"cancel""#) == true, "the cancel last, nothing after it: \(lines)")
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
