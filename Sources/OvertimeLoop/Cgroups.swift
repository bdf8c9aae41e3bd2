import CLibUV
import COvertime
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What this machine lets the supervisor do with cgroups (DESIGN §7), read from
/// `/proc/self/mountinfo` and `/proc/self/cgroup`: a cgroup v2 hierarchy whose directory
/// holding this process may have children, and a cgroup v1 `memory` hierarchy likewise. A
/// machine may have either, both (a hybrid: v2 for containment, v1 for memory), or none.
public struct CgroupProbe: Sendable, Equatable {
    /// The supervisor's own directory in the v2 hierarchy, when it is mounted and writable.
    public var v2Directory: String?
    /// The controllers the v2 directory hands down to its children, its own
    /// `cgroup.subtree_control` (what it may merely offer, `cgroup.controllers`, cannot be
    /// turned on there while the supervisor is a process in it).
    public var v2Controllers: [String] = []
    /// The supervisor's own directory in the v1 memory hierarchy, when mounted and writable.
    public var v1MemoryDirectory: String?
    /// Why a hierarchy is not used: one sentence each, for reports and `--help`.
    public var unavailable: [String] = []

    public init(v2Directory: String? = nil, v2Controllers: [String] = [], v1MemoryDirectory: String? = nil, unavailable: [String] = []) {
        self.v2Directory = v2Directory
        self.v2Controllers = v2Controllers
        self.v1MemoryDirectory = v1MemoryDirectory
        self.unavailable = unavailable
    }

    /// Looks, without creating anything.
    public static func probe() -> CgroupProbe {
        var probe = CgroupProbe()
        let mounts = Descriptors.readWholeFile("/proc/self/mountinfo") ?? []
        let membership = Descriptors.readWholeFile("/proc/self/cgroup") ?? []
        let found = Self.mounts(mountinfo: mounts)
        let (v2Mount, v1MemoryMount) = (found.v2, found.v1Memory)
        let (v2Path, v1MemoryPath) = Self.ownPaths(procSelfCgroup: membership)
        if let v2Mount, let v2Path {
            let directory = Self.join(v2Mount, v2Path)
            if access(directory, W_OK) == 0 {
                probe.v2Directory = directory
                probe.v2Controllers = Self.words(Descriptors.readWholeFile(directory + "/cgroup.subtree_control"))
            } else {
                probe.unavailable.append("cgroup v2 at \(directory) is not writable here")
            }
        } else {
            probe.unavailable.append(found.v2Subtree ? "cgroup v2 is mounted here only at a subtree of its hierarchy (a container's view)"
                                                     : "no cgroup v2 hierarchy is mounted")
        }
        if let v1MemoryMount, let v1MemoryPath {
            let directory = Self.join(v1MemoryMount, v1MemoryPath)
            if access(directory, W_OK) == 0 {
                probe.v1MemoryDirectory = directory
            } else {
                probe.unavailable.append("the cgroup v1 memory hierarchy at \(directory) is not writable here")
            }
        } else if !probe.v2Controllers.contains("memory") {
            probe.unavailable.append(found.v1MemorySubtree ? "the cgroup v1 memory hierarchy is mounted here only at a subtree of it (a container's view)"
                                                           : "no cgroup v1 memory hierarchy is mounted")
        }
        return probe
    }

    /// The v2 mount point and the v1 memory mount point, from mountinfo's lines ("… MOUNT
    /// OPTIONS … - FSTYPE SOURCE SUPEROPTIONS"). A hierarchy mounted twice counts once: the
    /// first mount whose root is the hierarchy's root ("/").
    static func mountPoints(mountinfo: String) -> (v2: String?, v1Memory: String?) {
        let found = mounts(mountinfo: Array(mountinfo.utf8))
        return (found.v2, found.v1Memory)
    }

    /// Also whether a hierarchy is mounted only at one of its subtrees (a container's view of
    /// its own cgroup): there, /proc/self/cgroup's paths cannot be found under the mount.
    /// One pass over the bytes, a String made only for the mount points kept: every `overtime
    /// run` reads mountinfo, and splitting it into lines, fields and strings was a large
    /// share of the start of `overtime run`'s supervisor.
    static func mounts(mountinfo: [UInt8]) -> (v2: String?, v1Memory: String?, v2Subtree: Bool, v1MemorySubtree: Bool) {
        var found: (v2: String?, v1Memory: String?, v2Subtree: Bool, v1MemorySubtree: Bool) = (nil, nil, false, false)
        mountinfo.withUnsafeBufferPointer { text in
            for line in KernelText.Pieces(text, by: "\n") {
                guard let mount = CgroupMount(text, line) else { continue }
                switch mount.hierarchy {
                case .v2 where !mount.atRoot: found.v2Subtree = true
                case .v1Memory where !mount.atRoot: found.v1MemorySubtree = true
                case .v2 where found.v2 == nil: found.v2 = Self.unescape(text, mount.mountPoint)
                case .v1Memory where found.v1Memory == nil: found.v1Memory = Self.unescape(text, mount.mountPoint)
                default: continue
                }
            }
        }
        return found
    }

    /// A mountinfo line ("ID PARENT DEV ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
    /// SUPEROPTIONS") that mounts a hierarchy the probe looks for: cgroup v2, or a v1 one
    /// with the memory controller among its super options. A hierarchy mounted twice counts
    /// once: the first mount whose root is the hierarchy's root ("/").
    private struct CgroupMount {
        enum Hierarchy { case v2, v1Memory }
        let hierarchy: Hierarchy
        let atRoot: Bool
        /// Where it is mounted, still escaped, in the text's indices.
        let mountPoint: Range<Int>

