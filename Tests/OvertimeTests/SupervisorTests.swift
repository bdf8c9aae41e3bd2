import Foundation
import OvertimeProtocol
import Synchronization
import Testing
@testable import Overtime

/// The engine through its library API, with real processes, pipes and signals.
@Suite struct SupervisorTests {
    /// Collects every event a supervisor reports.
    final class EventLog: Sendable {
        private let events = Mutex<[TaskEvent]>([])
        func append(_ event: TaskEvent) { events.withLock { $0.append(event) } }
        var all: [TaskEvent] { events.withLock { $0 } }
        var kinds: [TaskEvent.Kind] { all.map(\.kind) }
    }

    /// Runs `body` with a fresh supervisor and shuts it down after.
    func withSupervisor<T>(_ body: (Supervisor, EventLog) async throws -> T) async throws -> T {
        let log = EventLog()
        let supervisor = try Supervisor { log.append($0) }
        defer { supervisor.shutdown() }
        return try await body(supervisor, log)
    }

    func sh(_ script: String, policy: BudgetPolicy = .default, stdout: OutputTarget = .discard, stderr: OutputTarget = .discard) -> TaskSpec {
        TaskSpec(name: "sh", arguments: ["/bin/sh", "-c", script], policy: policy, stdin: .null, stdout: stdout, stderr: stderr)
    }

