import Testing
@testable import OvertimeCore

/// Scheduling rules on a fake clock: no processes.
@Suite struct QueueMachineTests {
    struct Harness {
        var machine: QueueMachine
        var now = MonotonicInstant(nanoseconds: 1_000_000_000_000)
        var actions: [QueueMachine.Action] = []

        init(_ job: JobFile, failFast: Bool = false, succeeded: Set<String> = []) {
            machine = QueueMachine(job: job, startedAt: now, failFast: failFast, succeeded: succeeded)
            machine.schedule(now: now, into: &actions)
        }

        var names: [String] { machine.job.tasks.map(\.name) }

        /// Names started since the last `take`, with their attempt numbers.
        mutating func started() -> [String] {
            defer { actions.removeAll() }
            return actions.compactMap { if case let .start(i, _, _, _, _) = $0 { names[i] } else { nil } }
        }

        mutating func end(_ name: String, ok: Bool, condition: RetryCondition? = .exit) {
            let i = names.firstIndex(of: name)!
            machine.attemptEnded(i, .init(succeeded: ok, retryCondition: ok ? nil : condition), now: now, into: &actions)
        }

        mutating func advance(_ d: Duration) {
            now = now + d
            machine.schedule(now: now, into: &actions)
        }

        func state(_ name: String) -> QueueMachine.State {
            machine.states[names.firstIndex(of: name)!]
        }
    }

    static func task(_ name: String, after: [String] = [], when: Dependency.Condition = .success,
                     resources: [String: Int] = [:], retries: RetryPolicy = .none,
                     minStart: Duration = .seconds(5)) -> JobTask {
        JobTask(name: name, command: ["true"], policy: BudgetPolicy(minStart: minStart),
                after: after.map { Dependency(task: $0, condition: when) }, resources: resources, retry: retries)
    }

    @Test func startsInFileOrderUpToTheConcurrency() {
        var h = Harness(JobFile(concurrency: 2, tasks: ["a", "b", "c"].map { Self.task($0) }))
        #expect(h.started() == ["a", "b"])
        h.end("b", ok: true)
        #expect(h.started() == ["c"])
        #expect(h.machine.runningCount == 2)
    }

    @Test func aDependentWaitsForSuccess() {
        var h = Harness(JobFile(concurrency: 4, tasks: [Self.task("prep"), Self.task("train", after: ["prep"])]))
        #expect(h.started() == ["prep"])
        h.end("prep", ok: true)
        #expect(h.started() == ["train"])
    }

    @Test func failureSkipsDependentsTransitively() {
        var h = Harness(JobFile(concurrency: 4, tasks: [Self.task("a"), Self.task("b", after: ["a"]), Self.task("c", after: ["b"]), Self.task("d")]))
        #expect(h.started() == ["a", "d"])
        h.end("a", ok: false)
        #expect(h.state("b") == .skipped(.dependency("a")))
        #expect(h.state("c") == .skipped(.dependency("b")))
        #expect(h.state("d") == .running(attempt: 1), "unrelated work carries on")
    }

    @Test func doneRunsAfterAFailureAndReadyBeforeTheEnd() {
        var h = Harness(JobFile(concurrency: 4, tasks: [
            Self.task("server"), Self.task("client", after: ["server"], when: .ready),
            Self.task("cleanup", after: ["server"], when: .done),
        ]))
        #expect(h.started() == ["server"])
        h.machine.taskReady(0, now: h.now, into: &h.actions)
        #expect(h.started() == ["client"])
        h.end("server", ok: false)
        #expect(h.started() == ["cleanup"])
    }

    @Test func slotPoolsHandOutDisjointIdsAndTakeThemBack() {
        var h = Harness(JobFile(concurrency: 4, resources: ["gpu": .slots(["0", "1", "2"])],
                                tasks: [Self.task("a", resources: ["gpu": 2]), Self.task("b", resources: ["gpu": 2]), Self.task("c", resources: ["gpu": 1])]))
        let grants = h.actions.compactMap { if case let .start(i, _, slots, _, _) = $0 { (h.names[i], slots["gpu"] ?? []) } else { nil } }
        #expect(grants.map(\.0) == ["a", "c"], "b waits for two free GPUs; c fits beside a")
        #expect(grants[0].1 == ["0", "1"] && grants[1].1 == ["2"])
        _ = h.started()
        h.end("a", ok: true)
        let next = h.actions.compactMap { if case let .start(i, _, slots, _, _) = $0 { (h.names[i], slots["gpu"] ?? []) } else { nil } }
        #expect(next.map(\.0) == ["b"] && next[0].1 == ["0", "1"])
    }

    @Test func countedPoolsAreDebitedAndCredited() {
        var h = Harness(JobFile(concurrency: 4, resources: ["mem_gb": .count(10)],
                                tasks: [Self.task("a", resources: ["mem_gb": 6]), Self.task("b", resources: ["mem_gb": 6]), Self.task("c", resources: ["mem_gb": 4])]))
        #expect(h.started() == ["a", "c"])
        h.end("c", ok: true)
        #expect(h.started().isEmpty, "6 + 6 > 10")
        h.end("a", ok: true)
        #expect(h.started() == ["b"])
    }

