/// The scheduling of a batch as a pure state machine: which task starts when, with which
/// resources; retries; what is skipped and why. No processes, no clock of its own: every
/// input carries `now` and every consequence goes out as an `Action`. The batch runner
/// carries the actions out; unit tests drive it with a fake clock.
public struct QueueMachine: Sendable {
    /// Where a task stands.
    public enum State: Sendable, Equatable {
        /// Not started: waiting for its dependencies, a free slot or resources.
        case waiting
        /// Failed an attempt; the next one starts at `until`.
        case retryWait(until: MonotonicInstant)
        /// Running its `attempt`-th attempt.
        case running(attempt: Int)
        /// Finished: exited 0 (or succeeded in the run being resumed).
        case succeeded
        /// Finished without success, retries spent or not allowed.
        case failed
        /// Never (re)started, for `reason`.
        case skipped(SkipReason)

        public var isFinal: Bool {
            switch self {
            case .succeeded, .failed, .skipped: true
            case .waiting, .retryWait, .running: false
            }
        }
    }

    /// Why a task was not started.
    public enum SkipReason: Sendable, Equatable {
        /// Something it depends on failed (or was skipped), so its condition can never hold.
        case dependency(String)
        /// Less than its `min-start` was left before the batch deadline.
        case deadline
        /// The batch was stopped (`--fail-fast`, SIGINT, SIGTERM) before it started.
        case stopped(CancelReasonWord)
        /// An operator cancelled it before it started; the rest of the batch goes on.
        case cancelled
    }

    /// A cancel reason as a word (kept here so the machine needs nothing from the protocol).
    public typealias CancelReasonWord = String

    /// How an attempt ended, as far as scheduling cares.
    public struct AttemptResult: Sendable, Equatable {
        public var succeeded: Bool
        /// Which retry condition this ending is, if any (nil: never retried, e.g. a user cancel).
        public var retryCondition: RetryCondition?

        public init(succeeded: Bool, retryCondition: RetryCondition?) {
            self.succeeded = succeeded
            self.retryCondition = retryCondition
        }
    }

    public enum Action: Sendable, Equatable {
        /// Start attempt `attempt` of task `index` with these resources: slot ids per slot
        /// pool, amounts per counted pool. `maxRuntime` clips the task to the batch deadline.
        case start(index: Int, attempt: Int, slots: [String: [String]], amounts: [String: Int], maxRuntime: Duration?)
        /// Cancel the running task `index` with this reason.
        case cancel(index: Int, reason: CancelReasonWord)
        /// Task `index` failed an attempt and will be retried at `at`.
        case retry(index: Int, nextAttempt: Int, at: MonotonicInstant)
        /// Task `index` reached a final state after `attempts` attempts.
        case finished(index: Int, state: State, attempts: Int)
    }

    public let job: JobFile
    public private(set) var states: [State]
    public private(set) var attempts: [Int]
    private var ready: [Bool]
    private let deadline: MonotonicInstant?
    private let failFast: Bool
    private var stopping: CancelReasonWord?
    private var freeSlots: [String: [String]] = [:]
    private var freeAmounts: [String: Int] = [:]
    private var held: [Int: (slots: [String: [String]], amounts: [String: Int])] = [:]
    private let indexByName: [String: Int]
    private var dependents: [[Int]]

    /// - Parameters:
    ///   - succeeded: names that succeeded in a run being resumed; they start as succeeded.
    public init(job: JobFile, startedAt: MonotonicInstant, failFast: Bool, succeeded: Set<String> = []) {
        self.job = job
        self.failFast = failFast
        deadline = job.deadline.map { startedAt + $0 }
        let initial: [State] = job.tasks.map { succeeded.contains($0.name) ? .succeeded : .waiting }
        states = initial
        attempts = Array(repeating: 0, count: job.tasks.count)
        ready = states.map { $0 == .succeeded }
        waiting = initial.indices.filter { initial[$0] == .waiting }
        var index: [String: Int] = [:]
        for (i, task) in job.tasks.enumerated() { index[task.name] = i }
        indexByName = index
        dependents = Array(repeating: [], count: job.tasks.count)
        for (i, task) in job.tasks.enumerated() {
            for dependency in task.after {
                if let d = index[dependency.task] { dependents[d].append(i) }
            }
        }
        for (name, pool) in job.resources {
            switch pool {
            case let .slots(ids): freeSlots[name] = ids
            case let .count(total): freeAmounts[name] = total
            }
        }
    }

