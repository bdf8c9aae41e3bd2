import OvertimeProtocol

/// The scheduling of a batch as a pure state machine: which task starts when, with which
/// resources; retries; what is skipped and why. No processes, no clock of its own: every
/// input carries `now` and every consequence goes out as an `Action`. The batch runner
/// carries the actions out; unit tests drive it with a fake clock.
///
/// What it schedules are the job's elements (`JobElements`): each task that is no sweep,
/// and each element of every sweep and array, by number. What an element shares with the
/// rest of its sweep (its dependencies, resources, retries, cap) is kept once, per task of
/// the job file (an entry); an element itself costs a few bytes here until it starts.
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
        /// Start attempt `attempt` of element `index` with these resources: slot ids per slot
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
    /// The elements, numbered.
    public let elements: JobElements
    /// The batch deadline, when the job file has one.
    public let deadline: MonotonicInstant?
    private let failFast: Bool
    private var stopping: CancelReason?
    private var freeSlots: [String: [String]] = [:]
    private var freeAmounts: [String: Int] = [:]
    private var held: [Int: Grant] = [:]

    // Every event costs O(log N) (times the number of distinct resource requests), never
    // a look at every element: a queue of a million costs per event what one of ten does
    // (but for what ends a whole sweep at once: a stop, a deadline, a failed dependency).
    // Per element, a few bytes:

    /// Where each element stands (its retry's end and its skip's cause are kept apart).
    private var codes: [Code]
    private var attemptCounts: [Int32]
    private var ready: [Bool]
    /// How many of its `after` conditions do not hold yet; at 0 it is ready to start.
    private var unmet: [Int32]
    /// Elements in `retryWait`, with the end of their backoff.
    private var retryUntil: [Int: MonotonicInstant] = [:]
    /// For each element skipped for a dependency, the element that did not succeed; made
    /// at the first such skip.
    private var blockers: [Int32] = []
    /// The names an unvalidated job's `after` gives that no task has, by the element skipped.
    private var unknownBlockers: [Int: String] = [:]
    /// Running elements cancelled as stragglers, to start again when their attempt ends.
    private var restarting: Set<Int> = []
    /// Elements restarted as stragglers: that attempt is not one of their `retries`.
    private var restarted: Set<Int> = []
    /// The slots a restarted straggler held, which its next attempt gets only if no others
    /// are free (a slow GPU is a likely cause).
    private var slotsToAvoid: [Int: [String: [String]]] = [:]

    // Per entry (a task of the job file):

    /// The conditions on it, which its elements' endings (or `ready`) may settle.
    private let dependents: [[Edge]]
    private var tally: [Tally]
    private let laneOf: [Int]
    private let lastStartOffsets: [Duration]

    /// Elements that reached a final state and whose dependents are still to be told, in
    /// the order they finished. Told within the same input, after the deadline skips (which
    /// take precedence, as they always did), so one failure skips its dependents at once.
    private var settled: [Int] = []
    /// Entries whose `after` names no task (a job not validated): skipped at the first turn.
    private var unknownDependency: [(entry: Int, name: String)] = []
    /// The ready elements, one lane per distinct resource request (and one per capped
    /// sweep), each in element order.
    private var lanes: [Lane]
    /// Elements in `retryWait`, by the end of their backoff.
    private var retryTimers = MinHeap<Timer>()
    /// With a batch deadline, entries by the last moment their elements may start.
    private var lastStarts = MinHeap<Timer>()
    private var finalCount = 0

    private typealias Grant = (slots: [String: [String]], amounts: [String: Int])

    private enum Code: UInt8, Sendable {
        case waiting, retryWait, running, succeeded, failed
        case skippedDependency, skippedDeadline, skippedStopped, skippedCancelled
    }

    private struct Edge: Sendable {
        var dependent: Int
        var condition: Dependency.Condition
        var sameIndex: Bool
    }

    /// What an entry's elements have come to, for the conditions on the whole of it.
    private struct Tally: Sendable {
        var final: Int32 = 0
        var succeeded: Int32 = 0
        var ready: Int32 = 0
        var running: Int32 = 0
        /// An element ended without success: `success` on the whole entry never holds.
        var failedOne = false
        /// An element ended without success and without ever being ready.
        var unreadyOne = false
    }

    /// The ready elements asking for one same set of resources. When its first cannot have
    /// them, none of the others can until something is released, so the lane is passed
    /// over (`blocked`) until then: elements held up by resources are not looked at again
    /// on every event. A sweep with a cap has a lane of its own, passed over while its
    /// cap is reached.
    private struct Lane: Sendable {
        var request: [String: Int]
        var capped: (entry: Int, cap: Int32)?
        var elements = MinHeap<Int>()
        var blocked = false
    }

    private struct Timer: Comparable, Sendable {
        var at: MonotonicInstant
        var index: Int
        static func < (a: Timer, b: Timer) -> Bool { (a.at, a.index) < (b.at, b.index) }
    }

    /// - Parameters:
    ///   - succeeded: names of elements that succeeded in a run being resumed; they start
    ///     as succeeded.
    public init(job: JobFile, startedAt: MonotonicInstant, failFast: Bool, succeeded: Set<String> = []) {
        self.job = job
        self.failFast = failFast
        let deadline = job.deadline.map { startedAt + $0 }
        self.deadline = deadline
        let elements = JobElements(job)
        self.elements = elements
        let count = elements.count
        // Tasks are looked at in place (`tasks[i]`), not copied out: a copy retains and
        // releases each of a task's parts, a million times a loop in a large file.
        let tasks = job.tasks
        codes = [Code](repeating: .waiting, count: count)
        ready = [Bool](repeating: false, count: count)
        attemptCounts = [Int32](repeating: 0, count: count)
        tally = [Tally](repeating: Tally(), count: tasks.count)
        for (i, _) in elements.elements(named: succeeded) {
            codes[i] = .succeeded
            ready[i] = true
            let entry = elements.entry(of: i)
            tally[entry].final += 1
            tally[entry].succeeded += 1
            tally[entry].ready += 1
            finalCount += 1
        }
        var dependents = [[Edge]](repeating: [], count: tasks.count)
        var unmet = [Int32](repeating: 0, count: count)
        var laneByRequest: [[String: Int]: Int] = [:]
        var lanes: [Lane] = []
        var laneOf = [Int](repeating: 0, count: tasks.count)
        var offsets: [Duration] = []
        for e in tasks.indices {
            let request = tasks[e].resources
            if let cap = tasks[e].sweep?.maxRunning {
                laneOf[e] = lanes.count
                lanes.append(Lane(request: request, capped: (e, Int32(clamping: cap))))
            } else if let lane = laneByRequest[request] {
                laneOf[e] = lane
            } else {
                laneOf[e] = lanes.count
                laneByRequest[request] = lanes.count
                lanes.append(Lane(request: request))
            }
            if deadline != nil { offsets.append(tasks[e].policy.minStart) }
            let own = elements.elements(ofEntry: e)
            for dependency in tasks[e].after {
                guard let d = elements.entry(named: dependency.task) else {
                    unknownDependency.append((e, dependency.task))
                    for i in own { unmet[i] += 1 }  // never met
                    continue
                }
                dependents[d].append(Edge(dependent: e, condition: dependency.condition, sameIndex: dependency.sameIndex))
                // A resumed success already meets every kind of condition.
                if dependency.sameIndex, let sweep = tasks[e].sweep, let other = tasks[d].sweep {
                    let first = elements.elements(ofEntry: d).lowerBound
                    for i in own {
                        let position = other.position(ofIndex: sweep.index(at: i - own.lowerBound))
                        if let position, codes[first + position] == .succeeded { continue }
                        unmet[i] += 1
                    }
                } else if tally[d].succeeded < Int32(elements.elements(ofEntry: d).count) {
                    for i in own { unmet[i] += 1 }
                }
            }
        }
        for i in 0..<count where codes[i] == .waiting && unmet[i] == 0 {
            lanes[laneOf[elements.entry(of: i)]].elements.push(i)
        }
        if let deadline {
            for e in tasks.indices { lastStarts.push(Timer(at: deadline - offsets[e], index: e)) }
        }
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

    /// How many elements run now.
    public private(set) var runningCount = 0

    /// The element named `name`: a task that is no sweep, or a sweep's element by its full
    /// name (`train[lr=0.01,seed=1]`).
    public func index(named name: String) -> Int? {
        elements.element(named: name)
    }

    /// Where element `index` stands.
    public func state(of index: Int) -> State {
        switch codes[index] {
        case .waiting: .waiting
        case .retryWait: .retryWait(until: retryUntil[index] ?? MonotonicInstant(nanoseconds: 0))
        case .running: .running(attempt: Int(attemptCounts[index]))
        case .succeeded: .succeeded
        case .failed: .failed
        case .skippedDependency:
            .skipped(.dependency(unknownBlockers[index] ?? elements.name(Int(blockers[index]))))
        case .skippedDeadline: .skipped(.deadline)
        case .skippedStopped: .skipped(.stopped(stopping ?? .shutdown))
        case .skippedCancelled: .skipped(.cancelled)
        }
    }

    /// How many attempts element `index` has had.
    public func attempts(of index: Int) -> Int {
        Int(attemptCounts[index])
    }

    /// Every element's state, in order (for a look at all; an event needs none).
    public var states: [State] {
        codes.indices.map(state(of:))
    }

    /// True when every element is in a final state.
    public var isDone: Bool { finalCount == codes.count }

    /// When the machine must next be scheduled: a retry backoff ends, or (with a batch
    /// deadline) an entry's elements that have not started reach the last moment they may.
    public var nextWake: MonotonicInstant? {
        // Every input ends with `dropStaleTimers`, so the retry heap's head is live.
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
            guard codes[timer.index] == .retryWait, retryUntil[timer.index] == timer.at else { continue }
            retryUntil[timer.index] = nil
            codes[timer.index] = .waiting
            enqueue(timer.index)
        }
        // Checked before anything an element waits for: past this point it never starts.
        if let deadline {
            while let timer = lastStarts.min, timer.at < now || deadline <= now {
                lastStarts.popMin()
                for i in elements.elements(ofEntry: timer.index) where codes[i] == .waiting {
                    finish(i, attemptCounts[i] > 0 ? .failed : .skippedDeadline, &actions)
                }
            }
        }
        if !unknownDependency.isEmpty {
            for (entry, name) in unknownDependency {
                for i in elements.elements(ofEntry: entry) where codes[i] == .waiting {
                    finish(i, .skippedDependency, &actions, reportedBlocker: name)
                }
            }
            unknownDependency.removeAll()
        }
        tellDependents(&actions)
        startReady(now: now, &actions)
        dropStaleTimers()
    }

    /// Element `index` reported `ready` (for dependents that wait on `ready`).
    public mutating func taskReady(_ index: Int, now: MonotonicInstant, into actions: inout [Action]) {
        markReady(index)
        schedule(now: now, into: &actions)
    }

    /// An attempt of element `index` ended.
    public mutating func attemptEnded(_ index: Int, _ result: AttemptResult, now: MonotonicInstant, into actions: inout [Action]) {
        guard codes[index] == .running else { return }
        let held = held[index]
        release(index)
        runningCount -= 1
        let entry = elements.entry(of: index)
        tally[entry].running -= 1
        let retry = job.tasks[entry].retry
        let attempt = Int(attemptCounts[index])
        let restart = restarting.remove(index) != nil
        // A straggler's restart took an attempt that was none of its retries.
        let retriesUsed = restarted.contains(index) ? attempt - 1 : attempt
        let delay = retry.delay(beforeRetry: retriesUsed)
        if result.succeeded {
            markReady(index)
            finish(index, .succeeded, &actions)
        } else if restart, stopping == nil, deadline.map({ now <= $0 - job.tasks[entry].policy.minStart }) ?? true {
            restarted.insert(index)
            if let slots = held?.slots, !slots.isEmpty { slotsToAvoid[index] = slots }
            codes[index] = .waiting
            enqueue(index)
            actions.append(.retry(index: index, nextAttempt: attempt + 1, at: now))
        } else if stopping == nil, retry.shouldRetry(result.retryCondition, exitStatus: result.exitStatus, attempt: retriesUsed),
                  deadline.map({ now + delay <= $0 - job.tasks[entry].policy.minStart }) ?? true {
            codes[index] = .retryWait
            retryUntil[index] = now + delay
            retryTimers.push(Timer(at: now + delay, index: index))
            actions.append(.retry(index: index, nextAttempt: attempt + 1, at: now + delay))
        } else {
            finish(index, .failed, &actions)
            if failFast { stop(reason: .failFast, now: now, into: &actions) }
        }
        schedule(now: now, into: &actions)
    }

    /// Running element `index` is a straggler to restart: it is cancelled with reason
    /// `straggler` and, when that attempt ends without success, started again at once, an
    /// attempt that is none of its `retries`. The caller decides it once per element per run.
    public mutating func restartStraggler(_ index: Int, now: MonotonicInstant, into actions: inout [Action]) {
        guard codes[index] == .running, stopping == nil, !restarting.contains(index) else { return }
        restarting.insert(index)
        actions.append(.cancel(index: index, reason: .straggler))
    }

    /// An operator cancels one element: if it waits (or waits to retry) it is skipped; if
    /// it runs it is cancelled with reason `user` (and not retried).
    /// - Returns: what happened, in a word for the operator.
    public mutating func cancelTask(_ index: Int, now: MonotonicInstant, into actions: inout [Action]) -> String {
        let word = cancel(index, &actions)
        schedule(now: now, into: &actions)
        return word
    }

    /// An operator cancels every element of the job file's task `entry` (a whole sweep).
    /// - Returns: what happened, in words for the operator.
    public mutating func cancelEntry(_ entry: Int, now: MonotonicInstant, into actions: inout [Action]) -> String {
        var counts: [String: Int] = [:]
        for i in elements.elements(ofEntry: entry) { counts[cancel(i, &actions), default: 0] += 1 }
        schedule(now: now, into: &actions)
        return ["cancelling", "skipped before it started", "already finished"].compactMap { word in
            counts[word].map { "\($0) \(word)" }
        }.joined(separator: ", ")
    }

    private mutating func cancel(_ index: Int, _ actions: inout [Action]) -> String {
        switch codes[index] {
        case .waiting, .retryWait:
            // Its entries in the lanes and timers go stale and are dropped when reached.
            retryUntil[index] = nil
            finish(index, .skippedCancelled, &actions)
            return "skipped before it started"
        case .running:
            restarting.remove(index)
            actions.append(.cancel(index: index, reason: .user))
            return "cancelling"
        default:
            return "already finished"
        }
    }

    /// Starts nothing more: cancels what runs with `reason`, skips what waits.
    public mutating func stop(reason: CancelReason, now: MonotonicInstant, into actions: inout [Action]) {
        guard stopping == nil else { return }
        stopping = reason
        // Once, so a look at every element is fine here.
        for i in codes.indices {
            switch codes[i] {
            case .running: actions.append(.cancel(index: i, reason: reason))
            case .waiting, .retryWait: finish(i, .skippedStopped, &actions)
            default: break
            }
        }
        // Whatever waited is final now: no dependent is left to tell, nothing left to wake.
        settled.removeAll()
        unknownDependency.removeAll()
        retryTimers.removeAll()
        retryUntil.removeAll()
        lastStarts.removeAll()
        for lane in lanes.indices { lanes[lane].elements.removeAll() }
    }

    // MARK: Rules

    /// Puts a waiting element whose conditions all hold in its lane.
    private mutating func enqueue(_ index: Int) {
        lanes[laneOf[elements.entry(of: index)]].elements.push(index)
    }

    /// One condition of a waiting element now holds.
    private mutating func meet(_ index: Int) {
        guard codes[index] == .waiting else { return }
        unmet[index] -= 1
        if unmet[index] == 0 { enqueue(index) }
    }

    private mutating func markReady(_ index: Int) {
        guard !ready[index] else { return }
        ready[index] = true
        let entry = elements.entry(of: index)
        tally[entry].ready += 1
        let whole = tally[entry].ready == Int32(elements.elements(ofEntry: entry).count)
        for edge in dependents[entry] where edge.condition == .ready {
            if edge.sameIndex {
                if let partner = partner(of: index, in: edge) { meet(partner) }
            } else if whole {
                for i in elements.elements(ofEntry: edge.dependent) { meet(i) }
            }
        }
    }

    /// The element of `edge`'s dependent with the same index as element `index`.
    private func partner(of index: Int, in edge: Edge) -> Int? {
        let entry = elements.entry(of: index)
        guard let sweep = job.tasks[entry].sweep, let other = job.tasks[edge.dependent].sweep else { return nil }
        let dependents = elements.elements(ofEntry: edge.dependent)
        return other.position(ofIndex: sweep.index(at: index - elements.elements(ofEntry: entry).lowerBound))
            .map { dependents.lowerBound + $0 }
    }

    /// Tells the dependents of every element that finished what its end means for them: a
    /// condition met, or one that can never hold (a skip, which is told on in turn).
    private mutating func tellDependents(_ actions: inout [Action]) {
        var next = 0
        while next < settled.count {
            let d = settled[next]
            next += 1
            let entry = elements.entry(of: d)
            let succeeded = codes[d] == .succeeded
            let count = Int32(elements.elements(ofEntry: entry).count)
            for edge in dependents[entry] {
                if edge.sameIndex {
                    guard let t = partner(of: d, in: edge), codes[t] == .waiting else { continue }
                    switch edge.condition {
                    case .success where succeeded, .done: meet(t)
                    case .ready where ready[d]: break  // met when it became ready
                    case .success, .ready: finish(t, .skippedDependency, &actions, blocker: d)
                    }
                    continue
                }
                let meetsAll: Bool
                let breaks: Bool
                switch edge.condition {
                case .done: (meetsAll, breaks) = (tally[entry].final == count, false)
                // The first element to end without success skips the dependents: later ones
                // find them skipped already.
                case .success: (meetsAll, breaks) = (succeeded && tally[entry].succeeded == count, !succeeded && !tally[entry].failedOne)
                case .ready: (meetsAll, breaks) = (false, !succeeded && !ready[d] && !tally[entry].unreadyOne)
                }
                if meetsAll {
                    for i in elements.elements(ofEntry: edge.dependent) { meet(i) }
                } else if breaks {
                    for i in elements.elements(ofEntry: edge.dependent) where codes[i] == .waiting {
                        finish(i, .skippedDependency, &actions, blocker: d)
                    }
                }
            }
            if !succeeded {
                tally[entry].failedOne = true
                if !ready[d] { tally[entry].unreadyOne = true }
            }
        }
        settled.removeAll(keepingCapacity: true)
    }

    /// Starts ready elements in order, up to the concurrency: the lowest element of the
    /// lanes whose resources may be free, until none fits.
    private mutating func startReady(now: MonotonicInstant, _ actions: inout [Action]) {
        guard stopping == nil else { return }
        while runningCount < job.concurrency {
            var best: Int?
            for lane in lanes.indices where !lanes[lane].blocked {
                if let (entry, cap) = lanes[lane].capped, tally[entry].running >= cap { continue }
                // Elements skipped since they were queued are dropped here.
                while let i = lanes[lane].elements.min, codes[i] != .waiting { lanes[lane].elements.popMin() }
                if let i = lanes[lane].elements.min, best.map({ i < lanes[$0].elements.min! }) ?? true { best = lane }
            }
            guard let lane = best else { return }
            guard let grant = allocate(lanes[lane].request, avoiding: slotsToAvoid[lanes[lane].elements.min!]) else {
                lanes[lane].blocked = true
                continue
            }
            let i = lanes[lane].elements.popMin()!
            if !slotsToAvoid.isEmpty { slotsToAvoid[i] = nil }
            held[i] = grant
            attemptCounts[i] += 1
            codes[i] = .running
            runningCount += 1
            tally[elements.entry(of: i)].running += 1
            actions.append(.start(index: i, attempt: Int(attemptCounts[i]), slots: grant.slots, amounts: grant.amounts, endsBy: deadline))
        }
    }

    /// Pops retry timers of elements that moved on (cancelled, skipped), so that `nextWake`
    /// reads the head as it is. (An entry's last start stays until it comes: one wake per
    /// task of the job file at most.)
    private mutating func dropStaleTimers() {
        while let timer = retryTimers.min, codes[timer.index] != .retryWait || retryUntil[timer.index] != timer.at {
            retryTimers.popMin()
        }
    }

    /// - Parameter avoiding: slot ids handed out only when no others are free.
    private mutating func allocate(_ request: [String: Int], avoiding: [String: [String]]? = nil) -> Grant? {
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
            if var free = freeSlots[pool] {
                if let avoided = avoiding?[pool] {
                    free = free.filter { !avoided.contains($0) } + free.filter { avoided.contains($0) }
                }
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

    /// Element `index` reached a final state: `blocker` is the element that did not
    /// succeed for a dependency skip (`reportedBlocker` a task name no element has).
    private mutating func finish(_ index: Int, _ code: Code, _ actions: inout [Action], blocker: Int? = nil,
                                 reportedBlocker: String? = nil) {
        codes[index] = code
        finalCount += 1
        let entry = elements.entry(of: index)
        tally[entry].final += 1
        if code == .succeeded { tally[entry].succeeded += 1 }
        settled.append(index)
        if let reportedBlocker { unknownBlockers[index] = reportedBlocker }
        if let blocker {
            if blockers.isEmpty { blockers = [Int32](repeating: -1, count: codes.count) }
            blockers[index] = Int32(blocker)
        }
        actions.append(.finished(index: index, state: state(of: index), attempts: Int(attemptCounts[index])))
    }
}
