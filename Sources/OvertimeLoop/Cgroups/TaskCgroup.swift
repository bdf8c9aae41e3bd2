internal import OvertimeCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
    ///   make and remove.
    init(tree: CgroupTree, name: String, memoryLimit: UInt64?, pooled: Bool, memoryBeforeExec: Bool = true) throws(SystemError) {
        let v2 = tree.v2Directory.map { $0 + "/" + name }
        var v1 = tree.v1MemoryDirectory.map { $0 + "/" + name }
        // Needed now (made before exec), the run's own v1 directory first; without it this
        // slot has no memory cgroup.
        if v1 != nil, memoryBeforeExec || v2 == nil, (try? tree.readyMemoryDirectory()) == nil { v1 = nil }
        let canJoinMemoryLate = v2 != nil && v1 != nil && !tree.v2Memory
        let memoryDirectory = tree.v2Memory ? v2 : v1
        var made: [String] = []
        var procs: [Int32] = []
        do throws(SystemError) {
            for directory in [v2, memoryBeforeExec || !canJoinMemoryLate ? v1 : nil].compactMap({ $0 }) {
                try CgroupFiles.makeDirectory(directory, "create the task's cgroup \(directory)")
                made.append(directory)
            }
            if let memoryLimit, let memoryDirectory { try Self.setMemoryLimit(memoryLimit, in: memoryDirectory, v2: tree.v2Memory) }
            for directory in made {
                // Read and write: the pool reads the v2 one to know the cgroup is empty.
                procs.append(try CgroupFiles.openFile(directory + "/cgroup.procs", O_RDWR))
            }
        } catch {
            procs.forEach(Descriptors.close)
            made.forEach { CgroupFiles.removeDirectory($0) }
            throw error
        }
        self.tree = tree
        runMemoryDirectory = tree.v1MemoryDirectory
        self.canJoinMemoryLate = canJoinMemoryLate
        memoryDirectoryMade = SharedFlag(v1 == nil || made.contains(v1!))
        v2Directory = v2
        memoryIsV2 = tree.v2Memory
        self.memoryDirectory = memoryDirectory
        usageFiles = CgroupUsageFiles(v2Directory: v2, memoryDirectory: memoryDirectory, memoryIsV2: memoryIsV2)
        self.pooled = pooled
        self.memoryLimit = memoryLimit
        procsDescriptors = procs
        // Without it the child writes cgroup.procs as before: not an error.
        if let v2 { v2DirectoryDescriptor = (try? CgroupFiles.openFile(v2, O_RDONLY | O_DIRECTORY)) ?? -1 }
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
            try Self.setMemoryLimit(limit, in: memoryDirectory, v2: memoryIsV2)
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

    /// Writes the memory hard limit (nil: none) into a memory cgroup.
    private static func setMemoryLimit(_ limit: UInt64?, in directory: String, v2: Bool) throws(SystemError) {
        let file = directory + (v2 ? "/memory.max" : "/memory.limit_in_bytes")
        let code = CgroupFiles.write(limit.map(String.init) ?? (v2 ? "max" : "-1"), to: file)
        guard code == 0 else { throw SystemError("set the task's memory limit in \(file)", errno: code) }
    }

    /// Makes the v1 memory directory of a slot made without it, and opens its
    /// `cgroup.procs` for the spawn (`procsDescriptors`: the v2 one first, then this).
    private func makeMemoryDirectory() throws(SystemError) {
        guard let memoryDirectory, !memoryIsV2, procsDescriptors.count < (v2Directory == nil ? 1 : 2) else { return }
        guard let tree else { throw SystemError("create the run's cgroup \(runMemoryDirectory ?? memoryDirectory)", errno: ENOENT) }
        try tree.readyMemoryDirectory()
        try CgroupFiles.makeDirectory(memoryDirectory, "create the task's cgroup \(memoryDirectory)")
        memoryDirectoryMade.set()
        procsDescriptors.append(try CgroupFiles.openFile(memoryDirectory + "/cgroup.procs", O_RDWR))
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
    ///   v1 cgroup after a quiet spell waits for an RCU grace period (milliseconds), which a
    ///   task with no memory limit need not wait for. A task with a `memory-max` always
    ///   joins first: its limit counts from the first byte.
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
            let procs: Int32
            do throws(SystemError) {
                if let runDirectory { try CgroupFiles.makeDirectory(runDirectory, "create the run's cgroup \(runDirectory)") }
                try CgroupFiles.makeDirectory(memoryDirectory, "create the task's cgroup \(memoryDirectory)")
                made.set()
                procs = try CgroupFiles.openFile(memoryDirectory + "/cgroup.procs", O_WRONLY)
            } catch {
                return lateJoin.finish(joined: false)
            }
            var moved = Set<Int32>()
            var entered = 0
            for _ in 0..<16 {
                let fresh = files.processIDs().filter { !moved.contains($0) }
                if fresh.isEmpty { break }
                for pid in fresh {
                    moved.insert(pid)
                    // ESRCH: it ended meanwhile. Every other failure is the same to us: the
                    // task is then not counted there, and says so (`memoryCountsTask`).
                    if CgroupFiles.write(String(pid), toDescriptor: procs) == 0 { entered += 1 }
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
        for pid in processIDs() where CgroupFiles.sendSignal(signal, to: pid) { sent += 1 }
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
            if let n = withUnsafeMutableBytes(of: &byte, { CgroupFiles.readFromStart(procs, into: $0) }) { return n == 0 }
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
            guard let n = CgroupFiles.readFromStart(fd, into: buffer), n > 0 else { return nil }
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
        memoryCountsTask ? KernelText.number(read(.peak)) : nil
    }

    /// How many processes the kernel's OOM killer killed in it for this task (v1
    /// `memory.oom_control`, v2 `memory.events`: `oom_kill`); nil without a memory cgroup
    /// or the counter.
    public func oomKills() -> Int? {
        guard memoryCountsTask, let count = readOOMCounter() else { return nil }
        return Int(clamping: count >= oomBaseline ? count - oomBaseline : 0)
    }

    private func readOOMCounter() -> UInt64? {
        KernelText.value("oom_kill", in: read(.oomCounter))
    }

    /// CPU time of everything that ran in it for this task (v2 `cpu.stat`), in microseconds.
    public func cpuMicroseconds() -> (user: UInt64, system: UInt64)? {
        usageFiles.since(usageFiles.cpuBaseline, readCPU())
    }

    private func readCPU() -> (user: UInt64, system: UInt64)? {
        KernelText.cpuMicroseconds(cpuStat: read(.cpuStat))
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
        guard let fd = try? CgroupFiles.openFile(path, flags) else { return nil }
        kept[file] = fd
        return fd
    }

    /// A cgroup file's text: through its kept descriptor when the slot is pooled, else
    /// opened and closed.
    private func read(_ file: KeptFile) -> [UInt8]? {
        if let fd = descriptor(file) { return CgroupFiles.readFromStart(fd) }
        return place(of: file).flatMap { Descriptors.readWholeFile($0.path) }
    }

    /// Writes `text` to one of the slot's files (`memory.max_usage_in_bytes`,
    /// `cgroup.kill`); 0, or the errno.
    private func write(_ file: KeptFile, _ text: String) -> Int32 {
        guard let fd = descriptor(file) else {
            guard let (path, _) = place(of: file) else { return ENOENT }
            return CgroupFiles.write(text, to: path)
        }
        return CgroupFiles.rewrite(text, atStartOf: fd)
    }

    /// Removes the task's cgroups; false while a process is still in one (it is dying:
    /// try again later). Its descriptors close first.
    public func remove() -> Bool {
        abandonMemoryJoin()
        closeDescriptors()
        var removed = true
        for directory in [v2Directory, memoryDirectory == v2Directory ? nil : memoryDirectory].compactMap({ $0 }) {
            let code = CgroupFiles.removeDirectory(directory)
            if code != 0, code != ENOENT { removed = false }
        }
        return removed
    }
}