    /// How many tasks run now.
    public private(set) var runningCount = 0
    /// The tasks not started yet, in file order: the only ones `schedule` looks at.
    private var waiting: [Int]

    /// True when every task is in a final state.
    public var isDone: Bool { states.allSatisfy(\.isFinal) }

    /// When the machine must next be scheduled: a retry backoff ends, or (with a batch
    /// deadline) a task that has not started reaches the last moment it may start.
    public var nextWake: MonotonicInstant? {
        var wake: MonotonicInstant?
        func consider(_ t: MonotonicInstant) { wake = min(wake ?? t, t) }
        for (i, state) in states.enumerated() {
            switch state {
            case let .retryWait(until):
                consider(until)
            case .waiting:
                if let deadline { consider(deadline - job.tasks[i].policy.minStart) }
            default:
                break
            }
        }
        return wake
    }

    // MARK: Inputs

    /// Starts whatever can start now, skips what never can. Call after every other input
    /// and when `nextWake` comes.
    public mutating func schedule(now: MonotonicInstant, _ perform: (Action) -> Void) {
        for i in states.indices {
            if case let .retryWait(until) = states[i], until <= now {
                states[i] = .waiting
                waiting.append(i)
            }
        }
        waiting.sort()
        // One pass starts what can start. Another is needed only when a task finished on the
        // way (skipped), since that may settle an earlier task's `done` dependency.
        var settled = false
        while !settled {
            settled = true
            var stillWaiting: [Int] = []
            for i in waiting {
                if let stopping {
                    finish(i, .skipped(.stopped(stopping)), perform)
                    continue
                }
                let task = job.tasks[i]
                var maxRuntime = task.policy.maxRuntime
                if let deadline {
                    // Checked before anything it waits for: past this point it never starts.
                    let left = deadline - now
                    if left < task.policy.minStart || left <= .zero {
                        finish(i, attempts[i] > 0 ? .failed : .skipped(.deadline), perform)
                        settled = false
                        continue
                    }
                    maxRuntime = min(maxRuntime ?? left, left)
                }
                switch dependencyStatus(of: i) {
                case let .impossible(because):
                    finish(i, .skipped(.dependency(because)), perform)
                    settled = false
                    continue
                case .pending:
                    stillWaiting.append(i)
                    continue
                case .satisfied:
                    break
                }
                guard runningCount < job.concurrency, let grant = allocate(task.resources) else {
                    stillWaiting.append(i)
                    continue
                }
                held[i] = grant
                attempts[i] += 1
                states[i] = .running(attempt: attempts[i])
                runningCount += 1
                perform(.start(index: i, attempt: attempts[i], slots: grant.slots, amounts: grant.amounts, maxRuntime: maxRuntime))
            }
            waiting = stillWaiting
        }
    }

    /// Task `index` reported `ready` (for dependents that wait on `ready`).
    public mutating func taskReady(_ index: Int, now: MonotonicInstant, _ perform: (Action) -> Void) {
        ready[index] = true
        schedule(now: now, perform)
    }

    /// An attempt of task `index` ended.
    public mutating func attemptEnded(_ index: Int, _ result: AttemptResult, now: MonotonicInstant, _ perform: (Action) -> Void) {
        guard case .running = states[index] else { return }
        release(index)
        runningCount -= 1
        let task = job.tasks[index]
        let delay = task.retry.delay(beforeRetry: attempts[index])
        if result.succeeded {
            ready[index] = true
            finish(index, .succeeded, perform)
        } else if stopping == nil, task.retry.shouldRetry(result.retryCondition, attempt: attempts[index]),
                  deadline.map({ now + delay <= $0 - task.policy.minStart }) ?? true {
            states[index] = .retryWait(until: now + delay)
            perform(.retry(index: index, nextAttempt: attempts[index] + 1, at: now + delay))
        } else {
            finish(index, .failed, perform)
            if failFast { stop(reason: "fail-fast", now: now, perform) }
        }
        schedule(now: now, perform)
    }

