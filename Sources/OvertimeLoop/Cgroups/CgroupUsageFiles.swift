internal import OvertimeCore


/// Where a task's cgroups keep the figures of its use, by path alone: what a reader on
/// another thread needs (the metrics read every task's off the loop, since the kernel makes
/// each file afresh, tens of microseconds apiece). `TaskCgroup`, the loop's, reads through it.
public struct CgroupUsageFiles: Sendable, Hashable {
    public let v2Directory: String?
    public let memoryDirectory: String?
    /// Whether `memoryDirectory` is in the v2 hierarchy (else v1).
    public let memoryIsV2: Bool
    /// `cpu.stat`'s user and system microseconds when the task got the cgroup: the cgroup
    /// may have served earlier tasks (the run's pool), and the counters only ever grow.
    public let cpuBaseline: (user: UInt64, system: UInt64)

    public init(v2Directory: String?, memoryDirectory: String?, memoryIsV2: Bool, cpuBaseline: (user: UInt64, system: UInt64) = (0, 0)) {
        self.v2Directory = v2Directory
        self.memoryDirectory = memoryDirectory
        self.memoryIsV2 = memoryIsV2
        self.cpuBaseline = cpuBaseline
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.v2Directory == b.v2Directory && a.memoryDirectory == b.memoryDirectory && a.memoryIsV2 == b.memoryIsV2
            && a.cpuBaseline == b.cpuBaseline
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(v2Directory)
        hasher.combine(memoryDirectory)
        hasher.combine(cpuBaseline.user)
        hasher.combine(cpuBaseline.system)
    }

    /// The memory cgroup's usage file (v2 `memory.current`, v1 `memory.usage_in_bytes`).
    public var usagePath: String? {
        memoryDirectory.map { $0 + (memoryIsV2 ? "/memory.current" : "/memory.usage_in_bytes") }
    }

    /// The memory in use as the watchdog judges it (`TaskCgroup.memoryInUse`), from `usage`
    /// when the caller has read it, else from the usage file.
    public func memoryInUse(usage given: UInt64? = nil, exactFrom: UInt64 = 0) -> UInt64? {
        guard let memoryDirectory, let usage = given ?? usagePath.flatMap({ KernelText.number(Descriptors.readWholeFile($0)) }) else { return nil }
        if usage < exactFrom { return usage }
        let inactiveKey = memoryIsV2 ? "inactive_file" : "total_inactive_file"
        let inactive = KernelText.value(inactiveKey, in: Descriptors.readWholeFile(memoryDirectory + "/memory.stat")) ?? 0
        return usage > inactive ? usage - inactive : 0
    }

    /// Every process in the task's cgroup (the v2 one where there is one: it holds the
    /// same processes as the memory one).
    public func processIDs() -> [Int32] {
        guard let directory = v2Directory ?? memoryDirectory,
              let bytes = Descriptors.readWholeFile(directory + "/cgroup.procs") else { return [] }
        return KernelText.processIDs(bytes)
    }

    /// The high-water mark of memory use (`TaskCgroup.peakMemory`). A pooled cgroup's is
    /// reset when a task gets it (v1; a v2 memory cgroup is never pooled).
    public func peakMemory() -> UInt64? {
        guard let memoryDirectory else { return nil }
        return KernelText.number(Descriptors.readWholeFile(memoryDirectory + (memoryIsV2 ? "/memory.peak" : "/memory.max_usage_in_bytes")))
    }

    /// CPU time of everything that ran in it for this task (`TaskCgroup.cpuMicroseconds`).
    public func cpuMicroseconds() -> (user: UInt64, system: UInt64)? {
        guard let v2Directory else { return nil }
        return since(cpuBaseline, KernelText.cpuMicroseconds(cpuStat: Descriptors.readWholeFile(v2Directory + "/cpu.stat")))
    }

    func since(_ baseline: (user: UInt64, system: UInt64), _ now: (user: UInt64, system: UInt64)?) -> (user: UInt64, system: UInt64)? {
        guard let now else { return nil }
        return (now.user >= baseline.user ? now.user - baseline.user : 0, now.system >= baseline.system ? now.system - baseline.system : 0)
    }
}