        init?(_ text: UnsafeBufferPointer<UInt8>, _ line: Range<Int>) {
            var fields = KernelText.Pieces(text, line, by: " ")
            for _ in 0..<3 { guard fields.next() != nil else { return nil } }
            guard let root = fields.next(), let mountPoint = fields.next(), fields.next() != nil else { return nil }
            // The optional fields (shared:N, master:N, ...) run up to a lone "-".
            while true {
                guard let field = fields.next() else { return nil }
                if KernelText.equal(text, field, "-") { break }
            }
            guard let type = fields.next(), fields.next() != nil, let superOptions = fields.next() else { return nil }
            if KernelText.equal(text, type, "cgroup2") {
                hierarchy = .v2
            } else if KernelText.equal(text, type, "cgroup"), KernelText.list(text, superOptions, contains: "memory") {
                hierarchy = .v1Memory
            } else {
                return nil
            }
            atRoot = KernelText.equal(text, root, "/")
            self.mountPoint = mountPoint
        }
    }

    /// This process's path in the v2 hierarchy ("0::/path") and in the v1 memory one
    /// ("N:memory:/path", or a line naming memory among several controllers).
    static func ownPaths(procSelfCgroup: String) -> (v2: String?, v1Memory: String?) {
        ownPaths(procSelfCgroup: Array(procSelfCgroup.utf8))
    }

    static func ownPaths(procSelfCgroup: [UInt8]) -> (v2: String?, v1Memory: String?) {
        var v2: String?
        var v1Memory: String?
        procSelfCgroup.withUnsafeBufferPointer { text in
            for line in KernelText.Pieces(text, by: "\n") {
                // "ID:CONTROLLERS:PATH"; the path may itself hold colons.
                var parts = KernelText.Pieces(text, line, by: ":")
                guard let id = parts.next(), let controllers = parts.next(), parts.cursor <= line.upperBound else { continue }
                let path = String(decoding: UnsafeBufferPointer(rebasing: text[parts.cursor..<line.upperBound]), as: UTF8.self)
                if KernelText.equal(text, id, "0"), controllers.isEmpty { v2 = path }
                if KernelText.list(text, controllers, contains: "memory") { v1Memory = path }
            }
        }
        return (v2, v1Memory)
    }