    /// Waits (polling) until `condition` holds or `limit` passes.
    func eventually(within limit: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + limit
        while clock.now < end {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test func aTaskRunningAtShutdownIsKilledAndItsOutcomeComes() async throws {
        let log = EventLog()
        let supervisor = try Supervisor { log.append($0) }
        let handle = supervisor.spawn(sh("sleep 30", policy: BudgetPolicy(budget: nil)))
        #expect(await eventually { log.kinds.contains { if case .started = $0 { true } else { false } } })
        supervisor.shutdown()
        // Before, the outcome of a task killed at shutdown never came: this await hung.
        let outcome = try #require(await eventually(within: .seconds(5)) { handle.finishedOutcome != nil } ? handle.finishedOutcome : nil,
                                   "no outcome for a task killed at shutdown")
        #expect(outcome.killed && outcome.exitCode == 137, "\(outcome)")
        #expect(log.kinds.contains { if case .exited = $0 { true } else { false } }, "the exited event is reported too")
    }

    @Test func afterShutdownNothingWaitsForever() async throws {
        let supervisor = try Supervisor()
        supervisor.shutdown()
        // A spawn after shutdown never runs: its outcome says so at once (125, as any step
        // before exec that fails), and requests to it answer rather than wait for a loop
        // that is gone.
        let handle = supervisor.spawn(sh("exit 0"))
        let outcome = try #require(handle.finishedOutcome, "no outcome for a spawn after shutdown")
        #expect(outcome.exitCode == 125)
        #expect(await handle.cancel() == .alreadyFinished)
        #expect(await handle.extend(by: .seconds(1)) == .notRunning(.exited))
        #expect(throws: ControlSocketError.self) { try supervisor.serveControl(at: NSTemporaryDirectory() + "/overtime-shut-\(UUID().uuidString).sock") }
    }

    @Test func eventsArriveInOrderAndExitedIsLast() async throws {
        try await withSupervisor { supervisor, log in
            let task = supervisor.spawn(sh(#"printf '{"type":"progress","completed":1,"total":2}\n{"type":"result","value":42}\n' >&3"#))
            let outcome = await task.outcome
            #expect(outcome.succeeded)
            #expect(outcome.result == .number(42))
            // The leader, which named itself nothing, goes by its pid.
            #expect(outcome.lastProgress == Progress(completed: 1, total: 2, reporter: outcome.lastProgress?.reporter))
            #expect(outcome.lastProgress?.reporter?.hasPrefix("pid ") == true, "\(outcome)")
            let kinds = log.kinds
            guard case .started? = kinds.first else { Issue.record("first event \(String(describing: kinds.first))"); return }
            guard case .exited? = kinds.last else { Issue.record("last event \(String(describing: kinds.last))"); return }
            #expect(kinds.contains(.budgetChanged(remaining: .seconds(30), cause: .start)))
            #expect(kinds.contains { if case let .progress(p, _) = $0 { p.completed == 1 && p.total == 2 } else { false } })
            #expect(kinds.contains(.result(.number(42))))
        }
    }

    @Test func aResultWrittenJustBeforeExitIsNeverLost() async throws {
        // The exit can be reaped before the channel is read; the outcome must wait for both.
        try await withSupervisor { supervisor, _ in
            let tasks = (0..<20).map { i in
                supervisor.spawn(sh(#"printf '{"type":"result","value":\#(i)}\n' >&3; exit 0"#))
            }
            for (i, task) in tasks.enumerated() {
                #expect(await task.outcome.result == .number(Double(i)))
            }
        }
    }

    @Test func operatorExtendKeepsAStalledTaskAlive() async throws {
        try await withSupervisor { supervisor, _ in
            let task = supervisor.spawn(sh("sleep 2.5", policy: BudgetPolicy(budget: .seconds(1), grace: .seconds(1))))
            let result = await task.extend(by: .seconds(5))
            guard case let .applied(remaining?, clipped) = result else { Issue.record("\(result)"); return }
            #expect(!clipped)
            #expect(remaining > .seconds(5) && remaining <= .seconds(6))
            let outcome = await task.outcome
            #expect(outcome.succeeded, "\(outcome)")
        }
    }

    @Test func operatorExtendStopsAtMaxRuntimeUnlessPastMax() async throws {
        try await withSupervisor { supervisor, _ in
            // Budgets long enough that a busy machine (or a test process whose threads are
            // all taken by other tests for seconds) cannot expire them before the extends land.
            // (8 s was not enough once: the whole suite at once held an extend back 9 s.)
            let policy = BudgetPolicy(budget: .seconds(20), maxRuntime: .seconds(21), grace: .seconds(1))
            let capped = supervisor.spawn(sh("sleep 32", policy: policy))
            let freed = supervisor.spawn(sh("sleep 22", policy: policy))
            let cappedResult = await capped.extend(by: .seconds(10))
            guard case .applied(_, clipped: true) = cappedResult else { Issue.record("not clipped: \(cappedResult)"); return }
            let freedResult = await freed.extend(by: .seconds(10), pastMax: true)
            guard case .applied(_, clipped: false) = freedResult else { Issue.record("clipped: \(freedResult)"); return }
            let cappedOutcome = await capped.outcome
            #expect(cappedOutcome.cancelReason == .deadline)
            #expect(cappedOutcome.exitCode == 124)
            #expect(await freed.outcome.succeeded)
        }
    }

    @Test func revokeCancelsWithReasonRevokedDespiteProgress() async throws {
        try await withSupervisor { supervisor, log in
            let script = #"i=0; while true; do i=$((i+1)); printf '{"type":"progress","completed":%d}\n' $i >&3; sleep 0.1; done"#
            let task = supervisor.spawn(sh(script, policy: BudgetPolicy(budget: .seconds(30), grace: .seconds(2))))
            #expect(await eventually { log.kinds.contains { if case .progress = $0 { true } else { false } } })
            let result = await task.revoke(after: .milliseconds(300))
            #expect(result == .applied(remaining: .milliseconds(300), clipped: false))
            let outcome = await task.outcome
            #expect(outcome.cancelReason == .revoked)
            #expect(outcome.exitCode == 124)
            #expect(outcome.elapsed < .seconds(10))
        }
    }

    @Test func cancelTellsTheReasonSignalsTheGroupAndIsIdempotent() async throws {
        try await withSupervisor { supervisor, log in
            let dir = try TemporaryDirectory()
            let seen = dir.path("seen")
            // The child reads the cancel line on fd 3 when SIGTERM arrives, and takes 3 s to
            // clean up, so a second cancel lands while it is still cancelling (1 s was too
            // short once, when the test's own thread was held up in a full parallel run).
            let script = """
            trap 'read -r line <&3; read -r line <&3; echo "$line" > \(seen); sleep 3; exit 0' TERM
            printf '{"type":"ready"}\\n' >&3
            while true; do sleep 0.05; done
            """
            let task = supervisor.spawn(sh(script, policy: BudgetPolicy(grace: .seconds(5))))
            // The trap is set before `ready` is sent, so the cancel cannot race it.
            #expect(await eventually { log.kinds.contains(.ready) })
            #expect(await task.cancel(reason: .user) == .cancelling)
            #expect(await task.cancel(reason: .shutdown) == .alreadyCancelling(.user))
            let outcome = await task.outcome
            #expect(outcome.cancelReason == .user)
            #expect(outcome.termination == .exited(0))
            #expect(outcome.exitCode == 0, "a user cancel that exits within grace keeps the child's code")
            let line = try String(contentsOfFile: seen, encoding: .utf8)
            #expect(line.contains(#""type":"cancel""#) && line.contains(#""reason":"user""#) && line.contains(#""grace":5"#))
            #expect(await task.cancel() == .alreadyFinished)
        }
    }

    @Test func aChildIgnoringSIGTERMIsKilledAfterGrace() async throws {
        try await withSupervisor { supervisor, log in
            let task = supervisor.spawn(sh("trap '' TERM; while true; do sleep 0.05; done",
                                           policy: BudgetPolicy(budget: .milliseconds(300), grace: .milliseconds(500))))
            let outcome = await task.outcome
            #expect(outcome.killed)
            #expect(outcome.termination == .signaled(.kill))
            #expect(outcome.exitCode == 137)
            #expect(outcome.cancelReason == .timeout)
            #expect(outcome.elapsed < .seconds(10))
            #expect(log.kinds.contains(.killSent))
        }
    }

    @Test func grandchildrenInTheGroupDieWithTheTask() async throws {
        try await withSupervisor { supervisor, _ in
            let dir = try TemporaryDirectory()
            let pids = dir.path("pids")
            // One grandchild ignores SIGTERM, so only the group SIGKILL can end it.
            let script = "sleep 1000 & echo $! >> \(pids); sh -c \"trap '' TERM; sleep 1000\" & echo $! >> \(pids); wait"
            let task = supervisor.spawn(sh(script, policy: BudgetPolicy(budget: .milliseconds(500), grace: .milliseconds(500))))
            let outcome = await task.outcome
            #expect(outcome.cancelReason == .timeout)
            let recorded = try String(contentsOfFile: pids, encoding: .utf8).split(separator: "\n").compactMap { Int32($0) }
            #expect(recorded.count == 2)
            #expect(await eventually { recorded.allSatisfy(processIsGone) }, "grandchildren \(recorded) still alive")
        }
    }

    @Test func leftoversOfATaskThatExitedAreKilled() async throws {
        try await withSupervisor { supervisor, _ in
            let dir = try TemporaryDirectory()
            let pidFile = dir.path("pid")
            let task = supervisor.spawn(sh("sleep 1000 & echo $! > \(pidFile); exit 0"))
            #expect(await task.outcome.succeeded)
            let pid = try #require(Int32(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(await eventually { processIsGone(pid) })
        }
    }

    @Test func capturedOutputIsCompleteEvenWhenKilled() async throws {
        try await withSupervisor { supervisor, _ in
            let stdout = Mutex<[UInt8]>([])
            let stderr = Mutex<[UInt8]>([])
            // 300 KB on stdout (more than a pipe holds) and 100 KB on stderr, then a stall
            // that ignores SIGTERM: only SIGKILL ends it.
            let script = "trap '' TERM; head -c 300000 /dev/zero | tr '\\0' o; head -c 100000 /dev/zero | tr '\\0' e >&2; sleep 1000"
            let spec = sh(script, policy: BudgetPolicy(budget: .seconds(1), grace: .milliseconds(300)),
                          stdout: .capture { bytes in stdout.withLock { $0 += bytes } },
                          stderr: .capture { bytes in stderr.withLock { $0 += bytes } })
            let outcome = await supervisor.spawn(spec).outcome
            #expect(outcome.killed)
            let out = stdout.withLock { $0 }
            let err = stderr.withLock { $0 }
            #expect(out.count == 300_000 && out.allSatisfy { $0 == UInt8(ascii: "o") })
            #expect(err.count == 100_000 && err.allSatisfy { $0 == UInt8(ascii: "e") })
        }
    }

    @Test func outputThroughATerminalIsCompleteAndSeesATerminal() async throws {
        try await withSupervisor { supervisor, _ in
            let output = Mutex<[UInt8]>([])
            // stdout and stderr share the one terminal; 300 KB in all, then the task exits
            // at once: the tail must not be lost in the terminal's hang-up.
            let script = "test -t 1 && test -t 2 && echo terminal; head -c 200000 /dev/zero | tr '\\0' x; head -c 100000 /dev/zero | tr '\\0' z >&2"
            let spec = sh(script, stdout: .terminal(sizeFrom: -1) { bytes in output.withLock { $0 += bytes } },
                          stderr: .terminal(sizeFrom: -1) { _ in Issue.record("both share stdout's terminal and handler") })
            let outcome = await supervisor.spawn(spec).outcome
            #expect(outcome.succeeded, "\(outcome)")
            let bytes = output.withLock { $0 }
            #expect(bytes.starts(with: Array("terminal\n".utf8)), "the task saw terminals, and its newline arrived as written")
            #expect(bytes.filter { $0 == UInt8(ascii: "x") }.count == 200_000)
            #expect(bytes.filter { $0 == UInt8(ascii: "z") }.count == 100_000)
        }
    }

    @Test func theNoChangeIdIsNeverATarget() async throws {
        // setresuid(-1, -1, -1) succeeds and changes nothing: built in code past the parsers,
        // such an account must still fail the spawn, never leave the task as root.
        try await withSupervisor { supervisor, _ in
            let account = Account(name: nil, uid: UInt32.max, primaryGroupID: UInt32.max, home: nil)
            var spec = sh("exit 0")
            spec.isolation = TaskIsolation(user: account)
            let outcome = await supervisor.spawn(spec).outcome
            guard case let .failedToStart(failure) = outcome.termination else { Issue.record("it ran: \(outcome)"); return }
            #expect(failure.exitCode == 125 && failure.message.hasPrefix("cannot run as user"), "\(failure)")
        }
    }

    @Test func outputToAFileIsComplete() async throws {
        try await withSupervisor { supervisor, _ in
            let dir = try TemporaryDirectory()
            let log = dir.path("task.log")
            let spec = sh("seq 1 20000; echo done >&2", stdout: .file(path: log, append: false), stderr: .file(path: log, append: true))
            #expect(await supervisor.spawn(spec).outcome.succeeded)
            let text = try String(contentsOfFile: log, encoding: .utf8)
            #expect(text.hasPrefix("1\n2\n") && text.contains("20000\n") && text.contains("done\n"))
        }
    }

    @Test func spawnFailuresAreOutcomesNotThrows() async throws {
        try await withSupervisor { supervisor, log in
            let missing = await supervisor.spawn(TaskSpec(arguments: ["overtime-no-such-command"])).outcome
            #expect(missing.exitCode == 127)
            #expect(missing.pid == nil)
            guard case let .failedToStart(failure) = missing.termination else { Issue.record("\(missing)"); return }
            #expect(failure.message.contains("not found"))
            let directory = await supervisor.spawn(TaskSpec(arguments: ["/tmp"])).outcome
            #expect(directory.exitCode == 126)
            let empty = await supervisor.spawn(TaskSpec(arguments: [])).outcome
            #expect(empty.exitCode == 127)
            #expect(log.kinds.filter { if case .exited = $0 { true } else { false } }.count == 3)
        }
    }

    @Test func theChildGetsItsEnvironmentAndOnlyFdsZeroToThree() async throws {
        try await withSupervisor { supervisor, _ in
            let output = Mutex<[UInt8]>([])
            let spec = TaskSpec(
                name: "env-check",
                arguments: ["/bin/sh", "-c", "echo \"$OVERTIME_FD $OVERTIME_TASK $OVERTIME_RUN $EXTRA\"; ls -1 /proc/$$/fd"],
                environment: ["EXTRA": "yes"],
                stdin: .null,
                stdout: .capture { bytes in output.withLock { $0 += bytes } },
                stderr: .discard
            )
            #expect(await supervisor.spawn(spec).outcome.succeeded)
            let lines = String(decoding: output.withLock { $0 }, as: UTF8.self).split(separator: "\n").map(String.init)
            #expect(lines.first == "3 env-check \(supervisor.runID) yes")
            // `ls` lists the shell's descriptors (a glob would show its own directory fd too).
            let fds = Set(lines.dropFirst())
            #expect(fds == ["0", "1", "2", "3"], "open fds: \(fds.sorted())")
        }
    }

    @Test func manyTasksAtOnce() async throws {
        try await withSupervisor { supervisor, _ in
            let tasks = (0..<64).map { i in supervisor.spawn(sh("exit \(i % 7)")) }
            for (i, task) in tasks.enumerated() {
                #expect(await task.outcome.exitCode == Int32(i % 7))
            }
        }
    }

    @Test func childExtendIsAnsweredOnTheChannel() async throws {
        try await withSupervisor { supervisor, _ in
            let output = Mutex<[UInt8]>([])
            let script = #"printf '{"type":"extend","seconds":3,"why":"more data"}\n' >&3; read -r budget <&3; read -r reply <&3; echo "$reply"; sleep 1.5"#
            let spec = sh(script, policy: BudgetPolicy(budget: .seconds(1), grace: .seconds(1)),
                          stdout: .capture { bytes in output.withLock { $0 += bytes } })
            let outcome = await supervisor.spawn(spec).outcome
            #expect(outcome.succeeded, "\(outcome)")
            let reply = String(decoding: output.withLock { $0 }, as: UTF8.self)
            #expect(reply.contains(#""type":"budget""#) && reply.contains(#""granted":true"#), "\(reply)")
        }
    }

    @Test func shutdownKillsWhatIsStillRunning() async throws {
        let dir = try TemporaryDirectory()
        let pidFile = dir.path("pid")
        let supervisor = try Supervisor()
        _ = supervisor.spawn(sh("echo $$ > \(pidFile); exec sleep 1000", policy: BudgetPolicy(budget: nil)))
        #expect(await eventually { FileManager.default.fileExists(atPath: pidFile) })
        try await Task.sleep(for: .milliseconds(100))
        let pid = try #require(Int32(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        supervisor.shutdown()
        // The loop that would reap it has stopped, so it may stay a zombie of this process.
        #expect(await eventually { processIsGone(pid) })
        var status: Int32 = 0
        _ = waitpid(pid, &status, WNOHANG)
    }
}

/// True when `pid` no longer runs: gone, or a zombie waiting for a parent to reap it (an
/// orphan's new parent may be an init that never does).
func processIsGone(_ pid: Int32) -> Bool {
    if kill(pid, 0) != 0 { return true }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")")
    else { return true }
    return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
}

/// A directory under /tmp, removed when the value goes away.
final class TemporaryDirectory: Sendable {
    let root: String

    init() throws {
        var template = Array("/tmp/overtime-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        root = String(cString: made)
    }

    func path(_ name: String) -> String { root + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }
}
