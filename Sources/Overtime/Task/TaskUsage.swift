import OvertimeLoop
import OvertimeProtocol

/// What a task uses (DESIGN §7): how its memory is measured, its memory and CPU now, what
/// it used in all at its end, and the kernel's word when its memory crosses the max. Owns
/// that watch and closes it in `close`. Loop-thread only.
final class TaskUsage {
    /// How the memory watchdog measures a task.
    enum MemoryMeasure {
        /// Its memory cgroup's usage.
        case cgroup(TaskCgroup)
        /// The resident sets of the processes its v2 cgroup lists.
        case processes(TaskCgroup)
        /// The resident sets of its leader's session, from one pass over /proc.
        case session(Int32)
        case none

        /// Where the metrics' sampler reads the same, off the loop.
        var samplerSource: UsageSampler.Source? {
            switch self {
            case let .cgroup(cgroup), let .processes(cgroup): .cgroup(cgroup.usageFilesNow)
            case let .session(leader): .session(leader: leader)
            case .none: nil
            }
        }
    }

    private unowned let core: SupervisorState
    /// The kernel's word when the usage crosses the max (v1).
    private var memoryLevels: MemoryLevelWatch?

    init(core: SupervisorState) {
        self.core = core
    }

    /// - Parameter runningLeader: the leader's pid while it runs.
    static func measure(cgroup: TaskCgroup?, runningLeader: Int32?) -> MemoryMeasure {
        if let cgroup, cgroup.memoryCountsTask { return .cgroup(cgroup) }
        if let cgroup, cgroup.v2Directory != nil { return .processes(cgroup) }
        if let runningLeader { return .session(runningLeader) }
        return .none
    }

    /// Has the task `id` measured while it runs: joined to its v1 memory cgroup when that
    /// waits, sampled by the watchdog when it has a max, and, with a cgroup, `onLevel` told
    /// when the kernel says the usage crossed the max (a burst faster than the samples is
    /// heard at once, not after the hard limit above the max).
    func watch(_ id: Int, memory: MemoryPolicy, cgroup: TaskCgroup?, loop: EventLoop, onLevel: @escaping (TaskCgroup) -> Void) {
        if let cgroup, cgroup.memoryJoinPending { core.memoryJoins.schedule(id, loop: loop) }
        guard let max = memory.max else { return }
        core.memoryWatch.watch(id, loop: loop)
        if let cgroup {
            memoryLevels = MemoryLevelWatch(loop: loop, cgroup: cgroup, levels: [max]) { onLevel(cgroup) }
        }
    }

    /// Its memory and CPU now, for `ctl status`.
    func reading(_ measure: MemoryMeasure, cgroup: TaskCgroup?, id: Int) -> UsageSampler.Reading {
        if let sampler = core.usageSampler {
            // Metrics are on: a page of a thousand tasks must not read their files here.
            return sampler.reading(of: id) ?? UsageSampler.Reading()
        }
        let cpu = cgroup?.cpuMicroseconds().map { (user: Double($0.user) / 1e6, system: Double($0.system) / 1e6) }
        return UsageSampler.Reading(memory: currentMemory(measure), peakMemory: cgroup?.peakMemory(), cpuUser: cpu?.user, cpuSystem: cpu?.system)
    }

    /// Its memory now, measured as the watchdog would.
    private func currentMemory(_ measure: MemoryMeasure) -> UInt64? {
        switch measure {
        case let .cgroup(cgroup): cgroup.memoryInUse()
        case let .processes(cgroup): ProcessMemory.residentSum(cgroup.processIDs())
        case let .session(leader): core.residentBySession(at: MonotonicInstant.now())[leader]   // as the watchdog measures it
        case .none: nil
        }
    }

