import OvertimeLoop
import Synchronization

/// Reads the running tasks' memory and CPU for the metrics page and the live page on a
/// thread of its own (a `Ticker`), never on the loop: the kernel makes each cgroup file
/// afresh, tens to hundreds of microseconds apiece on cgroup v1, and a page of a thousand
/// tasks read there held the loop for over a tenth of a second. The pages (and `ctl
/// status`, while it runs) show the last reading, a second or a few old.
///
/// A pass over every task runs at most once a second, and after a pass that took `d` the
/// next waits `d / share`: the sampler takes at most that share of a core however many
/// tasks there are (for a thousand tasks on cgroup v1, at the metrics' share, a reading
/// every few seconds).
final class UsageSampler: Sendable {
    /// Where a task's figures are.
    enum Source: Sendable, Equatable {
        /// Its cgroups (memory from the memory one, else its v2 one's processes; CPU from v2).
        case cgroup(CgroupUsageFiles)
        /// No cgroup: the resident memory of its leader's session, from /proc.
        case session(leader: Int32)
    }

    /// One task's figures, as `TaskStatus.Live` carries them.
    struct Reading: Sendable, Equatable {
        var memory: UInt64?
        var peakMemory: UInt64?
        var cpuUser: Double?
        var cpuSystem: Double?
    }

    static let interval = Duration.seconds(1)
    /// The share of a core the metrics may take: a scrape wants figures a second or a few
    /// old.
    static let metricsShare = 0.05
    /// The live page's: a person reads a row's memory against its max, for which figures
    /// some seconds old do (at 1,000 tasks on cgroup v1, a pass about every 20 s; at 50,
    /// every second). More would be most of what a page costs the supervisor.
    static let pageShare = 0.005

    private struct State {
        var sources: [Int: Source] = [:]
        var readings: [Int: Reading] = [:]
        var nextPass: ContinuousClock.Instant?
        var share = 0.0
    }

    private let state = Mutex(State())
    private let ticker = Mutex<Ticker?>(nil)

    /// Starts the thread.
    func start() {
        let ticker = Ticker(interval: Self.interval) { [weak self] in self?.passIfDue() }
        self.ticker.withLock { $0 = ticker }
        ticker.start()
    }

    /// The tasks to read from now on, by runner id (`TaskRef.id`); readings of the others
    /// are forgotten.
    func track(_ sources: [Int: Source]) {
        let first = state.withLock { state -> Bool in
            state.sources = sources
            state.readings = state.readings.filter { sources[$0.key] != nil }
            return state.nextPass == nil && !sources.isEmpty
        }
        // The first tasks are read at once rather than a second from now.
        if first { ticker.withLock { $0 }?.wakeNow() }
    }

    /// Lets the passes take up to `share` of a core, if that is more than they had.
    func allow(share: Double) {
        state.withLock { $0.share = max($0.share, share) }
    }

    /// The last reading of runner `id`; nil before its first.
    func reading(of id: Int) -> Reading? {
        state.withLock { $0.readings[id] }
    }

    /// Stops the thread and waits for a pass under way. Idempotent.
    func stop() {
        let ticker = self.ticker.withLock { current -> Ticker? in
            defer { current = nil }
            return current
        }
        ticker?.stop()
    }

    private func passIfDue() {
        let start = ContinuousClock.now
        let sources: [Int: Source]? = state.withLock { state in
            let due = state.nextPass.map { start >= $0 } ?? true
            return due && !state.sources.isEmpty ? state.sources : nil
        }
        guard let sources else { return }
        var bySession: [Int32: UInt64]?
        var readings: [Int: Reading] = [:]
        readings.reserveCapacity(sources.count)
        for (id, source) in sources {
            switch source {
            case let .cgroup(files):
                let cpu = files.cpuMicroseconds()
                let memory = files.memoryDirectory != nil ? files.memoryInUse() : ProcessMemory.residentSum(files.processIDs())
                readings[id] = Reading(memory: memory, peakMemory: files.peakMemory(),
                                       cpuUser: cpu.map { Double($0.user) / 1e6 }, cpuSystem: cpu.map { Double($0.system) / 1e6 })
            case let .session(leader):
                if bySession == nil { bySession = ProcessMemory.residentBySession() }
                readings[id] = Reading(memory: bySession?[leader])
            }
        }
        let took = ContinuousClock.now - start
        state.withLock { state in
            // A task that ended during the pass is not brought back.
            for (id, reading) in readings where state.sources[id] != nil { state.readings[id] = reading }
            state.nextPass = start + max(Self.interval, took * (1 / state.share))
        }
    }
}

/// Keeps a `UsageSampler` told, every `UsageSampler.interval`, which tasks run: started by
/// the first thing that shows the tasks' memory and CPU (the metrics, the live page), so
/// that `status` takes the sampler's readings and never reads the tasks' files on the
/// loop. Loop-thread only.
final class UsageSampling {
    let sampler = UsageSampler()
    private let timer: LoopTimer
    private let sources: () -> [Int: UsageSampler.Source]

    init(loop: EventLoop, share: Double, sources: @escaping () -> [Int: UsageSampler.Source]) {
        timer = LoopTimer(loop: loop)
        self.sources = sources
        sampler.allow(share: share)
        sampler.start()
        track()
    }

    private func track() {
        sampler.track(sources())
        timer.schedule(inNanoseconds: UsageSampler.interval.nanoseconds) { [weak self] in self?.track() }
    }

    /// Stops the timer and the sampler's thread. Idempotent.
    func stop() {
        timer.close()
        sampler.stop()
    }
}
