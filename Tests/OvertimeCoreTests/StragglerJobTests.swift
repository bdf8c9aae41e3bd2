import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// A job file's `stragglers` and `peer-group` as read, and the queue's restart of a
/// straggler on a fake clock.
@Suite struct StragglerJobTests {
    static let host = JobFileHost(accounts: AccountLookup(
        user: { name throws(TaskIsolation.ParseError) in throw TaskIsolation.ParseError("no user \(name)") },
        group: { name throws(TaskIsolation.ParseError) in throw TaskIsolation.ParseError("no group \(name)") }))

    static func parse(_ json: String) -> Result<JobFile, JobFileError> {
        Result { () throws(JobFileError) in try JobFile.parse(Array(json.utf8), origin: "j.json", directory: "/srv", host: host) }
    }

    @Test func theTopLevelAndATasksOwnAreRead() throws {
        let job = try Self.parse(#"""
        {"stragglers": {"below": 0.4, "action": "restart", "warm-up": "2m"},
         "tasks": [{"name": "s", "command": ["t"], "array": "0-3"},
                   {"name": "e", "command": ["t"], "peer-group": "evals", "stragglers": {"below": 0.25}},
                   {"name": "f", "command": ["t"], "peer-group": "evals"}]}
        """#).get()
        #expect(job.stragglers == StragglerPolicy(below: 0.4, action: .restart, warmUp: .seconds(120)))
        #expect(job.tasks[0].stragglers == nil && job.tasks[0].peerGroup == nil)
        #expect(job.tasks[1].stragglers == StragglerPolicy(below: 0.25, action: .warn, warmUp: StragglerPolicy.defaultWarmUp))
        #expect(job.tasks[1].peerGroup == "evals" && job.tasks[2].peerGroup == "evals")
    }

    @Test func badValuesAreRefusedEachWithItsField() {
        guard case let .failure(error) = Self.parse(#"""
        {"stragglers": {"below": 1, "action": "kill", "warm-up": -1, "when": 3},
         "defaults": {"stragglers": {}},
         "tasks": [{"name": "a", "command": ["t"], "stragglers": {"below": 0.5}},
                   {"name": "b", "command": ["t"], "array": "0-1", "peer-group": ""}]}
        """#) else {
            Issue.record("accepted")
            return
        }
        let problems = error.problems
        #expect(problems.contains { $0.hasPrefix("field 'stragglers.below': 1 is not between 0 and 1") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("field 'stragglers.action': \"kill\" is not an action") && $0.hasSuffix("expected 'warn' or 'restart'") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("field 'stragglers.warm-up': -1 is negative") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("field 'stragglers.when' is not a field of 'stragglers'") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("defaults: field 'stragglers' is not a field of 'defaults'") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("task 'a': field 'stragglers' is for a task with peers") }, "\(problems)")
        #expect(problems.contains { $0 == "task 'b': field 'peer-group' is empty; name the group, e.g. \"shards\"" }, "\(problems)")
    }

    /// Element 1 of a 3-element array on two GPUs, restarted as a straggler.
    @Test func aRestartIsAnAttemptOfItsOwnOnAnotherSlot() {
        let (indices, _) = try! ArrayIndices.parse("0-2")
        let task = JobTask(name: "s", command: ["t"], resources: ["gpu": 1], retry: .none, sweep: Sweep(elements: .array(indices)))
        var machine = QueueMachine(job: JobFile(concurrency: 3, resources: ["gpu": .slots(["0", "1", "2"])], tasks: [task]),
                                   startedAt: MonotonicInstant(nanoseconds: 0), failFast: false)
        let now = MonotonicInstant(nanoseconds: 1_000_000_000)
        var actions: [QueueMachine.Action] = []
        machine.schedule(now: now, into: &actions)
        #expect(actions.count == 3)
        actions.removeAll()
        machine.restartStraggler(1, now: now, into: &actions)
        #expect(actions == [.cancel(index: 1, reason: .straggler)])
        actions.removeAll()
        machine.restartStraggler(1, now: now, into: &actions)
        #expect(actions.isEmpty, "one cancel for one restart")
        // Element 0 ends, freeing GPU 0; element 1's cancelled attempt ends, freeing GPU 1.
        machine.attemptEnded(0, .init(succeeded: true, retryCondition: nil), now: now, into: &actions)
        actions.removeAll()
        machine.attemptEnded(1, .init(succeeded: false, retryCondition: nil), now: now, into: &actions)
        #expect(actions.first == .retry(index: 1, nextAttempt: 2, at: now), "at once, though it has no retries: \(actions)")
        #expect(actions.dropFirst().first == .start(index: 1, attempt: 2, slots: ["gpu": ["0"]], amounts: [:], endsBy: nil),
                "GPU 0 rather than the GPU 1 it was slow on: \(actions)")
        actions.removeAll()
        // Its second attempt fails: no retries are left, as before the restart.
        machine.attemptEnded(1, .init(succeeded: false, retryCondition: .exit), now: now, into: &actions)
        #expect(machine.state(of: 1) == .failed)
    }

    @Test func anOperatorsCancelOfARestartingTaskIsNotUndone() {
        let (indices, _) = try! ArrayIndices.parse("0-2")
        var machine = QueueMachine(job: JobFile(tasks: [JobTask(name: "s", command: ["t"], sweep: Sweep(elements: .array(indices)))]),
                                   startedAt: MonotonicInstant(nanoseconds: 0), failFast: false)
        let now = MonotonicInstant(nanoseconds: 1)
        var actions: [QueueMachine.Action] = []
        machine.schedule(now: now, into: &actions)
        machine.restartStraggler(2, now: now, into: &actions)
        _ = machine.cancelTask(2, now: now, into: &actions)
        machine.attemptEnded(2, .init(succeeded: false, retryCondition: nil), now: now, into: &actions)
        #expect(machine.state(of: 2) == .failed)
    }
}
