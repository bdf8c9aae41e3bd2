/// The run's own cgroups: `overtime-<run>` under the supervisor's directory in each
/// hierarchy the probe found, with a cgroup per task below (`slot-<n>`), reused from task
/// to task once emptied: a batch of short tasks would otherwise spend a good part of its
/// supervisor's time in the kernel making and removing cgroups. Loop-thread only.
public final class CgroupTree {
    /// The run's v2 directory: containment (every process of a task, `cgroup.kill`) and
    /// CPU time (`cpu.stat`, kept whether or not the cpu controller is on).
    public let v2Directory: String?
    /// Whether the v2 memory controller is on for the tasks' cgroups.
    public let v2Memory: Bool
    /// The run's v1 memory directory: memory use, the hard limit, the OOM counter. Made
    /// when a task first needs its memory cgroup (`readyMemoryDirectory`), not at the start:
    /// a short task never does (it joins late, `TaskCgroup.joinMemory`), and the directory
    /// would cost every `overtime run` a `mkdir` and an `rmdir`.
    public let v1MemoryDirectory: String?
    /// Whether `v1MemoryDirectory` has been made (by the loop; a join's thread makes it too,
    /// where it is first, without telling: a later `mkdir` here then finds it).
    private var v1MemoryDirectoryMade = false
    /// Why a hierarchy the probe found could not be used after all.
    public let problems: [String]

    /// Emptied slots waiting for a task, the most recently emptied last.
    private var free: [TaskCgroup] = []
    /// How many pooled slots exist, free or in use: at most `poolCapacity`, so the
    /// descriptors they keep open stay bounded however many tasks run at once.
    private var pooledSlots = 0
    private var nextSlot = 1
    /// How many slots may be pooled. Each keeps up to 8 descriptors open (its two
    /// `cgroup.procs`, the v2 directory, `cgroup.kill`, `cpu.stat`, and v1's usage, peak and
    /// OOM counter): 32 of them hold 256, a quarter of the common soft limit of 1024,
    /// while a batch at concurrency 8 uses 9 or so.
    public static let poolCapacity = 32
    /// The most memory an emptied v1 cgroup may still have charged to go back to the pool,
    /// since the next task's usage and peak would count it (charged, it is not the next
    /// task's to give back). A cgroup that ran `/bin/true` or `sleep` keeps a few hundred
    /// KiB, not growing from task to task: kernel objects freed a moment later and the
    /// kernel's per-CPU charge batch (64 pages), which a fresh cgroup's first charge shows
    /// as well.
    /// One that read files keeps their page cache: removed, its charges stay with the parent.
    public static let reusableLeftover: UInt64 = 1 << 20
    /// Whether slots are reused at all: not where memory is v2's, whose `memory.peak` a
    /// reader by path cannot reset (Linux 6.12+ resets it for one open file only).
    private var pools: Bool { !v2Memory }

    /// Makes the run's directories: the tree (nil when neither could be made) and why it is
    /// not more than it is.
    public static func make(probe: CgroupProbe, runID: String) -> (tree: CgroupTree?, notes: [String]) {
        var problems = probe.unavailable
        var v2: String?
        var v2Memory = false
        if let parent = probe.v2Directory {
            let directory = parent + "/overtime-\(runID)"
            do throws(SystemError) {
                try CgroupFiles.makeDirectory(directory, "create \(directory)")
                v2 = directory
                // The tasks get the memory controller where the supervisor's own cgroup
                // hands it down; turning it on here needs no process moved.
                if probe.v2Controllers.contains("memory") {
                    v2Memory = CgroupFiles.write("+memory", to: directory + "/cgroup.subtree_control") == 0
                    if !v2Memory { problems.append("the cgroup v2 memory controller could not be enabled below \(directory)") }
                } else {
                    problems.append("cgroup v2 here hands down no memory controller to Overtime's cgroup (\(probe.v2Controllers.isEmpty ? "none" : probe.v2Controllers.joined(separator: ", ")))")
                }
            } catch {
                problems.append("cannot create \(directory): \(error.reason)")
            }
        }
        // The v1 directory is made when first needed (`readyMemoryDirectory`); the probe
        // found its parent writable.
        let v1 = v2Memory ? nil : probe.v1MemoryDirectory.map { $0 + "/overtime-\(runID)" }
        guard v2 != nil || v1 != nil else { return (nil, problems) }
        return (CgroupTree(v2: v2, v2Memory: v2Memory, v1: v1, problems: problems), problems)
    }

