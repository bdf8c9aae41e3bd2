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
        let mounts = Descriptors.readWholeFile("/proc/self/mountinfo").map { String(decoding: $0, as: UTF8.self) } ?? ""
        let membership = Descriptors.readWholeFile("/proc/self/cgroup").map { String(decoding: $0, as: UTF8.self) } ?? ""
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
        let found = mounts(mountinfo: mountinfo)
        return (found.v2, found.v1Memory)
    }

    /// Also whether a hierarchy is mounted only at one of its subtrees (a container's view of
    /// its own cgroup): there, /proc/self/cgroup's paths cannot be found under the mount.
    static func mounts(mountinfo: String) -> (v2: String?, v1Memory: String?, v2Subtree: Bool, v1MemorySubtree: Bool) {
        var v2: String?
        var v1Memory: String?
        var v2Subtree = false
        var v1MemorySubtree = false
        for line in mountinfo.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            guard let dash = fields.firstIndex(of: "-"), fields.count > dash + 3, fields.count > 4 else { continue }
            let root = fields[3]
            let mountPoint = Self.unescape(fields[4])
            let type = fields[dash + 1]
            let superOptions = fields[dash + 3].split(separator: ",")
            let memory = type == "cgroup" && superOptions.contains("memory")
            guard root == "/" else {
                if type == "cgroup2" { v2Subtree = true }
                if memory { v1MemorySubtree = true }
                continue
            }
            if type == "cgroup2", v2 == nil { v2 = mountPoint }
            if memory, v1Memory == nil { v1Memory = mountPoint }
        }
        return (v2, v1Memory, v2Subtree, v1MemorySubtree)
    }

    /// This process's path in the v2 hierarchy ("0::/path") and in the v1 memory one
    /// ("N:memory:/path", or a line naming memory among several controllers).
    static func ownPaths(procSelfCgroup: String) -> (v2: String?, v1Memory: String?) {
        var v2: String?
        var v1Memory: String?
        for line in procSelfCgroup.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            if parts[0] == "0", parts[1].isEmpty { v2 = String(parts[2]) }
            if parts[1].split(separator: ",").contains("memory") { v1Memory = String(parts[2]) }
        }
        return (v2, v1Memory)
    }

    /// Mountinfo escapes space, tab, newline and backslash as octal (`\040`).
    private static func unescape(_ text: String) -> String {
        guard text.contains("\\") else { return text }
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3, let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
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
/// hierarchy the probe found, with a cgroup per task below. Loop-thread only.
public final class CgroupTree {
    /// The run's v2 directory: containment (every process of a task, `cgroup.kill`) and
    /// CPU time (`cpu.stat`, kept whether or not the cpu controller is on).
    public let v2Directory: String?
    /// Whether the v2 memory controller is on for the tasks' cgroups.
    public let v2Memory: Bool
    /// The run's v1 memory directory: memory use, the hard limit, the OOM counter.
    public let v1MemoryDirectory: String?
    /// Why a hierarchy the probe found could not be used after all.
    public let problems: [String]

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
        var v1: String?
        if !v2Memory, let parent = probe.v1MemoryDirectory {
            let directory = parent + "/overtime-\(runID)"
            if mkdir(directory, 0o755) == 0 || errno == EEXIST {
                v1 = directory
            } else {
                problems.append("cannot create \(directory): \(String(cString: strerror(errno)))")
            }
        }
        guard v2 != nil || v1 != nil else { return (nil, problems) }
        return (CgroupTree(v2: v2, v2Memory: v2Memory, v1: v1, problems: problems), problems)
    }

    private init(v2: String?, v2Memory: Bool, v1: String?, problems: [String]) {
        v2Directory = v2
        self.v2Memory = v2Memory
        v1MemoryDirectory = v1
        self.problems = problems
    }

    /// The run's directories, for the group guard to empty if the supervisor dies.
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
        return bytes.split(separator: UInt8(ascii: "\n")).compactMap { Int32(String(decoding: $0, as: UTF8.self)) }
    }

    /// The high-water mark of memory use (`TaskCgroup.peakMemory`).
    public func peakMemory() -> UInt64? {
        guard let memoryDirectory else { return nil }
        return TaskCgroup.number(Descriptors.readWholeFile(memoryDirectory + (memoryIsV2 ? "/memory.peak" : "/memory.max_usage_in_bytes")))
    }

    /// CPU time of everything that ran in it (`TaskCgroup.cpuMicroseconds`).
    public func cpuMicroseconds() -> (user: UInt64, system: UInt64)? {
        guard let v2Directory else { return nil }
        let stat = Descriptors.readWholeFile(v2Directory + "/cpu.stat")
        guard let user = TaskCgroup.keyed(stat, "user_usec"), let system = TaskCgroup.keyed(stat, "system_usec") else { return nil }
        return (user, system)
    }
}