    /// A mount point as text: mountinfo escapes space, tab, newline and backslash as octal
    /// (`\040`).
    private static func unescape(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(range.count)
        var i = range.lowerBound
        while i < range.upperBound {
            if text[i] == UInt8(ascii: "\\"), i + 3 < range.upperBound,
               let value = Self.octal(text[i + 1], text[i + 2], text[i + 3]) {
                bytes.append(value)
                i += 4
            } else {
                bytes.append(text[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The byte three octal digits spell, if they do.
    private static func octal(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> UInt8? {
        let digits = UInt8(ascii: "0")...UInt8(ascii: "7")
        guard digits.contains(a), digits.contains(b), digits.contains(c) else { return nil }
        let value = Int(a - digits.lowerBound) * 64 + Int(b - digits.lowerBound) * 8 + Int(c - digits.lowerBound)
        return value <= 255 ? UInt8(value) : nil
    }

    static func join(_ mount: String, _ path: String) -> String {
        path == "/" ? mount : mount + path
    }

    static func words(_ bytes: [UInt8]?) -> [String] {
        guard let bytes else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
    }
}

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
    /// task's to give back). Measured here (Linux 6.18, 2 CPUs): a cgroup that ran
    /// `/bin/true` or `sleep` keeps 120–560 KiB, not growing from task to task — kernel
    /// objects freed a moment later and the kernel's per-CPU charge batch (64 pages), which
    /// a fresh cgroup's first charge shows as well (a fresh `/bin/true` peaks at 256 KiB).
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
            if mkdir(directory, 0o755) == 0 || errno == EEXIST {
                v2 = directory
                // The tasks get the memory controller where the supervisor's own cgroup
                // hands it down; turning it on here needs no process moved.
                if probe.v2Controllers.contains("memory") {
                    v2Memory = write("+memory", to: directory + "/cgroup.subtree_control") == 0
                    if !v2Memory { problems.append("the cgroup v2 memory controller could not be enabled below \(directory)") }
                } else {
                    problems.append("cgroup v2 here hands down no memory controller to Overtime's cgroup (\(probe.v2Controllers.isEmpty ? "none" : probe.v2Controllers.joined(separator: ", ")))")
                }
            } else {
                problems.append("cannot create \(directory): \(String(cString: strerror(errno)))")
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

    /// Makes the run's v1 memory directory if it is not made yet; false when it cannot be
    /// (the task asking goes without a memory cgroup, as a run whose directory could not
    /// be made at the start once did, and a later one asks again).
    func readyMemoryDirectory() -> Bool {
        guard let v1MemoryDirectory else { return false }
        if v1MemoryDirectoryMade { return true }
        guard mkdir(v1MemoryDirectory, 0o755) == 0 || errno == EEXIST else { return false }
        v1MemoryDirectoryMade = true
        return true
    }

    /// The run's directories, for the group guard to empty if the supervisor dies (a v1
    /// one not made yet included: removing what is not there costs the guard nothing).
    public var directories: [String] { [v2Directory, v1MemoryDirectory].compactMap { $0 } }

    /// Removes the run's directories, once their tasks' cgroups are gone (at the end); one
    /// that is not empty yet stays (the task guard removes it when it has emptied it).
    public static func remove(_ directories: [String]) {
        for directory in directories { _ = rmdir(directory) }
    }

    /// Writes `text` to a cgroup file; 0, or the errno.
    @discardableResult
    static func write(_ text: String, to path: String) -> Int32 {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { Descriptors.close(fd) }
        return write(text, toDescriptor: fd)
    }

    /// Writes `text` to an open cgroup file (each write one record); 0, or the errno.
    static func write(_ text: String, toDescriptor fd: Int32) -> Int32 {
        let bytes = Array(text.utf8)
        do throws(SystemError) {
            try Descriptors.writeAll(fd, bytes)
            return 0
        } catch {
            return error.errno
        }
    }
}

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
        guard let memoryDirectory, let usage = given ?? usagePath.flatMap({ TaskCgroup.number(Descriptors.readWholeFile($0)) }) else { return nil }
        if usage < exactFrom { return usage }
        let inactiveKey = memoryIsV2 ? "inactive_file" : "total_inactive_file"
        let inactive = TaskCgroup.keyed(Descriptors.readWholeFile(memoryDirectory + "/memory.stat"), inactiveKey) ?? 0
        return usage > inactive ? usage - inactive : 0
    }

    /// Every process in the task's cgroup (the v2 one where there is one: it holds the
    /// same processes as the memory one).
    public func processIDs() -> [Int32] {
        guard let directory = v2Directory ?? memoryDirectory,
              let bytes = Descriptors.readWholeFile(directory + "/cgroup.procs") else { return [] }
        return TaskCgroup.processIDs(bytes)
    }

    /// The high-water mark of memory use (`TaskCgroup.peakMemory`). A pooled cgroup's is
    /// reset when a task gets it (v1; a v2 memory cgroup is never pooled).
    public func peakMemory() -> UInt64? {
        guard let memoryDirectory else { return nil }
        return TaskCgroup.number(Descriptors.readWholeFile(memoryDirectory + (memoryIsV2 ? "/memory.peak" : "/memory.max_usage_in_bytes")))
    }

    /// CPU time of everything that ran in it for this task (`TaskCgroup.cpuMicroseconds`).
    public func cpuMicroseconds() -> (user: UInt64, system: UInt64)? {
        guard let v2Directory else { return nil }
        return since(cpuBaseline, TaskCgroup.cpu(Descriptors.readWholeFile(v2Directory + "/cpu.stat")))
    }

    func since(_ baseline: (user: UInt64, system: UInt64), _ now: (user: UInt64, system: UInt64)?) -> (user: UInt64, system: UInt64)? {
        guard let now else { return nil }
        return (now.user >= baseline.user ? now.user - baseline.user : 0, now.system >= baseline.system ? now.system - baseline.system : 0)
    }
}

/// A task's cgroups: a slot of the run's tree (`slot-<n>` in each hierarchy), made for the
/// task or taken from the run's pool of emptied ones (`CgroupTree.taskCgroup`), where it
/// goes back when the task has ended and nothing of it is left (`CgroupTree.release`).
/// The child is created inside the v2 one and enters the others itself before exec
/// (`procsForSpawn`), except a v1 memory cgroup it may join after it started
/// (`joinMemory()`). Loop-thread only.
///
/// Each task's figures start from zero: CPU from a baseline of the cumulative `cpu.stat`,
/// OOM kills from one of `oom_kill`, the v1 peak reset by the kernel, the limit set again.
public final class TaskCgroup {
    public let v2Directory: String?
    public let memoryDirectory: String?
    /// Whether `memoryDirectory` is in the v2 hierarchy (else v1).
    public let memoryIsV2: Bool
    /// The same directories, for reading the present task's figures elsewhere.
    public private(set) var usageFiles: CgroupUsageFiles
    /// Whether it may go back to the run's pool, and so keeps the descriptors it is read
    /// and written through open (the pool's slots only: a batch may run thousands of tasks
    /// at once, and a descriptor each for every file would be thousands more).
    let pooled: Bool
    /// `cgroup.procs` of each, open, for the spawn (the v2 one first); closed by `spawned()`
    /// unless the slot is pooled (the v2 one is read through too: whether it is empty).
    public private(set) var procsDescriptors: [Int32] = []
    /// The v2 directory, open, for a child created inside it (-1: none); closed by
    /// `spawned()` unless the slot is pooled.
    public private(set) var v2DirectoryDescriptor: Int32 = -1
    /// The memory hard limit in force (nil: none), so a reuse writes it only when it changes.
    private var memoryLimit: UInt64?
    /// `oom_kill` when the task got the cgroup.
    private var oomBaseline: UInt64 = 0
    /// Whether `cgroup.kill` was written: such a cgroup is not reused. Since the fix of the
    /// fork/kill race (Linux 6.14, and stable kernels after), a clone compares the target
    /// cgroup's kill count with one read, for CLONE_INTO_CGROUP, from the parent's cgroup
    /// (the target is not known yet where it is read): every child created inside a cgroup
    /// that was ever killed is SIGKILLed at birth (seen on 6.18).
    private(set) var killWritten = false
    /// Where the present task's late join of its v1 memory cgroup stands (`MemoryJoin`);
    /// nil when it joined before exec.
    private var lateJoin: MemoryJoin?
    /// Whether a task may join its memory cgroup after it started: a hybrid's v1 memory
    /// cgroup, beside a v2 one that lists every process to move (a child is born in it).
    private let canJoinMemoryLate: Bool
    /// Whether the v1 memory directory exists (made with the slot, or later: by a join's
    /// thread, or for a task that enters before exec). True without one to make.
    private let memoryDirectoryMade: SharedFlag
    /// The run's tree, which makes its own v1 directory before a slot's first is made
    /// (weak: the tree's pool holds its free slots).
    private weak var tree: CgroupTree?
    /// The run's v1 memory directory (`CgroupTree.v1MemoryDirectory`), for a join's thread.
    private let runMemoryDirectory: String?
    /// The files read or written once or more per task, open while the slot is pooled.
    private var kept: [KeptFile: Int32] = [:]

    enum KeptFile: Hashable {
        case usage, peak, oomCounter, cpuStat, kill
    }

    /// Makes a task's cgroups, with the memory hard limit when given: a one-off (removed
    /// when the task ends, as a cgroup that would not go back to the pool is).
    /// - Throws: `SystemError` naming the directory or file that failed.
    public convenience init(tree: CgroupTree, name: String, memoryLimit: UInt64?) throws(SystemError) {
        try self.init(tree: tree, name: name, memoryLimit: memoryLimit, pooled: false)
    }

    /// - Parameter memoryBeforeExec: whether the task enters its memory cgroup before exec;
    ///   where it may join late (`planMemoryJoin`), its v1 memory directory is made only when
    ///   it joins (`joinMemory`) or a later task of the slot enters before exec: a short task
    ///   never needs it, and a v1 memory cgroup costs the most of the slot's directories to
    ///   make and remove (docs/benchmarks.md, "A cgroup per task").
    init(tree: CgroupTree, name: String, memoryLimit: UInt64?, pooled: Bool, memoryBeforeExec: Bool = true) throws(SystemError) {
        var made: [String] = []
        func make(_ directory: String) throws(SystemError) {
            guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
                let error = SystemError("create the task's cgroup \(directory)", errno: errno)
                made.forEach { _ = rmdir($0) }
                throw error
            }
            made.append(directory)
        }
        let v2 = tree.v2Directory.map { $0 + "/" + name }
        var v1 = tree.v1MemoryDirectory.map { $0 + "/" + name }
        // Needed now (made before exec), the run's own v1 directory first; without it this
        // slot has no memory cgroup.
        if v1 != nil, memoryBeforeExec || v2 == nil, !tree.readyMemoryDirectory() { v1 = nil }
        self.tree = tree
        runMemoryDirectory = tree.v1MemoryDirectory
        canJoinMemoryLate = v2 != nil && v1 != nil && !tree.v2Memory
        if let v2 { try make(v2) }
        if let v1, memoryBeforeExec || !canJoinMemoryLate { try make(v1) }
        memoryDirectoryMade = SharedFlag(v1 == nil || made.contains(v1!))
        v2Directory = v2
        memoryIsV2 = tree.v2Memory
        memoryDirectory = tree.v2Memory ? v2 : v1
        usageFiles = CgroupUsageFiles(v2Directory: v2, memoryDirectory: memoryDirectory, memoryIsV2: memoryIsV2)
        self.pooled = pooled
        if let memoryLimit, let memoryDirectory {
            let file = memoryIsV2 ? "/memory.max" : "/memory.limit_in_bytes"
            let code = CgroupTree.write(String(memoryLimit), to: memoryDirectory + file)
            if code != 0 {
                made.forEach { _ = rmdir($0) }
                throw SystemError("set the task's memory limit in \(memoryDirectory + file)", errno: code)
            }
        }
        self.memoryLimit = memoryLimit
        for directory in made {
            // Read and write: the pool reads the v2 one to know the cgroup is empty.
            let fd = open(directory + "/cgroup.procs", O_RDWR | O_CLOEXEC)
            guard fd >= 0 else {
                let error = SystemError("open \(directory)/cgroup.procs", errno: errno)
                procsDescriptors.forEach(Descriptors.close)
                made.forEach { _ = rmdir($0) }
                throw error
            }
            procsDescriptors.append(fd)
        }
        // Without it the child writes cgroup.procs as before: not an error.
        if let v2 { v2DirectoryDescriptor = open(v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        planMemoryJoin(memoryBeforeExec: memoryBeforeExec)
    }

    /// The spawn is over (the child entered, or failed): the descriptors go, unless the
    /// slot is pooled (its next task spawns through them).
    public func spawned() {
        guard !pooled else { return }
        closeSpawnDescriptors()
    }

    private func closeSpawnDescriptors() {
        procsDescriptors.forEach(Descriptors.close)
        procsDescriptors.removeAll()
        if v2DirectoryDescriptor >= 0 { Descriptors.close(v2DirectoryDescriptor) }
        v2DirectoryDescriptor = -1
    }

    /// A task takes the slot from the pool (empty: `CgroupTree.release` saw to it): its
    /// figures start from here. The kernel's peak is reset to the usage now (v1: a write
    /// of 0 to `memory.max_usage_in_bytes`), which the pool keeps small (`leftoverMemory`).
    /// - Throws: `SystemError` when a file cannot be written; the slot is then not used.
    func begin(memoryLimit limit: UInt64?, memoryBeforeExec: Bool) throws(SystemError) {
        if memoryBeforeExec { try makeMemoryDirectory() }
        let memoryDirectoryExists = memoryIsV2 || memoryDirectoryMade.isSet
        if let memoryDirectory, memoryDirectoryExists, limit != memoryLimit {
            let file = memoryIsV2 ? "/memory.max" : "/memory.limit_in_bytes"
            let code = CgroupTree.write(limit.map(String.init) ?? (memoryIsV2 ? "max" : "-1"), to: memoryDirectory + file)
            guard code == 0 else { throw SystemError("set the task's memory limit in \(memoryDirectory + file)", errno: code) }
            memoryLimit = limit
        }
        if memoryDirectory != nil, !memoryIsV2, memoryDirectoryExists {
            let code = write(.peak, "0")
            guard code == 0 else { throw SystemError("reset the peak in \(memoryDirectory!)/memory.max_usage_in_bytes", errno: code) }
        }
        oomBaseline = readOOMCounter() ?? 0
        usageFiles = CgroupUsageFiles(v2Directory: v2Directory, memoryDirectory: memoryDirectory, memoryIsV2: memoryIsV2,
                                      cpuBaseline: readCPU() ?? (0, 0))
        planMemoryJoin(memoryBeforeExec: memoryBeforeExec)
    }

    /// Makes the v1 memory directory of a slot made without it, and opens its
    /// `cgroup.procs` for the spawn (`procsDescriptors`: the v2 one first, then this).
    private func makeMemoryDirectory() throws(SystemError) {
        guard let memoryDirectory, !memoryIsV2, procsDescriptors.count < (v2Directory == nil ? 1 : 2) else { return }
        guard let tree, tree.readyMemoryDirectory() else {
            throw SystemError("create the run's cgroup \(runMemoryDirectory ?? memoryDirectory)", errno: errno)
        }
        guard mkdir(memoryDirectory, 0o755) == 0 || errno == EEXIST else {
            throw SystemError("create the task's cgroup \(memoryDirectory)", errno: errno)
        }
        memoryDirectoryMade.set()
        let fd = open(memoryDirectory + "/cgroup.procs", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError("open \(memoryDirectory)/cgroup.procs", errno: errno) }
        procsDescriptors.append(fd)
    }

    /// Every process in the task's cgroup (`CgroupUsageFiles.processIDs`).
    public func processIDs() -> [Int32] {
        usageFiles.processIDs()
    }

    // MARK: Joining the memory cgroup late

    /// Says how the present task enters its memory cgroup (each task, new slot or reused):
    /// late only where it can (`canJoinMemoryLate`).
    /// - Parameter memoryBeforeExec: whether the child must be in its memory cgroup before
    ///   it execs. False lets a hybrid machine's task (v2 holds it, v1 counts its memory)
    ///   join its v1 memory cgroup after it started (`joinMemory()`): the first move into a
    ///   v1 cgroup after a quiet spell waits for an RCU grace period (docs/benchmarks.md,
    ///   "A cgroup per task"), which a task with no memory limit need not wait for. A task
    ///   with a `memory-max` always joins first: its limit counts from the first byte.
    private func planMemoryJoin(memoryBeforeExec: Bool) {
        lateJoin = !memoryBeforeExec && canJoinMemoryLate ? MemoryJoin() : nil
    }

    /// The `cgroup.procs` the child writes itself into before exec: every one but a v1
    /// memory cgroup it joins late (`procsDescriptors`: the v2 one first, then v1).
    public var procsForSpawn: [Int32] {
        lateJoin == nil ? procsDescriptors : Array(procsDescriptors.prefix(1))
    }

    /// Whether the memory cgroup counts the task: from before exec, or since its late join.
    /// Until then its figures (usage, peak, OOM kills) are not the task's.
    public var memoryCountsTask: Bool {
        guard memoryDirectory != nil else { return false }
        return lateJoin?.state == .joined || lateJoin == nil
    }

    /// Whether the task joined its memory cgroup after it started.
    public var memoryJoinedLate: Bool {
        lateJoin?.state == .joined
    }

    /// Whether the task joins its memory cgroup late and has not yet.
    public var memoryJoinPending: Bool {
        lateJoin.map { $0.state == .waiting } ?? false
    }

    /// The task's figures as far as they are its own: without the memory directory until
    /// a late join is done (for readers on other threads, the metrics' sampler).
    public var usageFilesNow: CgroupUsageFiles {
        memoryCountsTask ? usageFiles
            : CgroupUsageFiles(v2Directory: v2Directory, memoryDirectory: nil, memoryIsV2: memoryIsV2, cpuBaseline: usageFiles.cpuBaseline)
    }

    /// Moves every process of the task (its v2 cgroup lists them all) into its v1 memory
    /// cgroup, on a thread of its own: the move may wait for a grace period, which the loop
    /// must not. Processes forked while the list is read are caught by reading it again
    /// until a pass finds none new. Once only; nothing after the task ended. (Should the
    /// slot pass to the next task while the thread waits, it moves that task's processes
    /// into the same slot's v1 cgroup: where they belong, if early.)
    public func joinMemory() {
        guard let lateJoin, let memoryDirectory, lateJoin.begin() else { return }
        let files = usageFiles
        let made = memoryDirectoryMade
        let runDirectory = runMemoryDirectory
        DetachedThread.run {
            // Made (where the run and the slot have none yet) and opened here, off the loop:
            // the slot's own descriptor is closed after the spawn unless the slot is pooled.
            if let runDirectory, mkdir(runDirectory, 0o755) != 0, errno != EEXIST { return lateJoin.finish(joined: false) }
            guard mkdir(memoryDirectory, 0o755) == 0 || errno == EEXIST else { return lateJoin.finish(joined: false) }
            made.set()
            let procs = open(memoryDirectory + "/cgroup.procs", O_WRONLY | O_CLOEXEC)
            guard procs >= 0 else { return lateJoin.finish(joined: false) }
            var moved = Set<Int32>()
            var entered = 0
            for _ in 0..<16 {
                let fresh = files.processIDs().filter { !moved.contains($0) }
                if fresh.isEmpty { break }
                for pid in fresh {
                    moved.insert(pid)
                    // ESRCH: it ended meanwhile. Every other failure is the same to us: the
                    // task is then not counted there, and says so (`memoryCountsTask`).
                    if CgroupTree.write(String(pid), toDescriptor: procs) == 0 { entered += 1 }
                }
            }
            Descriptors.close(procs)
            lateJoin.finish(joined: entered > 0)
        }
    }

    /// The task ended: a join not begun never will.
    public func abandonMemoryJoin() {
        lateJoin?.abandon()
    }

    /// Sends `signal` to every process in the cgroup, `setsid` or not. A process forked
    /// while the list is read may miss it; the kill after grace (`killAll`) does not.
    /// - Returns: how many were signalled.
    @discardableResult
    public func signalAll(_ signal: Int32) -> Int {
        var sent = 0
        for pid in processIDs() where kill(pid, signal) == 0 { sent += 1 }
        return sent
    }

    /// SIGKILL to everything in it: `cgroup.kill` (v2, Linux 5.14+), which no fork escapes;
    /// else the list, again until it is empty (bounded: a fork bomb is killed as it forks).
    /// Nothing when it is empty already: only the supervisor puts a process in it.
    public func killAll() {
        guard !isEmpty else { return }
        if v2Directory != nil, write(.kill, "1") == 0 {
            killWritten = true
            return
        }
        for _ in 0..<100 {
            if signalAll(SIGKILL) == 0 { break }
        }
    }

    /// Whether a process is left in it: the v2 `cgroup.procs` read through the open
    /// descriptor where there is one (a byte says it is not empty).
    public var isEmpty: Bool {
        if v2Directory != nil, let procs = procsDescriptors.first {
            var byte: UInt8 = 0
            let n = pread(procs, &byte, 1, 0)
            if n >= 0 { return n == 0 }
        }
        return processIDs().isEmpty
    }

    /// The memory the task uses now, as the watchdog judges it: the cgroup's usage less its
    /// inactive file cache (the kernel's "working set", what Kubernetes evicts on), since
    /// clean cache is given back under pressure and must not cancel a job that reads files.
    /// - Parameter exactFrom: below this the usage itself is returned (an upper bound of the
    ///   working set, and enough to know no limit is near), sparing the read of memory.stat,
    ///   which the kernel computes afresh for every read (most of a sample's cost).
    public func memoryInUse(exactFrom: UInt64 = 0) -> UInt64? {
        guard memoryCountsTask, let usage = readUsage() else { return nil }
        return usageFiles.memoryInUse(usage: usage, exactFrom: exactFrom)
    }

    /// The usage file, kept open and read again from its start (`pread`) while the task
    /// runs (and while the slot is pooled): the kernel makes its text afresh for each read,
    /// and an open and a close per sample cost more than it.
    private func readUsage() -> UInt64? {
        guard let fd = descriptor(.usage, keptEvenOneOff: true) else { return nil }
        // Digits read in place: the watchdog reads it 4 times a second for every task.
        return withUnsafeTemporaryAllocation(byteCount: 32, alignment: 1) { buffer -> UInt64? in
            let n = pread(fd, buffer.baseAddress, buffer.count, 0)
            guard n > 0 else { return nil }
            return KernelText.decimal(buffer.prefix(n))
        }
    }

    /// What the cgroup's memory still holds with no process in it (page cache, kernel
    /// objects freed late, the kernel's per-CPU charge batch): what the next task would
    /// inherit in its usage and peak. nil without a memory cgroup (or before a late join
    /// has made its v1 directory: a task that ended first has left nothing there).
    var leftoverMemory: UInt64? { memoryIsV2 || memoryDirectoryMade.isSet ? readUsage() : nil }

    deinit {
        closeDescriptors()
    }

    private func closeDescriptors() {
        closeSpawnDescriptors()
        kept.values.forEach(Descriptors.close)
        kept.removeAll()
    }

    /// The cgroup's high-water mark of memory use since the task got it (v1
    /// `memory.max_usage_in_bytes`, v2 `memory.peak` from Linux 5.19): page cache the task
    /// caused included, as the kernel counts it.
    public func peakMemory() -> UInt64? {
        memoryCountsTask ? Self.number(read(.peak)) : nil
    }

    /// How many processes the kernel's OOM killer killed in it for this task (v1
    /// `memory.oom_control`, v2 `memory.events`: `oom_kill`); nil without a memory cgroup
    /// or the counter.
    public func oomKills() -> Int? {
        guard memoryCountsTask, let count = readOOMCounter() else { return nil }
        return Int(clamping: count >= oomBaseline ? count - oomBaseline : 0)
    }

    private func readOOMCounter() -> UInt64? {
        Self.keyed(read(.oomCounter), "oom_kill")
    }

    /// CPU time of everything that ran in it for this task (v2 `cpu.stat`), in microseconds.
    public func cpuMicroseconds() -> (user: UInt64, system: UInt64)? {
        usageFiles.since(usageFiles.cpuBaseline, readCPU())
    }

    private func readCPU() -> (user: UInt64, system: UInt64)? {
        Self.cpu(read(.cpuStat))
    }

    /// The file's path, and how it is opened (nil: the slot has no such file).
    private func place(of file: KeptFile) -> (path: String, flags: Int32)? {
        switch file {
        case .usage: usageFiles.usagePath.map { ($0, O_RDONLY) }
        // Read and written (reset) through the same descriptor.
        case .peak: memoryDirectory.map { ($0 + (memoryIsV2 ? "/memory.peak" : "/memory.max_usage_in_bytes"), O_RDWR) }
        case .oomCounter: memoryDirectory.map { ($0 + (memoryIsV2 ? "/memory.events" : "/memory.oom_control"), O_RDONLY) }
        case .cpuStat: v2Directory.map { ($0 + "/cpu.stat", O_RDONLY) }
        case .kill: v2Directory.map { ($0 + "/cgroup.kill", O_WRONLY) }
        }
    }

    /// The file's kept descriptor, opened the first time; nil when it cannot be, or when
    /// the slot is a one-off (then the caller opens and closes it), unless `keptEvenOneOff`.
    private func descriptor(_ file: KeptFile, keptEvenOneOff: Bool = false) -> Int32? {
        if let fd = kept[file] { return fd }
        guard pooled || keptEvenOneOff, let (path, flags) = place(of: file) else { return nil }
        let fd = open(path, flags | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        kept[file] = fd
        return fd
    }

    /// A cgroup file's text: through its kept descriptor when the slot is pooled, else
    /// opened and closed.
    private func read(_ file: KeptFile) -> [UInt8]? {
        if let fd = descriptor(file) { return Self.readFromStart(fd) }
        return place(of: file).flatMap { Descriptors.readWholeFile($0.path) }
    }

    /// Writes `text` to one of the slot's files (`memory.max_usage_in_bytes`,
    /// `cgroup.kill`); 0, or the errno.
    private func write(_ file: KeptFile, _ text: String) -> Int32 {
        guard let fd = descriptor(file) else {
            guard let (path, _) = place(of: file) else { return ENOENT }
            return CgroupTree.write(text, to: path)
        }
        let bytes = Array(text.utf8)
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return n == bytes.count ? 0 : n < 0 ? errno : EIO
    }

    /// Removes the task's cgroups; false while a process is still in one (it is dying:
    /// try again later). Its descriptors close first.
    public func remove() -> Bool {
        abandonMemoryJoin()
        closeDescriptors()
        var removed = true
        for directory in [v2Directory, memoryDirectory == v2Directory ? nil : memoryDirectory].compactMap({ $0 }) {
            if rmdir(directory) != 0, errno != ENOENT { removed = false }
        }
        return removed
    }

    /// A cgroup file's whole text, read again from its start (the kernel makes it afresh).
    static func readFromStart(_ fd: Int32) -> [UInt8]? {
        withUnsafeTemporaryAllocation(byteCount: 1024, alignment: 1) { buffer -> [UInt8]? in
            let n = pread(fd, buffer.baseAddress, buffer.count, 0)
            guard n >= 0 else { return nil }
            return Array(buffer.prefix(n))
        }
    }

    static func number(_ bytes: [UInt8]?) -> UInt64? {
        bytes.flatMap { KernelText.decimal($0) }
    }

    static func processIDs(_ bytes: [UInt8]) -> [Int32] {
        bytes.split(separator: UInt8(ascii: "\n")).compactMap { Int32(String(decoding: $0, as: UTF8.self)) }
    }

    static func cpu(_ stat: [UInt8]?) -> (user: UInt64, system: UInt64)? {
        guard let user = keyed(stat, "user_usec"), let system = keyed(stat, "system_usec") else { return nil }
        return (user, system)
    }

    /// The value of `key` in a flat-keyed file ("key value" lines). Read as bytes: every task's
    /// end reads its CPU time from `cpu.stat` so, and splitting the file into Strings cost
    /// more than reading it.
    static func keyed(_ bytes: [UInt8]?, _ key: String) -> UInt64? {
        guard let bytes else { return nil }
        let name = Array(key.utf8)
        return bytes.withUnsafeBufferPointer { text -> UInt64? in
            for line in KernelText.Pieces(text, by: "\n") {
                var parts = KernelText.Pieces(text, line, by: " ")
                guard let first = parts.next(), text[first].elementsEqual(name), parts.cursor < line.upperBound else { continue }
                return KernelText.decimal(text[parts.cursor..<line.upperBound])
            }
            return nil
        }
    }
}

/// Resident memory from `/proc`, for tasks without a memory cgroup.
public enum ProcessMemory {
    private static let pageSize = UInt64(sysconf(Int32(_SC_PAGESIZE)))

    /// The resident set of each of `pids` summed (`/proc/PID/statm`), those gone skipped.
    /// Pages two of them share count twice: an upper bound, as `ps` would add them up.
    public static func residentSum(_ pids: [Int32]) -> UInt64 {
        var total: UInt64 = 0
        for pid in pids { total += resident(pid) ?? 0 }
        return total
    }

    static func resident(_ pid: Int32) -> UInt64? {
        guard let bytes = Descriptors.readWholeFile("/proc/\(pid)/statm") else { return nil }
        let fields = bytes.split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = UInt64(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * pageSize
    }

    /// The summed resident set of every process of each session, from one pass over
    /// `/proc/*/stat` (a task's leader leads a session of its own, so its session id is
    /// its pid): the cost is one read per process on the machine, however many tasks.
    public static func residentBySession() -> [Int32: UInt64] {
        var sums: [Int32: UInt64] = [:]
        for name in Descriptors.directoryEntries("/proc") ?? [] {
            guard let first = name.utf8.first, first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9"),
                  let bytes = Descriptors.readWholeFile("/proc/\(name)/stat"),
                  let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { continue }
            // After "PID (COMM)": state ppid pgrp session … rss is the 22nd field after it.
            let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
            guard fields.count > 21, let session = Int32(String(decoding: fields[3], as: UTF8.self)),
                  let pages = UInt64(String(decoding: fields[21], as: UTF8.self)) else { continue }
            sums[session, default: 0] += pages * pageSize
        }
        return sums
    }
}

private extension String {
    func trimmingCharacters(in set: String) -> String {
        let drop = Set(set.unicodeScalars)
        var scalars = Substring(self).unicodeScalars[...]
        while let first = scalars.first, drop.contains(first) { scalars.removeFirst() }
        while let last = scalars.last, drop.contains(last) { scalars.removeLast() }
        return String(String.UnicodeScalarView(scalars))
    }
}

/// The kernel's word that a v1 memory cgroup's usage crossed a level (`cgroup.event_control`
/// with an eventfd per level, in either direction), so the watchdog looks at once rather
/// than at its next sample: a task growing at gigabytes a second crosses `memory-max` and
/// the hard limit above it within one sampling interval. Loop-thread only.
///
/// An accelerator: the samples go on as before, and where it cannot be set up (v2, whose
/// memory.events does not count levels of our choosing; a kernel without event_control)
/// nothing else changes.
public final class MemoryLevelWatch: LoopHandleOwner {
    private let eventFD: Int32
    private let usageFD: Int32
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private var onCrossed: (() -> Void)?
    private var closed = false

    /// Registers `levels` (bytes) on the task's v1 memory cgroup; nil when it cannot.
    public init?(loop: EventLoop, cgroup: TaskCgroup, levels: [UInt64], onCrossed: @escaping () -> Void) {
        guard let directory = cgroup.memoryDirectory, !cgroup.memoryIsV2, !levels.isEmpty else { return nil }
        let events = overtime_eventfd()
        guard events >= 0 else { return nil }
        let usage = open(directory + "/memory.usage_in_bytes", O_RDONLY | O_CLOEXEC)
        guard usage >= 0 else {
            Descriptors.close(events)
            return nil
        }
        // Registering a level makes the kernel wait for an RCU grace period (tens of
        // milliseconds): not on the loop, which a thousand starting tasks would stall for
        // seconds. A thread of its own does it with copies of both descriptors (the
        // registration lives as long as the eventfd's file, whoever closes which number).
        guard let eventsCopy = try? Descriptors.duplicate(events), let usageCopy = try? Descriptors.duplicate(usage) else {
            Descriptors.close(usage)
            Descriptors.close(events)
            return nil
        }
        let lines = levels.map { "\(eventsCopy) \(usageCopy) \($0)" }
        let control = directory + "/cgroup.event_control"
        DetachedThread.run {
            for line in lines { CgroupTree.write(line, to: control) }
            Descriptors.close(eventsCopy)
            Descriptors.close(usageCopy)
        }
        eventFD = events
        usageFD = usage
        self.onCrossed = onCrossed
        handle = .allocate(capacity: 1)
        guard uv_poll_init(loop.uvLoop, handle, events) == 0 else {
            handle.deallocate()
            closed = true
            return nil   // deinit closes the two descriptors
        }
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        uv_poll_start(handle, Int32(UV_READABLE.rawValue), Self.readable)
    }

    private static let readable: uv_poll_cb = { h, status, _ in
        let watch = Unmanaged<MemoryLevelWatch>.fromOpaque(h!.pointee.data).takeUnretainedValue()
        // An error on the eventfd would come back on every turn: stop listening (the
        // samples go on).
        guard status >= 0 else { return watch.close() }
        watch.crossed()
    }

    private func crossed() {
        var count: UInt64 = 0
        _ = read(eventFD, &count, 8)   // reset the counter; a missed read only wakes us again
        onCrossed?()
    }

    /// Stops listening (the kernel drops the registration when the eventfd closes).
    public func close() {
        guard !closed else { return }
        closed = true
        onCrossed = nil
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }

    deinit {
        Descriptors.close(eventFD)
        Descriptors.close(usageFD)
    }
}

/// A yes that one thread says and another reads.
final class SharedFlag: Sendable {
    private let value: Atomic<Bool>

    init(_ initially: Bool) {
        value = Atomic(initially)
    }

    var isSet: Bool { value.load(ordering: .acquiring) }

    func set() {
        value.store(true, ordering: .releasing)
    }
}

/// Where a task's late join of its memory cgroup stands, shared by the loop and the thread
/// that moves it.
final class MemoryJoin: Sendable {
    enum State: Int { case waiting, moving, joined, abandoned }
    private let value = Atomic<Int>(State.waiting.rawValue)

    var state: State { State(rawValue: value.load(ordering: .acquiring)) ?? .abandoned }

    /// The move starts: true unless it started already or the task ended.
    func begin() -> Bool {
        value.compareExchange(expected: State.waiting.rawValue, desired: State.moving.rawValue, ordering: .acquiringAndReleasing).exchanged
    }

    func finish(joined: Bool) {
        value.store((joined ? State.joined : State.abandoned).rawValue, ordering: .releasing)
    }

    func abandon() {
        _ = value.compareExchange(expected: State.waiting.rawValue, desired: State.abandoned.rawValue, ordering: .acquiringAndReleasing)
    }
}

/// Runs blocking work on a thread of its own that nobody waits for (a kernel call that only
/// sleeps, kept off the loop).
enum DetachedThread {
    private final class Work {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    static func run(_ body: @escaping () -> Void) {
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { raw in
            let work = Unmanaged<Work>.fromOpaque(raw!).takeRetainedValue()
            work.body()
            return nil
        }, work)
        if started == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<Work>.fromOpaque(work).takeRetainedValue().body()   // no thread: do it here
        }
    }
}

/// Reading the kernel's text files in place, as bytes (mountinfo, /proc/self/cgroup, a
/// cgroup's numbers and flat-keyed files): every `overtime run` reads several, and a cgroup's
/// are read at every task's end and by the watchdog, where Strings cost far more than the
/// reading.
private enum KernelText {
    /// The pieces of `range` of the text between one `separator` and the next (lines, a
    /// line's fields, a list's items), as ranges of its indices without the separators. One
    /// separator at the very end makes no empty last piece.
    struct Pieces: Sequence, IteratorProtocol {
        let text: UnsafeBufferPointer<UInt8>
        let separator: UInt8
        /// Where the next piece starts: past the last piece taken and its separator.
        private(set) var cursor: Int
        let end: Int

        init(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>? = nil, by separator: Unicode.Scalar) {
            self.text = text
            self.separator = UInt8(ascii: separator)
            cursor = range?.lowerBound ?? 0
            end = range?.upperBound ?? text.count
        }

        mutating func next() -> Range<Int>? {
            guard cursor < end else { return nil }
            let start = cursor
            while cursor < end, text[cursor] != separator { cursor += 1 }
            defer { cursor += 1 }
            return start..<cursor
        }
    }

    static func equal(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ literal: StaticString) -> Bool {
        guard range.count == literal.utf8CodeUnitCount else { return false }
        let bytes = literal.utf8Start
        for i in 0..<range.count where text[range.lowerBound + i] != bytes[i] { return false }
        return true
    }

    /// Whether the comma-separated list in `range` has `word` as one of its items.
    static func list(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, contains word: StaticString) -> Bool {
        Pieces(text, range, by: ",").contains { equal(text, $0, word) }
    }

    /// The number a kernel file's digits spell, up to the end or a newline: nil when there
    /// are none, when anything else comes first (a v2 limit's "max"), or past UInt64.
    static func decimal<Digits: Collection<UInt8>>(_ digits: Digits) -> UInt64? {
        var value: UInt64 = 0
        var any = false
        for byte in digits {
            if byte == UInt8(ascii: "\n") { break }
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (shifted, overflowed) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowedToo) = shifted.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            if overflowed || overflowedToo { return nil }
            value = sum
            any = true
        }
        return any ? value : nil
    }
}