    /// An operator cancels one task: if it waits (or waits to retry) it is skipped; if it
    /// runs it is cancelled with reason `user` (and not retried).
    /// - Returns: what happened, in a word for the operator.
    public mutating func cancelTask(_ index: Int, now: MonotonicInstant, _ perform: (Action) -> Void) -> String {
        switch states[index] {
        case .waiting, .retryWait:
            waiting.removeAll { $0 == index }
            finish(index, .skipped(.cancelled), perform)
            schedule(now: now, perform)
            return "skipped before it started"
        case .running:
            perform(.cancel(index: index, reason: "user"))
            return "cancelling"
        case .succeeded, .failed, .skipped:
            return "already finished"
        }
    }

    /// Starts nothing more: cancels what runs with `reason`, skips what waits.
    public mutating func stop(reason: CancelReasonWord, now: MonotonicInstant, _ perform: (Action) -> Void) {
        guard stopping == nil else { return }
        stopping = reason
        for i in states.indices {
            switch states[i] {
            case .running: perform(.cancel(index: i, reason: reason))
            case .waiting, .retryWait: finish(i, .skipped(.stopped(reason)), perform)
            default: break
            }
        }
        waiting.removeAll()
    }

    // MARK: Rules

    private enum DependencyStatus {
        case satisfied, pending
        case impossible(String)
    }

    private func dependencyStatus(of index: Int) -> DependencyStatus {
        var pending = false
        for dependency in job.tasks[index].after {
            guard let d = indexByName[dependency.task] else { return .impossible(dependency.task) }
            let state = states[d]
            switch dependency.condition {
            case .success:
                if state == .succeeded { continue }
                if state.isFinal { return .impossible(dependency.task) }
            case .done:
                if state.isFinal { continue }
            case .ready:
                if ready[d] { continue }
                if state.isFinal { return .impossible(dependency.task) }
            }
            pending = true
        }
        return pending ? .pending : .satisfied
    }

    private mutating func allocate(_ request: [String: Int]) -> (slots: [String: [String]], amounts: [String: Int])? {
        var slots: [String: [String]] = [:]
        var amounts: [String: Int] = [:]
        for (pool, amount) in request {
            if let free = freeSlots[pool] {
                guard free.count >= amount else { return nil }
            } else if let free = freeAmounts[pool] {
                guard free >= amount else { return nil }
            } else {
                return nil  // validation refuses unknown pools; never start on one
            }
        }
        for (pool, amount) in request.sorted(by: { $0.key < $1.key }) {
            if let free = freeSlots[pool] {
                slots[pool] = Array(free.prefix(amount))
                freeSlots[pool] = Array(free.dropFirst(amount))
            } else {
                amounts[pool] = amount
                freeAmounts[pool]! -= amount
            }
        }
        return (slots, amounts)
    }

    private mutating func release(_ index: Int) {
        guard let grant = held.removeValue(forKey: index) else { return }
        for (pool, ids) in grant.slots {
            // Back in pool order, so the lowest ids are handed out first again.
            var order: [String] = []
            if case let .slots(all)? = job.resources[pool] { order = all }
            let free = Set(freeSlots[pool, default: []] + ids)
            freeSlots[pool] = order.filter { free.contains($0) }
        }
        for (pool, amount) in grant.amounts { freeAmounts[pool, default: 0] += amount }
    }

    private mutating func finish(_ index: Int, _ state: State, _ perform: (Action) -> Void) {
        states[index] = state
        perform(.finished(index: index, state: state, attempts: attempts[index]))
    }
}