/// One task's cgroups. Made before the spawn; the child is created inside the v2 one and
/// enters the others itself before exec (`procsDescriptors`), except a v1 memory cgroup it
/// may join after it started (`joinMemory()`). Loop-thread only.
public final class TaskCgroup {
    public let v2Directory: String?
    public let memoryDirectory: String?
    /// Whether `memoryDirectory` is in the v2 hierarchy (else v1).
    public let memoryIsV2: Bool
    /// The same directories, for reading its figures elsewhere.
    public let usageFiles: CgroupUsageFiles
    /// `cgroup.procs` of each, open for writing, for the spawn (the v2 one first); closed by
    /// `spawned()`.
    public private(set) var procsDescriptors: [Int32] = []
    /// The v2 directory, open, for a child created inside it (-1: none); closed by `spawned()`.
    public private(set) var v2DirectoryDescriptor: Int32 = -1
    /// The v1 memory cgroup's `cgroup.procs`, open, when the task joins it after its start
    /// (`joinMemory()`); -1 when it joins before exec, or has joined.
    private var lateMemoryProcs: Int32 = -1
    /// Where a late join stands (`MemoryJoin`); nil when the task joins before exec.
    private let lateJoin: MemoryJoin?

    /// Makes the task's cgroups, with the memory hard limit when given.
    /// - Parameter memoryBeforeExec: whether the child must be in its memory cgroup before
    ///   it execs. False lets a hybrid machine's task (v2 holds it, v1 counts its memory)
    ///   join its v1 memory cgroup after it started (`joinMemory()`): the first move into a
    ///   v1 cgroup after a quiet spell waits for an RCU grace period (about 12 ms here,
    ///   docs/benchmarks.md), which a task with no memory limit need not wait for. A task
    ///   with a `memory-max` always joins first: its limit counts from the first byte.
    /// - Throws: `SystemError` naming the directory or file that failed.
    public init(tree: CgroupTree, name: String, memoryLimit: UInt64?, memoryBeforeExec: Bool = true) throws(SystemError) {
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
        let v1 = tree.v1MemoryDirectory.map { $0 + "/" + name }
        if let v2 { try make(v2) }
        if let v1 { try make(v1) }
        v2Directory = v2
        memoryIsV2 = tree.v2Memory
        memoryDirectory = tree.v2Memory ? v2 : v1
        usageFiles = CgroupUsageFiles(v2Directory: v2, memoryDirectory: memoryDirectory, memoryIsV2: memoryIsV2)
        if let memoryLimit, let memoryDirectory {
            let file = memoryIsV2 ? "/memory.max" : "/memory.limit_in_bytes"
            let code = CgroupTree.write(String(memoryLimit), to: memoryDirectory + file)
            if code != 0 {
                made.forEach { _ = rmdir($0) }
                throw SystemError("set the task's memory limit in \(memoryDirectory + file)", errno: code)
            }
        }
        // Late only where the v2 cgroup lists every process to move (a child is born in
        // it), and only for v1: a v2 memory cgroup is the one the child is born in.
        let late = !memoryBeforeExec && v2 != nil && v1 != nil && !tree.v2Memory
        lateJoin = late ? MemoryJoin() : nil
        for directory in made {
            let fd = open(directory + "/cgroup.procs", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else {
                let error = SystemError("open \(directory)/cgroup.procs", errno: errno)
                procsDescriptors.forEach(Descriptors.close)
                if lateMemoryProcs >= 0 { Descriptors.close(lateMemoryProcs) }
                made.forEach { _ = rmdir($0) }
                throw error
            }
            if late, directory == v1 {
                lateMemoryProcs = fd
            } else {
                procsDescriptors.append(fd)
            }
        }
        // Without it the child writes cgroup.procs as before: not an error.
        if let v2 { v2DirectoryDescriptor = open(v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    }

    /// The spawn is over (the child entered, or failed): the descriptors go.
    public func spawned() {
        procsDescriptors.forEach(Descriptors.close)
        procsDescriptors.removeAll()
        if v2DirectoryDescriptor >= 0 { Descriptors.close(v2DirectoryDescriptor) }
        v2DirectoryDescriptor = -1
    }

    /// Every process in the task's cgroup (`CgroupUsageFiles.processIDs`).
    public func processIDs() -> [Int32] {
        usageFiles.processIDs()
    }

    // MARK: Joining the memory cgroup late

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
        memoryCountsTask ? usageFiles : CgroupUsageFiles(v2Directory: v2Directory, memoryDirectory: nil, memoryIsV2: memoryIsV2)
    }

    /// Moves every process of the task (its v2 cgroup lists them all) into its v1 memory
    /// cgroup, on a thread of its own: the move may wait for a grace period, which the loop
    /// must not. Processes forked while the list is read are caught by reading it again
    /// until a pass finds none new. Once only; nothing after the task ended.
    public func joinMemory() {
        guard let lateJoin, lateMemoryProcs >= 0, lateJoin.begin() else { return }
        let procs = lateMemoryProcs
        lateMemoryProcs = -1
        let files = usageFiles
        DetachedThread.run {
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
        guard let lateJoin else { return }
        lateJoin.abandon()
        if lateMemoryProcs >= 0 {
            Descriptors.close(lateMemoryProcs)
            lateMemoryProcs = -1
        }
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
    public func killAll() {
        if let v2Directory, CgroupTree.write("1", to: v2Directory + "/cgroup.kill") == 0 { return }
        for _ in 0..<100 {
            if signalAll(SIGKILL) == 0 { break }
        }
    }

    /// Whether a process is left in it.
    public var isEmpty: Bool { processIDs().isEmpty }

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

    /// The usage file, kept open and read again from its start (`pread`): the kernel makes
    /// its text afresh for each read, and an open and a close per sample cost more than it.
    private var usageDescriptor: Int32 = -1

    private func readUsage() -> UInt64? {
        guard let path = usageFiles.usagePath else { return nil }
        if usageDescriptor < 0 {
            usageDescriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard usageDescriptor >= 0 else { return nil }
        }
        return withUnsafeTemporaryAllocation(byteCount: 32, alignment: 1) { buffer -> UInt64? in
            let n = pread(usageDescriptor, buffer.baseAddress, buffer.count, 0)
            guard n > 0 else { return nil }
            var value: UInt64 = 0
            for byte in buffer.prefix(n) {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { break }
                value = value &* 10 &+ UInt64(byte - UInt8(ascii: "0"))
            }
            return value
        }
    }

    deinit {
        if usageDescriptor >= 0 { Descriptors.close(usageDescriptor) }
        if lateMemoryProcs >= 0 { Descriptors.close(lateMemoryProcs) }
    }

    /// The cgroup's high-water mark of memory use (v1 `memory.max_usage_in_bytes`, v2
    /// `memory.peak` from Linux 5.19): page cache the task caused included, as the kernel
    /// counts it.
    public func peakMemory() -> UInt64? {
        memoryCountsTask ? usageFiles.peakMemory() : nil
    }

    /// How many processes the kernel's OOM killer killed in it (v1 `memory.oom_control`,
    /// v2 `memory.events`: `oom_kill`); nil without a memory cgroup or the counter.
    public func oomKills() -> Int? {
        guard memoryCountsTask, let memoryDirectory else { return nil }
        let file = memoryIsV2 ? "/memory.events" : "/memory.oom_control"
        return Self.keyed(Descriptors.readWholeFile(memoryDirectory + file), "oom_kill").map { Int(clamping: $0) }
    }

    /// CPU time of everything that ran in it (v2 `cpu.stat`), in microseconds.
    public func cpuMicroseconds() -> (user: UInt64, system: UInt64)? {
        usageFiles.cpuMicroseconds()
    }

    /// Removes the task's cgroups; false while a process is still in one (it is dying:
    /// try again later).
    public func remove() -> Bool {
        abandonMemoryJoin()
        if usageDescriptor >= 0 {
            Descriptors.close(usageDescriptor)
            usageDescriptor = -1
        }
        var removed = true
        for directory in [v2Directory, memoryDirectory == v2Directory ? nil : memoryDirectory].compactMap({ $0 }) {
            if rmdir(directory) != 0, errno != ENOENT { removed = false }
        }
        return removed
    }

    static func number(_ bytes: [UInt8]?) -> UInt64? {
        guard let bytes else { return nil }
        return UInt64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: " \n"))
    }

    /// The value of `key` in a flat-keyed file ("key value" lines).
    static func keyed(_ bytes: [UInt8]?, _ key: String) -> UInt64? {
        guard let bytes else { return nil }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, parts[0] == key { return UInt64(parts[1]) }
        }
        return nil
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

    func closeForShutdown() { close() }

    deinit {
        Descriptors.close(eventFD)
        Descriptors.close(usageFD)
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