    @Test func retriesWithDoublingBackoffThenGivesUp() {
        let retry = RetryPolicy(maxRetries: 2, backoff: .seconds(1), maxBackoff: .seconds(60), on: [.exit])
        var h = Harness(JobFile(concurrency: 1, tasks: [Self.task("flaky", retries: retry)]))
        #expect(h.started() == ["flaky"])
        h.end("flaky", ok: false)
        h.advance(.milliseconds(900))
        #expect(h.started().isEmpty)
        h.advance(.milliseconds(200))
        #expect(h.started() == ["flaky"])
        h.end("flaky", ok: false)
        h.advance(.milliseconds(1900))
        #expect(h.started().isEmpty, "the second backoff is 2 s")
        h.advance(.milliseconds(200))
        #expect(h.started() == ["flaky"])
        #expect(h.machine.attempts(of: 0) == 3)
        h.end("flaky", ok: false)
        #expect(h.state("flaky") == .failed)
    }

    @Test func onlyTheListedOutcomesRetry() {
        let retry = RetryPolicy(maxRetries: 3, on: [.timeout])
        var h = Harness(JobFile(concurrency: 1, tasks: [Self.task("a", retries: retry), Self.task("b", retries: retry)]))
        _ = h.started()
        h.end("a", ok: false, condition: .exit)
        #expect(h.state("a") == .failed)
        _ = h.started()
        h.end("b", ok: false, condition: nil)  // a user cancel: never retried
        #expect(h.state("b") == .failed)
    }

    @Test func failFastCancelsWhatRunsAndSkipsTheQueue() {
        var h = Harness(JobFile(concurrency: 2, tasks: ["a", "b", "c"].map { Self.task($0) }), failFast: true)
        _ = h.started()
        h.end("a", ok: false)
        #expect(h.actions.contains(.cancel(index: 1, reason: .failFast)))
        #expect(h.state("c") == .skipped(.stopped(.failFast)))
        h.end("b", ok: false, condition: nil)
        #expect(h.machine.isDone)
    }

    @Test func batchDeadlineSkipsLateStartsAndEndsTasksByIt() {
        let job = JobFile(concurrency: 1, deadline: .seconds(60), tasks: [Self.task("first"), Self.task("second", minStart: .seconds(10))])
        var h = Harness(job)
        let endsBy = h.actions.compactMap { if case let .start(_, _, _, _, instant) = $0 { instant } else { nil } }
        #expect(endsBy == [h.now + .seconds(60)], "the deadline itself, an instant, whenever the task starts")
        _ = h.started()
        h.advance(.seconds(55))
        h.end("first", ok: true)
        #expect(h.state("second") == .skipped(.deadline))
    }

    @Test func resumedSuccessesCountForDependents() {
        var h = Harness(JobFile(concurrency: 2, tasks: [Self.task("a"), Self.task("b", after: ["a"])]), succeeded: ["a"])
        #expect(h.started() == ["b"])
        #expect(h.state("a") == .succeeded)
    }

    @Test func stopCancelsRunningAndSkipsWaiting() {
        var h = Harness(JobFile(concurrency: 1, tasks: ["a", "b"].map { Self.task($0) }))
        _ = h.started()
        h.machine.stop(reason: .shutdown, now: h.now, into: &h.actions)
        #expect(h.actions.contains(.cancel(index: 0, reason: .shutdown)))
        #expect(h.state("b") == .skipped(.stopped(.shutdown)))
        h.end("a", ok: false, condition: nil)
        #expect(h.machine.isDone)
        #expect(h.started().isEmpty)
    }

    @Test func aFullQueueStillSkipsAtOnce() {
        // The skips do not wait for a free slot: what can never start is reported as soon
        // as that is known, while the one slot stays busy.
        let job = JobFile(concurrency: 1, deadline: .seconds(60), tasks: [
            Self.task("long"), Self.task("b"), Self.task("c", after: ["b"]), Self.task("cleanup", after: ["b"], when: .done),
            Self.task("late", minStart: .seconds(50)),
        ])
        var h = Harness(job)
        #expect(h.started() == ["long"])
        let cancelled = h.machine.cancelTask(1, now: h.now, into: &h.actions)
        #expect(cancelled == "skipped before it started")
        #expect(h.state("c") == .skipped(.dependency("b")))
        #expect(h.state("cleanup") == .waiting, "its condition holds; it waits for the slot")
        #expect(h.machine.nextWake == h.now + .seconds(10), "the last moment 'late' may start")
        h.advance(.seconds(11))
        #expect(h.state("late") == .skipped(.deadline))
        h.end("long", ok: true)
        #expect(h.started() == ["cleanup"])
        h.end("cleanup", ok: true)
        #expect(h.machine.isDone)
    }
}