    private init(v2: String?, v2Memory: Bool, v1: String?, problems: [String]) {
        v2Directory = v2
        self.v2Memory = v2Memory
        v1MemoryDirectory = v1
        self.problems = problems
    }

    /// A cgroup for a task: an emptied one from the pool, its figures started afresh
    /// (`TaskCgroup.begin`), else a new slot.
    /// - Throws: `SystemError` naming the directory or file that failed.
    /// - Parameter memoryBeforeExec: whether the task enters its memory cgroup before exec
    ///   (`TaskCgroup.planMemoryJoin`); false for one without a memory limit.
    public func taskCgroup(memoryLimit: UInt64?, memoryBeforeExec: Bool = true) throws(SystemError) -> TaskCgroup {
        while let slot = free.popLast() {
            do throws(SystemError) {
                try slot.begin(memoryLimit: memoryLimit, memoryBeforeExec: memoryBeforeExec)
                return slot
            } catch {
                // A file of it failed: a new one instead (and this one, if it cannot be
                // removed now, is left to the task guard, its descriptors closed).
                if !forget(slot) { pooledSlots -= 1 }
            }
        }
        let pooled = pools && pooledSlots < Self.poolCapacity
        let slot = try TaskCgroup(tree: self, name: "slot-\(nextSlot)", memoryLimit: memoryLimit, pooled: pooled,
                                  memoryBeforeExec: memoryBeforeExec)
        nextSlot += 1
        if pooled { pooledSlots += 1 }
        return slot
    }

    /// A task is done with its cgroup: back to the pool when nothing of the task is left
    /// in it (no process, at most `reusableLeftover` of memory charged), else removed.
    /// - Returns: false while a process is still in it (dying: call again later).
    public func release(_ slot: TaskCgroup) -> Bool {
        guard slot.isEmpty else { return false }
        if slot.pooled, !slot.killWritten, (slot.leftoverMemory ?? 0) <= Self.reusableLeftover {
            free.append(slot)
            return true
        }
        return forget(slot)
    }

    /// Removes a slot for good; false while a process is in it.
    @discardableResult
    private func forget(_ slot: TaskCgroup) -> Bool {
        guard slot.remove() else { return false }
        if slot.pooled { pooledSlots -= 1 }
        return true
    }

    /// Removes the free slots (at the end of the run, before the run's directories).
    public func removeFreeSlots() {
        for slot in free { forget(slot) }
        free.removeAll()
    }

    /// Makes the run's v1 memory directory if it is not made yet. When it cannot be, the
    /// task asking goes without a memory cgroup (as a run whose directory could not be made
    /// at the start once did), and a later one asks again.
    func readyMemoryDirectory() throws(SystemError) {
        guard let v1MemoryDirectory, !v1MemoryDirectoryMade else { return }
        try CgroupFiles.makeDirectory(v1MemoryDirectory, "create the run's cgroup \(v1MemoryDirectory)")
        v1MemoryDirectoryMade = true
    }

    /// The run's directories, for the group guard to empty if the supervisor dies (a v1
    /// one not made yet included: removing what is not there costs the guard nothing).
    public var directories: [String] { [v2Directory, v1MemoryDirectory].compactMap { $0 } }

    /// Removes the run's directories, once their tasks' cgroups are gone (at the end); one
    /// that is not empty yet stays (the task guard removes it when it has emptied it).
    public static func remove(_ directories: [String]) {
        for directory in directories { CgroupFiles.removeDirectory(directory) }
    }
}
