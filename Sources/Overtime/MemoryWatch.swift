import OvertimeLoop

/// The memory watchdog's clock (DESIGN §7): four times a second it measures each running
/// task that has a `memory-max` and hands the figure to the task's machine, which warns and
/// cancels. Only while such a task runs. Loop-thread only.
final class MemoryWatch {
    /// How often: DESIGN §7's "at least four times a second".
    static let interval = Duration.milliseconds(250)

    private unowned let core: SupervisorState
    private var timer: LoopTimer?
    private var watched: Set<Int> = []

    init(core: SupervisorState) {
        self.core = core
    }

    /// Starts watching a task (its runner is in `core.runners` under `id`).
    func watch(_ id: Int, loop: EventLoop) {
        watched.insert(id)
        guard timer == nil else { return }
        timer = LoopTimer(loop: loop)
        arm()
    }

    func forget(_ id: Int) {
        watched.remove(id)
        if watched.isEmpty { stop() }
    }

    func stop() {
        timer?.close()
        timer = nil
    }

    private func arm() {
        timer?.schedule(inNanoseconds: Self.interval.nanoseconds) { [unowned self] in self.sample() }
    }

    private func sample() {
        // One pass over /proc for every task measured that way (no memory cgroup and no
        // v2 cgroup to list its processes), however many there are.
        var bySession: [Int32: UInt64]?
        for id in Array(watched) {
            guard let runner = core.runners[id] as? TaskRunner else {
                watched.remove(id)
                continue
            }
            let used: UInt64?
            switch runner.memoryMeasure {
            case let .cgroup(cgroup):
                used = cgroup.memoryInUse(exactFrom: runner.memoryCheckLevel)
            // From /proc, 0 is no reading: a process past its exit's unmapping (killed, say,
            // and not yet reaped) shows no resident set, and the sample before it stands.
            case let .processes(cgroup):
                used = ProcessMemory.residentSum(cgroup.processIDs()).nonZero
            case let .session(leader):
                if bySession == nil { bySession = ProcessMemory.residentBySession() }
                used = bySession?[leader]?.nonZero
            case .none:
                used = nil
            }
            if let used { runner.memorySample(used) }
        }
        if watched.isEmpty { stop() } else { arm() }
    }
}

/// When tasks without a `memory-max` join their v1 memory cgroup on a hybrid machine
/// (`TaskCgroup.joinMemory`, docs/containment.md): `delay` after their start, by one timer
/// for all of them, since every task waits the same time and so they fall due in the order
/// they started (a timer per task was an allocation and a close on every spawn).
/// Loop-thread only.
final class MemoryJoins {
    /// How long a task runs before it joins. The join may wait for a grace period on a
    /// thread of its own; a task that ends sooner is measured by the reaper instead.
    static let delay = Duration.milliseconds(20)

    private unowned let core: SupervisorState
    /// (when, which runner), oldest first from `next`.
    private var due: [(at: Int64, id: Int)] = []
    private var next = 0
    private var timer: LoopTimer?

    init(core: SupervisorState) {
        self.core = core
    }

    func schedule(_ id: Int, loop: EventLoop) {
        due.append((EventLoop.now() + Self.delay.nanoseconds, id))
        guard timer == nil else { return }
        timer = LoopTimer(loop: loop)
        arm()
    }

    private func arm() {
        guard next < due.count else { return stop() }
        timer?.schedule(inNanoseconds: due[next].at - EventLoop.now()) { [unowned self] in self.fire() }
    }

    private func fire() {
        let now = EventLoop.now()
        while next < due.count, due[next].at <= now {
            // A runner gone, or ended, joins nothing (its join was abandoned at its exit).
            (core.runners[due[next].id] as? TaskRunner)?.joinMemoryCgroup()
            next += 1
        }
        if next == due.count {
            due.removeAll(keepingCapacity: true)
            next = 0
        }
        arm()
    }

    func stop() {
        timer?.close()
        timer = nil
        due.removeAll()
        next = 0
    }
}

/// Task cgroups whose last processes were still dying when the task ended (a SIGKILL takes
/// a moment): retried until they are empty and back in the run's pool or removed
/// (`CgroupTree.release`), for a while, then left to the task guard, which empties the
/// run's tree when the supervisor exits. Loop-thread only.
final class CgroupRetirement {
    private var pending: [(cgroup: TaskCgroup, tree: CgroupTree, tries: Int)] = []
    private var timer: LoopTimer?
    /// 50 tries 100 ms apart: five seconds for a process to finish dying.
    static let tries = 50

    /// A task is done with `cgroup`: released to `tree` now when it is empty, else killed
    /// and retried.
    func retire(_ cgroup: TaskCgroup, from tree: CgroupTree, loop: EventLoop) {
        if tree.release(cgroup) { return }
        cgroup.killAll()
        pending.append((cgroup, tree, 0))
        if timer == nil {
            timer = LoopTimer(loop: loop)
            arm()
        }
    }

    private func arm() {
        timer?.schedule(inNanoseconds: 100_000_000) { [unowned self] in self.retry() }
    }

    private func retry() {
        pending = pending.compactMap { entry in
            if entry.tree.release(entry.cgroup) || entry.tries + 1 >= Self.tries { return nil }
            return (entry.cgroup, entry.tree, entry.tries + 1)
        }
        if pending.isEmpty {
            timer?.close()
            timer = nil
        } else {
            arm()
        }
    }

    func stop() {
        timer?.close()
        timer = nil
        pending.removeAll()
    }
}

private extension UInt64 {
    var nonZero: UInt64? { self == 0 ? nil : self }
}
