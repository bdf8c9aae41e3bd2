import Foundation
import OvertimeProtocol
import OvertimeTestSupport
import Testing
@testable import Overtime

// The job file's memory fields and its retry policy (the helpers are JobFileTests.swift's).

// MARK: - Memory

@Suite struct JobFileMemoryTests {
    @Test func memoryFieldsDecodeAndMergeUnderTheTasksOwn() throws {
        let json = tasks(#"""
        {"name": "a", "command": ["a"]},
        {"name": "b", "command": ["b"], "memory-max": "1.5G", "memory-warn": "1G"},
        {"name": "c", "command": ["c"], "memory-max": "none"},
        {"name": "d", "command": ["d"], "memory-warn": "50%"},
        {"name": "e", "command": ["e"], "memory-max": "4096"}
        """#, top: #""defaults": {"memory-max": "512M", "memory-warn": "80%"}"#)
        let job = try JobFile.parse(Array(json.utf8), origin: "j.json")
        #expect(job.tasks[0].memory == MemoryPolicy(max: 512 << 20, warn: .share(0.8)))
        #expect(job.tasks[1].memory == MemoryPolicy(max: 3 << 29, warn: .bytes(1 << 30)))
        // "none" turns the defaults' watchdog off; their warning level stays, unused.
        #expect(job.tasks[2].memory.max == nil)
        #expect(job.tasks[3].memory == MemoryPolicy(max: 512 << 20, warn: .share(0.5)))
        #expect(job.tasks[4].memory.max == 4096)
    }

    @Test func aTaskWithoutMemoryFieldsHasNoWatchdog() throws {
        let job = try JobFile.parse(Array(oneTask().utf8), origin: "j.json")
        #expect(job.tasks[0].memory == .none)
        let maxOnly = try JobFile.parse(Array(oneTask(#""memory-max": "2GiB""#).utf8), origin: "j.json")
        #expect(maxOnly.tasks[0].memory == MemoryPolicy(max: 2 << 30, warn: MemoryPolicy.defaultWarn))
    }

    @Test(arguments: [
        ("memory_max", "memory-max"), ("maxMemory", "memory-max"), ("memory_limit", "memory-max"), ("mem", "memory-max"),
        ("MemoryMax", "memory-max"), ("memory_warn", "memory-warn"), ("memWarn", "memory-warn"),
    ])
    func otherSpellingsAreAnsweredWithTheField(_ written: String, _ meant: String) {
        let problems = jobFileProblems(oneTask("\"\(written)\": \"2G\""))
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.contains("field '\(written)'") == true, "\(problems)")
        #expect(problems.first?.contains("did you mean '\(meant)'?") == true, "\(problems)")
    }

    @Test func aWarningLevelBothDefaultsGiveIsJudgedOnceThere() {
        let json = tasks(#"{"name": "a", "command": ["a"]}, {"name": "b", "command": ["b"]}"#,
                         top: #""defaults": {"memory-max": "1G", "memory-warn": "2G"}"#)
        #expect(jobFileProblems(json) == ["defaults: field 'memory-warn': 2 GiB is above memory-max (1 GiB); the warning comes before the cancel, so set it lower, e.g. \"90%\" (the default)"])
    }

    @Test func aMemoryMaxThatCannotBeReadIsTheOnlyProblem() {
        // Its warning level would otherwise be refused as one without a max.
        let problems = jobFileProblems(oneTask(#""memory-max": "lots", "memory-warn": "80%""#))
        #expect(problems == ["task 't': field 'memory-max': 'lots' is not a size; expected a size such as 512M, 1.5G or 2GiB, or \"none\" for no limit"])
        let inherited = jobFileProblems(oneTask(#""memory-warn": "80%""#, top: #""defaults": {"memory-max": 8}"#))
        #expect(inherited.count == 1, "\(inherited)")
        #expect(inherited.first?.hasPrefix("defaults: field 'memory-max': 8 has no unit") == true, "\(inherited)")
    }

    @Test func aJobBuiltInCodeHasItsMemoryChecked() {
        let job = JobFile(tasks: [
            JobTask(name: "a", command: ["a"], memory: MemoryPolicy(max: nil, warn: .share(0.5))),
            JobTask(name: "b", command: ["b"], memory: MemoryPolicy(max: 1 << 30, warn: .bytes(2 << 30))),
            JobTask(name: "c", command: ["c"], memory: MemoryPolicy(max: 1 << 30, warn: .bytes(1 << 29))),
        ])
        do {
            try job.validate()
            Issue.record("accepted")
        } catch {
            #expect(error.problems == [
                "task 'a': field 'memory-warn' is set but the task has no memory-max; the warning comes ahead of a memory cancel, so give memory-max too, e.g. \"memory-max\": \"8G\"",
                "task 'b': field 'memory-warn': 2 GiB is above memory-max (1 GiB); the warning comes before the cancel, so set it lower, e.g. \"90%\" (the default)",
            ])
        }
    }
}

// MARK: - Retries

@Suite struct RetryPolicyTests {
    @Test func retriesAsANumberUseTheDefaults() throws {
        let job = try JobFile.parse(Array(oneTask(#""retries": 3"#).utf8), origin: "j.json")
        let retry = job.tasks[0].retry
        #expect(retry == RetryPolicy(maxRetries: 3, backoff: .seconds(1), maxBackoff: .seconds(60), on: [.timeout, .exit]))
        #expect(retry.maxAttempts == 4)
        #expect(RetryPolicy.none.maxRetries == 0)
        #expect(RetryPolicy.none.maxAttempts == 1)
    }

    @Test func backoffDoublesUpToTheCap() {
        let retry = RetryPolicy(maxRetries: 10, backoff: .seconds(10), maxBackoff: .seconds(60))
        #expect((1...6).map { retry.delay(beforeRetry: $0) } == [10, 20, 40, 60, 60, 60].map { Duration.seconds($0) })
        #expect(RetryPolicy(maxRetries: 1000, backoff: .zero).delay(beforeRetry: 1000) == .zero)
        #expect(RetryPolicy(backoff: .seconds(1), maxBackoff: DurationText.maximum).delay(beforeRetry: 10_000) == DurationText.maximum)
    }

    private static func outcome(_ termination: Termination, _ reason: CancelReason? = nil, killed: Bool = false) -> TaskOutcome {
        TaskOutcome(task: TaskRef(id: 1, name: "t"), pid: 42, termination: termination, cancelReason: reason,
                    killed: killed, elapsed: .seconds(1), lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
    }

    @Test func outcomesMapToConditions() {
        #expect(RetryCondition(outcome: Self.outcome(.exited(0))) == nil)
        #expect(RetryCondition(outcome: Self.outcome(.exited(3))) == .exit)
        #expect(RetryCondition(outcome: Self.outcome(.signaled(.segmentationFault))) == .signal)
        #expect(RetryCondition(outcome: Self.outcome(.signaled(.kill))) == .signal)
        #expect(RetryCondition(outcome: Self.outcome(.exited(0), .timeout)) == .timeout)
        #expect(RetryCondition(outcome: Self.outcome(.signaled(.kill), .timeout, killed: true)) == .timeout)
        #expect(RetryCondition(outcome: Self.outcome(.exited(143), .deadline)) == .deadline)
        #expect(RetryCondition(outcome: Self.outcome(.signaled(.terminate), .revoked)) == .revoked)
        #expect(RetryCondition(outcome: Self.outcome(.signaled(.terminate), .user)) == nil)
        #expect(RetryCondition(outcome: Self.outcome(.exited(1), .shutdown)) == nil)
        #expect(RetryCondition(outcome: Self.outcome(.failedToStart(SpawnFailure(errno: 2, message: "not found")))) == nil)
    }

    @Test func aUserCancelNeverRetriesWhateverOnSays() {
        let everything = RetryPolicy(maxRetries: 5, on: Set(RetryCondition.allCases))
        #expect(!everything.shouldRetry(after: Self.outcome(.signaled(.terminate), .user), attempt: 1))
        #expect(!everything.shouldRetry(after: Self.outcome(.signaled(.terminate), .shutdown), attempt: 1))
        #expect(everything.shouldRetry(after: Self.outcome(.signaled(.terminate), .timeout), attempt: 1))
    }

    @Test func retriesStopAtMaxAndFollowOn() {
        let retry = RetryPolicy(maxRetries: 2)  // on: timeout, exit
        let failed = Self.outcome(.exited(1))
        #expect(retry.shouldRetry(after: failed, attempt: 1))
        #expect(retry.shouldRetry(after: failed, attempt: 2))
        #expect(!retry.shouldRetry(after: failed, attempt: 3))
        #expect(!retry.shouldRetry(after: Self.outcome(.signaled(.segmentationFault)), attempt: 1))
        #expect(!retry.shouldRetry(after: Self.outcome(.exited(0)), attempt: 1))
        #expect(!RetryPolicy.none.shouldRetry(after: failed, attempt: 1))
    }

    @Test func onTakesTheNewClassesTheAliasAndExitStatuses() throws {
        let json = oneTask(#""retries": {"max": 2, "on": ["oom", "memory", "failed", "exit:3", "exit:75", "exit: 3"]}"#)
        let retry = try JobFile.parse(Array(json.utf8), origin: "j.json").tasks[0].retry
        #expect(retry.on == [.oom, .memory, .exit])
        #expect(retry.exitStatuses == [3, 75])
        let codesOnly = try JobFile.parse(Array(oneTask(#""retries": {"max": 1, "on": ["exit:3"]}"#).utf8), origin: "j.json")
        #expect(codesOnly.tasks[0].retry.on.isEmpty)
        #expect(codesOnly.tasks[0].retry.exitStatuses == [3])
        #expect(RetryCondition(word: "failed") == .exit)
        #expect(RetryCondition(word: "oom") == .oom)
        #expect(RetryCondition(word: "exit:3") == nil)
    }

    private static func oomOutcome(_ termination: Termination, _ reason: CancelReason? = nil, kills: Int = 1) -> TaskOutcome {
        var outcome = outcome(termination, reason)
        outcome.oomKills = kills
        return outcome
    }

    @Test func anOOMKillIsItsOwnClassAheadOfExitSignalAndMemory() {
        #expect(RetryCondition(outcome: Self.oomOutcome(.signaled(.kill))) == .oom)
        // A child was killed and the leader exited non-zero because of it.
        #expect(RetryCondition(outcome: Self.oomOutcome(.exited(1))) == .oom)
        // The kernel's hard limit struck while the memory cancel waited out its grace.
        #expect(RetryCondition(outcome: Self.oomOutcome(.signaled(.kill), .memory)) == .oom)
        // Counted, but none killed: the class of how it ended.
        #expect(RetryCondition(outcome: Self.oomOutcome(.signaled(.kill), kills: 0)) == .signal)
        // A final cancel stays final.
        #expect(RetryCondition(outcome: Self.oomOutcome(.signaled(.kill), .user)) == nil)

        let onOOM = RetryPolicy(maxRetries: 1, on: [.oom])
        let onExitAndSignal = RetryPolicy(maxRetries: 1, on: [.exit, .signal])
        #expect(onOOM.shouldRetry(after: Self.oomOutcome(.exited(1)), attempt: 1))
        #expect(!onExitAndSignal.shouldRetry(after: Self.oomOutcome(.exited(1)), attempt: 1))
        #expect(!onExitAndSignal.shouldRetry(after: Self.oomOutcome(.signaled(.kill)), attempt: 1))
        #expect(!onOOM.shouldRetry(after: Self.outcome(.signaled(.kill)), attempt: 1))
    }

    @Test func aMemoryCancelIsRetriedUnderMemoryOnly() {
        let cancelled = Self.outcome(.exited(1), .memory)
        let killed = Self.outcome(.signaled(.kill), .memory, killed: true)
        #expect(RetryCondition(outcome: cancelled) == .memory)
        #expect(RetryCondition(outcome: killed) == .memory)
        #expect(RetryPolicy(maxRetries: 1, on: [.memory]).shouldRetry(after: cancelled, attempt: 1))
        #expect(RetryPolicy(maxRetries: 1, on: [.memory]).shouldRetry(after: killed, attempt: 1))
        #expect(!RetryPolicy(maxRetries: 1, on: [.exit, .timeout, .oom]).shouldRetry(after: cancelled, attempt: 1))
    }

    @Test func eachClassIsRetriedWhenListedAndOnlyThen() {
        let endings: [(RetryCondition, TaskOutcome)] = [
            (.timeout, Self.outcome(.signaled(.terminate), .timeout)),
            (.deadline, Self.outcome(.exited(143), .deadline)),
            (.revoked, Self.outcome(.signaled(.terminate), .revoked)),
            (.exit, Self.outcome(.exited(2))),
            (.signal, Self.outcome(.signaled(.segmentationFault))),
            (.memory, Self.outcome(.signaled(.terminate), .memory)),
            (.oom, Self.oomOutcome(.signaled(.kill))),
        ]
        #expect(Set(endings.map(\.0)) == Set(RetryCondition.allCases))
        for (listed, _) in endings {
            let policy = RetryPolicy(maxRetries: 1, on: [listed])
            for (condition, outcome) in endings {
                #expect(policy.shouldRetry(after: outcome, attempt: 1) == (condition == listed),
                        "on [\(listed)], an attempt ending in \(condition)")
            }
        }
    }

    @Test func anExitStatusIsRetriedOnItsOwn() {
        let policy = RetryPolicy(maxRetries: 2, on: [], exitStatuses: [3, 75])
        #expect(policy.shouldRetry(after: Self.outcome(.exited(3)), attempt: 1))
        #expect(policy.shouldRetry(after: Self.outcome(.exited(75)), attempt: 2))
        #expect(!policy.shouldRetry(after: Self.outcome(.exited(3)), attempt: 3), "retries run out")
        #expect(!policy.shouldRetry(after: Self.outcome(.exited(4)), attempt: 1))
        // Only a status the task exited with on its own: not one a cancel or the OOM killer left.
        #expect(!policy.shouldRetry(after: Self.outcome(.exited(3), .timeout), attempt: 1))
        #expect(!policy.shouldRetry(after: Self.oomOutcome(.exited(3)), attempt: 1))
        // A death by signal 9 is not exit status 137, though a shell shows it so.
        #expect(!RetryPolicy(maxRetries: 1, on: [], exitStatuses: [137]).shouldRetry(after: Self.outcome(.signaled(.kill)), attempt: 1))
        // `exit` takes every status; listing some as well changes nothing.
        #expect(RetryPolicy(maxRetries: 1, on: [.exit], exitStatuses: [3]).shouldRetry(after: Self.outcome(.exited(4)), attempt: 1))

        #expect(QueueMachine.AttemptResult(Self.outcome(.exited(3))) == .init(succeeded: false, retryCondition: .exit, exitStatus: 3))
        #expect(QueueMachine.AttemptResult(Self.outcome(.signaled(.kill))).exitStatus == nil)
        #expect(QueueMachine.AttemptResult(Self.outcome(.exited(0))) == .init(succeeded: true, retryCondition: nil))
    }

    @Test func theJournalSaysWhatEndedTheAttempt() {
        #expect(BatchState.failureReason(Self.oomOutcome(.signaled(.kill))) == "oom")
        #expect(BatchState.failureReason(Self.oomOutcome(.signaled(.kill), .memory)) == "oom")
        #expect(BatchState.failureReason(Self.outcome(.exited(1), .memory)) == "memory")
        #expect(BatchState.failureReason(Self.outcome(.signaled(.kill), .memory, killed: true)) == "memory, killed")
        #expect(BatchState.failureReason(Self.outcome(.exited(3))) == "exit 3")
        #expect(Self.oomOutcome(.signaled(.kill)).kind.rawValue == "oom")
        #expect(Self.outcome(.exited(3)).kind.rawValue == "failed")
    }
}
