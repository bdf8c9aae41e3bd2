import OvertimeTestSupport
import Testing
@testable import OvertimeCore

/// The queue's cost per event must not grow with the queue: a batch of hundreds of
/// thousands of tasks is driven through the machine on a fake clock, with a generous
/// bound on wall time that a machine rescanning every task per event cannot meet.
@Suite struct QueueMachineScaleTests {
    /// What a run through the machine came to.
    struct Tally: Sendable {
        var finished: [QueueMachine.State] = []
        var startOrder: [Int] = []
        var finishedActions = 0
        var peakRunning = 0
        var seconds = 0.0
    }

    /// Runs `job` to the end like the batch runner would, with every attempt ending in the
    /// order it started (FIFO), one fake millisecond apart. `fails(index, attempt)` says
    /// which attempts fail. A task is reported ready as it starts. Checks on the way that
    /// the concurrency holds and that no slot id is handed out twice at once.
    static func drive(_ job: JobFile, fails: (Int, Int) -> Bool = { _, _ in false }) -> Tally {
        var tally = Tally()
        var now = MonotonicInstant(nanoseconds: 1_000_000_000_000)
        var machine = QueueMachine(job: job, startedAt: now, failFast: false)
        var running: [(index: Int, attempt: Int, slots: [String])] = []
        var head = 0
        var slotsInUse: Set<String> = []
        var pending: [QueueMachine.Action] = []
        let clock = ContinuousClock()
        let start = clock.now
        machine.schedule(now: now, into: &pending)
        while true {
            var started: [Int] = []
            for action in pending {
                switch action {
                case let .start(index, attempt, slots, _, _):
                    let ids = slots.values.flatMap { $0 }
                    for id in ids { #expect(slotsInUse.insert(id).inserted, "slot \(id) handed out twice") }
                    running.append((index, attempt, ids))
                    tally.startOrder.append(index)
                    started.append(index)
                case .finished:
                    tally.finishedActions += 1
                default:
                    break
                }
            }
            pending.removeAll(keepingCapacity: true)
            tally.peakRunning = max(tally.peakRunning, running.count - head)
            for index in started { machine.taskReady(index, now: now, into: &pending) }
            if !pending.isEmpty { continue }
            now = now + .milliseconds(1)
            if head < running.count {
                let (index, attempt, ids) = running[head]
                head += 1
                for id in ids { slotsInUse.remove(id) }
                let failed = fails(index, attempt)
                machine.attemptEnded(index, .init(succeeded: !failed, retryCondition: failed ? .exit : nil), now: now, into: &pending)
            } else if let wake = machine.nextWake {
                now = max(now, wake)
                machine.schedule(now: now, into: &pending)
            } else {
                break
            }
        }
        tally.seconds = start.duration(to: clock.now).seconds
        tally.finished = machine.states
        #expect(machine.isDone)
        return tally
    }

    static func plainTasks(_ count: Int) -> [JobTask] {
        (0..<count).map { JobTask(name: "t\($0)", command: ["/bin/true"]) }
    }

    // Each on a thread of its own (offThePool): seconds of pure computation on one of the
    // test process's few shared threads would stall the real-process tests' polling.
    @Test func fiftyThousandTasksAtConcurrencyEight() async throws {
        let count = 50_000
        let tally = try await offThePool { Self.drive(JobFile(concurrency: 8, tasks: Self.plainTasks(count))) }
        #expect(tally.startOrder == Array(0..<count), "file order")
        #expect(tally.finished.allSatisfy { $0 == .succeeded })
        #expect(tally.finishedActions == count)
        #expect(tally.peakRunning == 8)
        // A machine that rescans the queue on every event took 28 s for 5,000 tasks and 89 s
        // for 10,000 in a debug build here, growing with the square: over half an hour for
        // 50,000 (a size kept small enough not to load the rest of the parallel suite).
        #expect(tally.seconds < 60, "took \(tally.seconds) s")
    }

    @Test func fiftyThousandTasksWithDependenciesResourcesAndRetries() async throws {
        let count = 50_000
        let conditions: [Dependency.Condition] = [.success, .done, .ready]
        let tasks = (0..<count).map { i in
            var task = JobTask(name: "t\(i)", command: ["/bin/true"])
            // Chains of four: each link waits on the one before it, one condition of each kind.
            if i % 4 != 0 { task.after = [Dependency(task: "t\(i - 1)", condition: conditions[i % 4 - 1])] }
            if i % 3 == 0 { task.resources["gpu"] = 1 }
            if i % 5 == 0 { task.resources["mem_gb"] = 4 }
            if i % 50 == 0 { task.retry = RetryPolicy(maxRetries: 1, backoff: .milliseconds(10), on: [.exit]) }
            return task
        }
        let job = JobFile(concurrency: 8, resources: ["gpu": .slots(["0", "1", "2", "3"]), "mem_gb": .count(12)], tasks: tasks)
        // Every 50th task fails its first attempt and succeeds on the retry; every 97th
        // fails for good, which skips what waits on it for success.
        let tally = try await offThePool { Self.drive(job) { index, attempt in index % 97 == 0 || (index % 50 == 0 && attempt == 1) } }
        #expect(tally.finishedActions == count)
        #expect(tally.peakRunning <= 8)
        var expected: [QueueMachine.State] = []
        for i in 0..<count {
            if i % 97 == 0 {
                expected.append(.failed)
            } else if i % 4 == 1, expected[i - 1] != .succeeded {
                expected.append(.skipped(.dependency("t\(i - 1)")))
            } else {
                expected.append(.succeeded)
            }
        }
        #expect(tally.finished == expected)
        #expect(tally.seconds < 90, "took \(tally.seconds) s")
    }
}
