import OvertimeProtocol

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
        case stopped(CancelReason)
        /// An operator cancelled it before it started; the rest of the batch goes on.
        case cancelled
    }


    /// How an attempt ended, as far as scheduling cares.
    public struct AttemptResult: Sendable, Equatable {
        public var succeeded: Bool
        /// Which retry condition this ending is, if any (nil: never retried, e.g. a user cancel).
        public var retryCondition: RetryCondition?
        /// Its status when it exited on its own (condition `exit`), for `exit:N` retries.
        public var exitStatus: Int32?

        public init(succeeded: Bool, retryCondition: RetryCondition?, exitStatus: Int32? = nil) {
            self.succeeded = succeeded
            self.retryCondition = retryCondition
            self.exitStatus = exitStatus
        }

        /// How an attempt that ended with `outcome` counts.
        public init(_ outcome: TaskOutcome) {
            let condition = RetryCondition(outcome: outcome)
            self.init(succeeded: outcome.succeeded, retryCondition: condition,
                      exitStatus: condition == .exit ? outcome.preservedStatus : nil)
        }
    }

    public enum Action: Sendable, Equatable {
        /// Start attempt `attempt` of task `index` with these resources: slot ids per slot
        /// pool, amounts per counted pool. `endsBy` is the batch deadline, the instant the
        /// task must end by whenever it starts (`BudgetPolicy.endsBy`).
        case start(index: Int, attempt: Int, slots: [String: [String]], amounts: [String: Int], endsBy: MonotonicInstant?)
        /// Cancel the running task `index` with this reason.
        case cancel(index: Int, reason: CancelReason)
        /// Task `index` failed an attempt and will be retried at `at`.
        case retry(index: Int, nextAttempt: Int, at: MonotonicInstant)
        /// Task `index` reached a final state after `attempts` attempts.
        case finished(index: Int, state: State, attempts: Int)
    }

    public let job: JobFile
    public private(set) var states: [State]
    public private(set) var attempts: [Int]
    private var ready: [Bool]
    /// The batch deadline, when the job file has one.
    public let deadline: MonotonicInstant?
    private let failFast: Bool
    private var stopping: CancelReason?
    private var freeSlots: [String: [String]] = [:]
    private var freeAmounts: [String: Int] = [:]
    private var held: [Int: Grant] = [:]
    private let indexByName: [String: Int]

    // Every event costs O(log N) (times the number of distinct resource requests), never
    // a look at every task: a queue of a million tasks costs per event what one of ten
    // does. What each event touches is kept by itself:

    /// Per task: the conditions on it, which its ending (or `ready`) may settle.
    private let dependents: [[Edge]]
    /// Per task: how many of its `after` conditions do not hold yet; at 0 it is ready.
    private var unmet: [Int]
    /// Tasks that reached a final state and whose dependents are still to be told, in the
    /// order they finished. Told within the same input, after the deadline skips (which
    /// take precedence, as they always did), so one failure skips its dependents at once.
    private var settled: [Int] = []
    /// Tasks whose `after` names no task (a job not validated): skipped at the first turn.
    private var unknownDependency: [(index: Int, name: String)] = []
    /// The ready tasks, one lane per distinct resource request, each in file order.
    private var lanes: [Lane]
    private let laneOf: [Int]
    /// Tasks in `retryWait`, by the end of their backoff.
    private var retryTimers = MinHeap<Timer>()
    /// With a batch deadline, waiting tasks by the last moment they may start.
    private var lastStarts = MinHeap<Timer>()
    private let lastStartOffsets: [Duration]
    private var finalCount = 0

    private typealias Grant = (slots: [String: [String]], amounts: [String: Int])

    private struct Edge: Sendable {
        var dependent: Int
        var condition: Dependency.Condition
    }

    /// The ready tasks asking for one same set of resources. When its first task cannot
    /// have them, none of the others can until something is released, so the lane is
    /// passed over (`blocked`) until then: tasks held up by resources are not looked at
    /// again on every event.
    private struct Lane: Sendable {
        var request: [String: Int]
        var tasks = MinHeap<Int>()
        var blocked = false
    }

    private struct Timer: Comparable, Sendable {
        var at: MonotonicInstant
        var index: Int
        static func < (a: Timer, b: Timer) -> Bool { (a.at, a.index) < (b.at, b.index) }
    }

    /// - Parameters:
    ///   - succeeded: names that succeeded in a run being resumed; they start as succeeded.
    public init(job: JobFile, startedAt: MonotonicInstant, failFast: Bool, succeeded: Set<String> = []) {
        self.job = job
        self.failFast = failFast
        let deadline = job.deadline.map { startedAt + $0 }
        self.deadline = deadline
        let count = job.tasks.count
        var index: [String: Int] = [:]
        index.reserveCapacity(count)
        // Tasks are looked at in place (`tasks[i]`), not copied out: a copy retains and
        // releases each of a task's parts, a million times a loop in a large file.
        let tasks = job.tasks
        for i in tasks.indices { index[tasks[i].name] = i }
        indexByName = index
        var states = [State](repeating: .waiting, count: count)
        var ready = [Bool](repeating: false, count: count)
        if !succeeded.isEmpty {
            for (i, task) in job.tasks.enumerated() where succeeded.contains(task.name) {
                states[i] = .succeeded
                ready[i] = true
            }
        }
        attempts = Array(repeating: 0, count: count)
        var dependents = [[Edge]](repeating: [], count: count)
        var unmet = [Int](repeating: 0, count: count)
        var laneByRequest: [[String: Int]: Int] = [:]
        var lanes: [Lane] = []
        var laneOf = [Int](repeating: 0, count: count)
        var offsets: [Duration] = []
        for i in tasks.indices {
            let request = tasks[i].resources
            if let lane = laneByRequest[request] {
                laneOf[i] = lane
            } else {
                laneOf[i] = lanes.count
                laneByRequest[request] = lanes.count
                lanes.append(Lane(request: request))
            }
            if deadline != nil { offsets.append(tasks[i].policy.minStart) }
            for dependency in tasks[i].after {
                guard let d = index[dependency.task] else {
                    unknownDependency.append((i, dependency.task))
                    unmet[i] += 1  // never met
                    continue
                }
                dependents[d].append(Edge(dependent: i, condition: dependency.condition))
                // A resumed success already meets every kind of condition.
                if states[d] != .succeeded { unmet[i] += 1 }
            }
        }
        finalCount = states.count { $0 == .succeeded }
        for i in 0..<count where states[i] == .waiting {
            if unmet[i] == 0 { lanes[laneOf[i]].tasks.push(i) }
            if let deadline { lastStarts.push(Timer(at: deadline - offsets[i], index: i)) }
        }
        self.states = states
        self.ready = ready
        self.dependents = dependents
        self.unmet = unmet
        self.lanes = lanes
        self.laneOf = laneOf
        lastStartOffsets = offsets
        for (name, pool) in job.resources {
            switch pool {
            case let .slots(ids): freeSlots[name] = ids
            case let .count(total): freeAmounts[name] = total
            }
        }
    }

    /// How many tasks run now.
    public private(set) var runningCount = 0

    /// The index of the task named `name`.
    public func index(named name: String) -> Int? {
        indexByName[name]
    }

    /// True when every task is in a final state.
    public var isDone: Bool { finalCount == states.count }

    /// When the machine must next be scheduled: a retry backoff ends, or (with a batch
    /// deadline) a task that has not started reaches the last moment it may start.
    public var nextWake: MonotonicInstant? {
        // Every input ends with `dropStaleTimers`, so both heads are live.
        switch (retryTimers.min?.at, lastStarts.min?.at) {
        case let (retry?, last?): min(retry, last)
        case let (retry, last): retry ?? last
        }
    }

    // MARK: Inputs
    //
    // As `TaskMachine`'s: each appends what it decided to `actions`, the executor's list, in
    // order, and changes nothing after that: the executor carries the list out once the
    // input has returned, and may call back in meanwhile. (The executor keeps one list and
    // reuses it, so an input allocates nothing once the list has grown.)

    /// Starts whatever can start now, skips what never can. Call after every other input
    /// and when `nextWake` comes.
    public mutating func schedule(now: MonotonicInstant, into actions: inout [Action]) {
        while let timer = retryTimers.min, timer.at <= now {
            retryTimers.popMin()
            guard states[timer.index] == .retryWait(until: timer.at) else { continue }
            states[timer.index] = .waiting
            enqueue(timer.index)
            if let deadline { lastStarts.push(Timer(at: deadline - lastStartOffsets[timer.index], index: timer.index)) }
        }
        // Checked before anything a task waits for: past this point it never starts.
        if let deadline {
            while let timer = lastStarts.min, timer.at < now || deadline <= now {
                lastStarts.popMin()
                let i = timer.index
                guard isWaiting(i) else { continue }
                finish(i, attempts[i] > 0 ? .failed : .skipped(.deadline), &actions)
            }
        }
        if !unknownDependency.isEmpty {
            for (i, name) in unknownDependency where isWaiting(i) { finish(i, .skipped(.dependency(name)), &actions) }
            unknownDependency.removeAll()
        }
        tellDependents(&actions)
        startReady(now: now, &actions)
        dropStaleTimers()
    }

    /// Task `index` reported `ready` (for dependents that wait on `ready`).
    public mutating func taskReady(_ index: Int, now: MonotonicInstant, into actions: inout [Action]) {
        markReady(index)
        schedule(now: now, into: &actions)
    }

    /// An attempt of task `index` ended.
    public mutating func attemptEnded(_ index: Int, _ result: AttemptResult, now: MonotonicInstant, into actions: inout [Action]) {
        guard case .running = states[index] else { return }
        release(index)
        runningCount -= 1
        let retry = job.tasks[index].retry
        let delay = retry.delay(beforeRetry: attempts[index])
        if result.succeeded {
            markReady(index)
            finish(index, .succeeded, &actions)
        } else if stopping == nil, retry.shouldRetry(result.retryCondition, exitStatus: result.exitStatus, attempt: attempts[index]),
                  deadline.map({ now + delay <= $0 - job.tasks[index].policy.minStart }) ?? true {
            states[index] = .retryWait(until: now + delay)
            retryTimers.push(Timer(at: now + delay, index: index))
            actions.append(.retry(index: index, nextAttempt: attempts[index] + 1, at: now + delay))
        } else {
            finish(index, .failed, &actions)
            if failFast { stop(reason: .failFast, now: now, into: &actions) }
        }
        schedule(now: now, into: &actions)
    }

    /// An operator cancels one task: if it waits (or waits to retry) it is skipped; if it
    /// runs it is cancelled with reason `user` (and not retried).
    /// - Returns: what happened, in a word for the operator.
    public mutating func cancelTask(_ index: Int, now: MonotonicInstant, into actions: inout [Action]) -> String {
        switch states[index] {
        case .waiting, .retryWait:
            // Its entries in the lanes and timers go stale and are dropped when reached.
            finish(index, .skipped(.cancelled), &actions)
            schedule(now: now, into: &actions)
            return "skipped before it started"
        case .running:
            actions.append(.cancel(index: index, reason: .user))
            return "cancelling"
        case .succeeded, .failed, .skipped:
            return "already finished"
        }
    }

    /// Starts nothing more: cancels what runs with `reason`, skips what waits.
    public mutating func stop(reason: CancelReason, now: MonotonicInstant, into actions: inout [Action]) {
        guard stopping == nil else { return }
        stopping = reason
        // Once, so a look at every task is fine here.
        for i in states.indices {
            switch states[i] {
            case .running: actions.append(.cancel(index: i, reason: reason))
            case .waiting, .retryWait: finish(i, .skipped(.stopped(reason)), &actions)
            default: break
            }
        }
        // Whatever waited is final now: no dependent is left to tell, nothing left to wake.
        settled.removeAll()
        unknownDependency.removeAll()
        retryTimers.removeAll()
        lastStarts.removeAll()
        for lane in lanes.indices { lanes[lane].tasks.removeAll() }
    }

    // MARK: Rules

    private func isWaiting(_ index: Int) -> Bool {
        if case .waiting = states[index] { true } else { false }
    }

    /// Puts a waiting task whose conditions all hold in its lane.
    private mutating func enqueue(_ index: Int) {
        lanes[laneOf[index]].tasks.push(index)
    }

    /// One condition of a waiting task now holds.
    private mutating func meet(_ index: Int) {
        guard isWaiting(index) else { return }
        unmet[index] -= 1
        if unmet[index] == 0 { enqueue(index) }
    }

    private mutating func markReady(_ index: Int) {
        guard !ready[index] else { return }
        ready[index] = true
        for edge in dependents[index] where edge.condition == .ready { meet(edge.dependent) }
    }

    /// Tells the dependents of every task that finished what its end means for them: a
    /// condition met, or one that can never hold (a skip, which is told on in turn).
    private mutating func tellDependents(_ actions: inout [Action]) {
        var next = 0
        while next < settled.count {
            let d = settled[next]
            next += 1
            let succeeded = states[d] == .succeeded
            for edge in dependents[d] where isWaiting(edge.dependent) {
                switch edge.condition {
                case .success where succeeded, .done:
                    meet(edge.dependent)
                case .ready where ready[d]:
                    break  // met when it became ready
                case .success, .ready:
                    finish(edge.dependent, .skipped(.dependency(job.tasks[d].name)), &actions)
                }
            }
        }
        settled.removeAll(keepingCapacity: true)
    }

    /// Starts ready tasks in file order, up to the concurrency: the lowest task of the
    /// lanes whose resources may be free, until none fits.
    private mutating func startReady(now: MonotonicInstant, _ actions: inout [Action]) {
        guard stopping == nil else { return }
        while runningCount < job.concurrency {
            var best: Int?
            for lane in lanes.indices where !lanes[lane].blocked {
                // Entries of tasks skipped since they were queued are dropped here.
                while let i = lanes[lane].tasks.min, !isWaiting(i) { lanes[lane].tasks.popMin() }
                if let i = lanes[lane].tasks.min, best.map({ i < lanes[$0].tasks.min! }) ?? true { best = lane }
            }
            guard let lane = best else { return }
            guard let grant = allocate(lanes[lane].request) else {
                lanes[lane].blocked = true
                continue
            }
            let i = lanes[lane].tasks.popMin()!
            held[i] = grant
            attempts[i] += 1
            states[i] = .running(attempt: attempts[i])
            runningCount += 1
            actions.append(.start(index: i, attempt: attempts[i], slots: grant.slots, amounts: grant.amounts, endsBy: deadline))
        }
    }

    /// Pops timer entries of tasks that moved on (started, skipped, cancelled), so that
    /// `nextWake` reads the heads as they are.
    private mutating func dropStaleTimers() {
        while let timer = retryTimers.min, states[timer.index] != .retryWait(until: timer.at) { retryTimers.popMin() }
        while let timer = lastStarts.min, !isWaiting(timer.index) { lastStarts.popMin() }
    }

    private mutating func allocate(_ request: [String: Int]) -> Grant? {
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
        if !grant.slots.isEmpty || !grant.amounts.isEmpty {
            for lane in lanes.indices { lanes[lane].blocked = false }
        }
    }

    private mutating func finish(_ index: Int, _ state: State, _ actions: inout [Action]) {
        states[index] = state
        finalCount += 1
        settled.append(index)
        actions.append(.finished(index: index, state: state, attempts: attempts[index]))
    }
}