    /// What the task used, at its end: the cgroup's figures where it had one, else the
    /// watchdog's samples (`sampledPeak`, 0 without any) and what the reaper counted.
    static func final(cgroup: TaskCgroup?, reaped: ChildUsage?, sampledPeak: UInt64) -> ResourceUsage {
        var usage = ResourceUsage()
        if let cpu = cgroup?.cpuMicroseconds() {
            usage.cpuUser = .microseconds(Int64(clamping: cpu.user))
            usage.cpuSystem = .microseconds(Int64(clamping: cpu.system))
        } else if let reaped {
            usage.cpuUser = .microseconds(Int64(clamping: reaped.userMicroseconds))
            usage.cpuSystem = .microseconds(Int64(clamping: reaped.systemMicroseconds))
        }
        if let peak = cgroup?.peakMemory() {
            // A late join leaves out what the task touched before it: the reaper's high-water
            // mark of its biggest process may then be the larger.
            usage.peakMemory = cgroup?.memoryJoinedLate == true ? max(peak, reaped?.maxResidentBytes ?? 0) : peak
            usage.memorySource = .cgroup
        } else if sampledPeak > 0 {
            usage.peakMemory = max(sampledPeak, reaped?.maxResidentBytes ?? 0)
            usage.memorySource = .sampled
        } else if let reaped, reaped.maxResidentBytes > 0 {
            usage.peakMemory = reaped.maxResidentBytes
            usage.memorySource = .reaper
        }
        return usage
    }

    /// Nothing measures the task `id` from now on.
    func close(_ id: Int) {
        core.memoryWatch.forget(id)
        memoryLevels?.close()
        memoryLevels = nil
    }
}

extension TaskStatus {
    /// A running task as `overtime ctl status` shows it: its machine's state and `usage`.
    /// Each reporter, while the task has more than one.
    private static func byReporter(_ machine: TaskMachine, now: MonotonicInstant) -> [ReporterStatus]? {
        guard machine.reporters.count > 1 else { return nil }
        return machine.reporterSummaries(now: now).map {
            ReporterStatus(name: $0.name, progress: $0.progress.map { var p = $0; p.reporter = nil; return p },
                           sinceReport: $0.sinceReport?.seconds, closed: $0.closed)
        }
    }

    init(ref: TaskRef, machine: TaskMachine, pid: Int32?, usage: UsageSampler.Reading, now: MonotonicInstant) {
        let state: TaskStatus.State = switch machine.phase {
        case .running: .running
        case let .cancelling(reason): .cancelling(reason)
        case .exited: .exiting
        }
        var live = TaskStatus.Live(pid: pid, elapsed: (now - machine.startedAt).seconds,
                                   remaining: machine.remaining(at: now)?.seconds, progress: machine.lastProgress,
                                   reporters: machine.reporters.count, byReporter: Self.byReporter(machine, now: now),
                                   memory: usage.memory,
                                   peakMemory: usage.peakMemory ?? (machine.peakMemory > 0 ? machine.peakMemory : nil),
                                   cpuUser: usage.cpuUser, cpuSystem: usage.cpuSystem,
                                   everyReporter: machine.policy.everyReporter ? machine.reporterRemaining(at: now).map {
                                       TaskStatus.Live.ReporterLeft(reporter: machine.name(of: $0.reporter), remaining: $0.remaining.seconds)
                                   } : nil)
        live.phase = machine.phaseName
        let window = machine.windowInForce
        (live.window, live.windowLearned) = (window.window?.seconds, window.learned)
        live.stall(since: machine.stalledSince, now: now, clock: machine.timeOfDay)
        live.hardLimitRemaining = machine.hardLimit.map { max(.zero, $0 - now).seconds }
        live.memoryMax = machine.memory.max
        self.init(name: ref.name, state: state, live: live)
    }
}

extension TaskStatus.Live {
    /// Marks the task stalled since `since` (nil: not stalled), the instant as UTC time.
    mutating func stall(since: MonotonicInstant?, now: MonotonicInstant, clock: TimeOfDay) {
        guard let since else { return }
        stalledSince = EventEncoder(runID: "", wallOffsetNanoseconds: clock.wallOffsetNanoseconds).timestamp(since)
        stalled = (now - since).seconds
    }
}
