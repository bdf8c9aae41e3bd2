import CLibUV
import COvertime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a child ended, as `waitpid` reported it.
public enum ChildExit: Sendable, Equatable {
    case exited(Int32)
    case signaled(Int32)

    /// Decodes a status `waitpid` filled in (without WUNTRACED, so the child has ended:
    /// exited with a code, or killed by a signal), through <sys/wait.h>'s own macros.
    public init(waitStatus status: Int32) {
        self = overtime_status_exited(status) != 0
            ? .exited(overtime_status_exit_code(status))
            : .signaled(overtime_status_signal(status))
    }
}

/// What to spawn. Arguments go to exec as they are: never through a shell.
public struct SpawnRequest {
    /// argv. A first element without a slash is looked up on the child's own `PATH` (its
    /// environment's), or on `SpawnRequest.defaultSearchPath` when it has none.
    public var arguments: [String]
    /// The environment the child starts from (nil: an empty one).
    public var baseEnvironment: EnvironmentBlock?
    /// `NAME=value` strings set on top of `baseEnvironment`, replacing its entries of the
    /// same name.
    public var environment: [String]
    /// The working directory, or nil for the supervisor's.
    public var workingDirectory: String?
    /// The descriptors the child gets, by position: index 0 becomes its fd 0, and so on.
    /// Nothing else is open in the child at exec.
    public var descriptors: [Int32]
    /// Resource limits set in the child before exec.
    public var limits: [RLimit] = []
    /// The child's nice value (-20…19), or nil to inherit the supervisor's.
    public var niceness: Int32?
    /// Credentials to switch to before exec (needs root): supplementary groups cleared,
    /// then the group, then the user. A failed switch is a spawn error.
    public var userID: UInt32?
    public var groupID: UInt32?
    /// `cgroup.procs` files (open for writing, at most two) the child moves itself into
    /// before anything else (`TaskCgroup.procsDescriptors`).
    public var cgroupProcs: [Int32] = []
    /// The v2 cgroup's directory (open), whose `cgroup.procs` is `cgroupProcs[0]`: the
    /// child is created inside it where the kernel allows (`TaskCgroup.v2DirectoryDescriptor`).
    public var cgroupDirectory: Int32 = -1

    /// Where a command without a slash is looked up when the child's environment has no
    /// `PATH` (as `env -i` would leave it).
    public static let defaultSearchPath = "/usr/local/bin:/usr/bin:/bin"

    public init(arguments: [String], baseEnvironment: EnvironmentBlock?, environment: [String], workingDirectory: String?, descriptors: [Int32]) {
        self.arguments = arguments
        self.baseEnvironment = baseEnvironment
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.descriptors = descriptors
    }
}

/// A resource limit (`setrlimit`) for a child, as the kernel takes it: which resource (one
/// of the codes below), soft and hard. The task's own limit, with its names and parsing,
/// is the core's `ResourceLimit`.
public struct RLimit: Sendable, Equatable {
    /// RLIMIT_AS, RLIMIT_NOFILE, RLIMIT_CPU, RLIMIT_NPROC, as the C side names them.
    public static let addressSpace = Int32(OVERTIME_LIMIT_ADDRESS_SPACE.rawValue)
    public static let openFiles = Int32(OVERTIME_LIMIT_OPEN_FILES.rawValue)
    public static let cpuSeconds = Int32(OVERTIME_LIMIT_CPU_SECONDS.rawValue)
    public static let processes = Int32(OVERTIME_LIMIT_PROCESSES.rawValue)

    public var code: Int32
    public var soft: UInt64
    public var hard: UInt64

    public init(code: Int32, soft: UInt64, hard: UInt64) {
        self.code = code
        self.soft = soft
        self.hard = hard
    }
}

/// Why a spawn failed: the step of starting the child that did not succeed, and its errno.
public struct SpawnError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Step: Sendable, Equatable {
        case fork, session, descriptors, priority
        /// Entering the cgroup at this position of the request's `cgroupProcs`.
        case cgroup(index: Int)
        /// The limit at this position of the request's `limits`.
        case limit(index: Int)
        case supplementaryGroups, group, user, workingDirectory, parentDeath
        /// exec itself: the command was not found or could not be run.
        case exec
    }

    public var step: Step
    public var errno: Int32

    public init(_ step: Step, errno: Int32) {
        self.step = step
        self.errno = errno
    }

    public var description: String {
        "\(step): \(String(cString: strerror(errno)))"
    }
}

/// What the kernel counted for a reaped child (`wait4`): the child and the descendants it
/// waited for.
public struct ChildUsage: Sendable, Equatable {
    public var userMicroseconds: UInt64
    public var systemMicroseconds: UInt64
    /// The largest resident set among them, in bytes (what `/usr/bin/time -v` reports).
    public var maxResidentBytes: UInt64
}

/// A child process in a session (and process group) of its own. Loop-thread only.
///
/// Spawned by `overtime_spawn` (the COvertime module) rather than libuv's `uv_spawn`
/// or `posix_spawn`: libuv 1.44 forks, which halved spawn throughput (docs/benchmarks.md),
/// and neither has a place to run code in the child before exec, which the parent-death
/// signal, resource limits, nice value and privilege drop all need. It vforks, as glibc's
/// posix_spawn does, and in the child before exec: a new session (`setsid`), every signal
/// back to its default, the requested descriptors at 0…n−1 and every other descriptor
/// closed, limits, priority, credentials, working directory, the parent-death signal
/// (checked against a parent that died first), an empty signal mask. Exec errors are
/// reported synchronously, with the step that failed.
///
/// The child is reaped by the loop's `ChildReaper` with `waitpid(pid)`, never
/// `waitpid(-1)`, so libuv's own children (and anyone else's) are never stolen. The group
/// is signalled only while the leader is known to be alive or a zombie.
public final class ChildProcess {
    public let pid: Int32
    /// True once the child has been reaped.
    public private(set) var isReaped = false
    /// Set when it is reaped.
    public private(set) var usage: ChildUsage?
    private var onExit: ((ChildExit) -> Void)?

    /// Spawns the child and registers it for reaping.
    /// - Throws: `SpawnError` with the step that failed and its errno (ENOENT, EACCES, …).
    public init(loop: EventLoop, request: SpawnRequest, onExit: @escaping (ChildExit) -> Void) throws(SpawnError) {
        precondition(!request.arguments.isEmpty, "spawn needs a command")
        self.onExit = onExit
        // The guard exists before the child runs, and the child lists its own group with it
        // before exec (or, when the guard cannot take that now, the parent does it here).
        let groupGuard = loop.groupGuard
        groupGuard.start(loop: loop)
        let (pid, listed) = try Self.spawn(request, guardChannel: groupGuard.channelForChild) { failedPid in
            groupGuard.forget(failedPid)
        }
        self.pid = pid
        loop.reaper.watch(self)
        if !listed { groupGuard.watch(pid) }
    }

    /// - Returns: the pid, and whether the child listed itself with the guard.
    /// - Parameter unlist: called with the pid of a child that listed itself and then failed.
    private static func spawn(_ request: SpawnRequest, guardChannel: Int32,
                              unlist: (Int32) -> Void) throws(SpawnError) -> (pid: Int32, listed: Bool) {
        let argv = CStringArray(request.arguments)
        let extra = CStringArray(request.environment)
        var envp = request.baseEnvironment?.entries(overriddenBy: request.environment) ?? []
        envp.reserveCapacity(envp.count + request.environment.count + 1)
        for i in 0..<request.environment.count { envp.append(extra.base[i]) }
        envp.append(nil)
        let searchPath = Self.searchPath(in: envp)
        let command = argv.base[0]!
        // Room for the longest "directory/command" the child may try.
        let bufferSize = strlen(searchPath) + strlen(command) + 3
        let pathBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: bufferSize)
        defer { pathBuffer.deallocate() }
        let limits = request.limits.map { overtime_spawn_limit(resource: $0.code, soft: $0.soft, hard: $0.hard) }
        precondition(request.cgroupProcs.count <= 2, "a task enters at most two cgroups")
        let cgroups = (request.cgroupProcs.first ?? -1, request.cgroupProcs.count > 1 ? request.cgroupProcs[1] : -1)
        var failure = overtime_spawn_failure()

        let pid = envp.withUnsafeMutableBufferPointer { env in
            request.descriptors.withUnsafeBufferPointer { descriptors in
                limits.withUnsafeBufferPointer { limits in
                    withOptionalCString(request.workingDirectory) { directory in
                        var spawn = overtime_spawn_request(
                            file: UnsafePointer(command),
                            argv: UnsafePointer(argv.base),
                            envp: UnsafePointer(env.baseAddress!),  // never empty: it ends in nil
                            search_path: searchPath,
                            path_buffer: pathBuffer,
                            path_buffer_size: bufferSize,
                            working_directory: directory,
                            descriptors: descriptors.baseAddress,
                            descriptor_count: Int32(descriptors.count),
                            limits: limits.baseAddress,
                            limit_count: Int32(limits.count),
                            set_priority: request.niceness == nil ? 0 : 1,
                            priority: request.niceness ?? 0,
                            set_group: request.groupID == nil ? 0 : 1,
                            gid: request.groupID ?? 0,
                            set_user: request.userID == nil ? 0 : 1,
                            uid: request.userID ?? 0,
                            parent_death_signal: SIGKILL,
                            guard_channel: guardChannel,
                            cgroup_procs: cgroups,
                            cgroup_directory: request.cgroupDirectory
                        )
                        return overtime_spawn(&spawn, &failure)
                    }
                }
            }
        }
        guard pid < 0 else { return (pid, failure.listed != 0) }
        if failure.listed != 0 { unlist(failure.pid) }
        throw SpawnError(Self.step(failure), errno: failure.error)
    }

    // Never freed or written: a constant C string.
    nonisolated(unsafe) private static let defaultSearchPath = strdup(SpawnRequest.defaultSearchPath)!

    /// The child's PATH (the first `PATH=` entry, as getenv reads it), else the default;
    /// valid while `envp`'s strings are.
    private static func searchPath(in envp: [UnsafeMutablePointer<CChar>?]) -> UnsafePointer<CChar> {
        for case let entry? in envp where strncmp(entry, "PATH=", 5) == 0 { return UnsafePointer(entry + 5) }
        return UnsafePointer(defaultSearchPath)
    }

    private static func step(_ failure: overtime_spawn_failure) -> SpawnError.Step {
        switch overtime_spawn_step(rawValue: UInt32(failure.step)) {
        case OVERTIME_SPAWN_FORK: .fork
        case OVERTIME_SPAWN_CGROUP: .cgroup(index: Int(failure.detail))
        case OVERTIME_SPAWN_SESSION: .session
        case OVERTIME_SPAWN_DESCRIPTORS: .descriptors
        case OVERTIME_SPAWN_LIMIT: .limit(index: Int(failure.detail))
        case OVERTIME_SPAWN_PRIORITY: .priority
        case OVERTIME_SPAWN_GROUPS: .supplementaryGroups
        case OVERTIME_SPAWN_GROUP: .group
        case OVERTIME_SPAWN_USER: .user
        case OVERTIME_SPAWN_DIRECTORY: .workingDirectory
        case OVERTIME_SPAWN_PARENT_DEATH: .parentDeath
        default: .exec
        }
    }

    /// Called by the reaper once `waitpid` has collected the child.
    func reaped(_ exit: ChildExit, usage: ChildUsage) {
        isReaped = true
        self.usage = usage
        let callback = onExit
        onExit = nil
        callback?(exit)
    }

    /// Signals the child's whole process group while the leader is alive or a zombie.
    /// - Returns: false once the child has been reaped (nothing was sent).
    @discardableResult
    public func signalGroup(_ signal: Int32) -> Bool {
        guard !isReaped else { return false }
        return kill(-pid, signal) == 0
    }

    /// Kills what is left of the group right after the leader was reaped, in the same loop
    /// turn: the group id stays held by any member still alive, so it cannot yet belong to
    /// anyone else. Once the group is empty this is a harmless ESRCH.
    public func killLeftoverGroup() {
        guard isReaped else { return }
        _ = kill(-pid, SIGKILL)
    }

    /// At loop shutdown a child still running is killed: nothing runs unsupervised.
    func killForShutdown() {
        onExit = nil
        signalGroup(SIGKILL)
    }
}

/// Reaps the loop's children: on every SIGCHLD, `waitpid(pid, WNOHANG)` for each child it
/// watches, and nothing else. Loop-thread only.
final class ChildReaper: LoopHandleOwner {
    private let handle: UnsafeMutablePointer<uv_signal_t>
    let groupGuard = GroupGuard()
    private var children: [Int32: ChildProcess] = [:]
    private var closed = false
    /// Also reap exited children that are not ours: orphans reparented to a subreaper or
    /// to PID 1. Off unless asked: it would take the children of an embedding program.
    var reapsOrphans = false

    init(loop: UnsafeMutablePointer<uv_loop_t>) {
        handle = .allocate(capacity: 1)
        uv_signal_init(loop, handle)
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        uv_signal_start(handle, { h, _ in
            Unmanaged<ChildReaper>.fromOpaque(h!.pointee.data).takeUnretainedValue().reapExited()
        }, SIGCHLD)
        // Watching for children must not keep the loop alive by itself.
        uv_unref(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self))
    }

    /// Watches a child just spawned. Its SIGCHLD, even if it has exited already, reaches
    /// the callback in a later loop turn (libuv queues signals through a pipe), so the owner
    /// finishes setting up before it hears of the exit.
    func watch(_ child: ChildProcess) {
        children[child.pid] = child
    }

    private func reapExited() {
        guard reapsOrphans else {
            for pid in Array(children.keys) { reapOwn(pid) }
            _ = groupGuard.checkAlive(live: { Array(children.keys) })
            groupGuard.reapClosedIfExited()
            return
        }
        // Every exited child, ours and orphans alike: look at each without reaping it, and
        // reap ours through reapOwn (so their exits are never lost), the others directly.
        for _ in 0..<100_000 {
            let pid = overtime_peek_exited_child()
            guard pid > 0 else { return }
            if children[pid] != nil {
                reapOwn(pid)
            } else if pid == groupGuard.pid {
                if !groupGuard.checkAlive(live: { Array(children.keys) }) {
                    var status: Int32 = 0
                    _ = waitpid(pid, &status, WNOHANG)
                }
            } else if pid == groupGuard.exitingPID {
                groupGuard.reapClosedIfExited()
            } else {
                var status: Int32 = 0
                _ = waitpid(pid, &status, WNOHANG)
            }
        }
    }

    private func reapOwn(_ pid: Int32) {
        guard let child = children[pid] else { return }
        var status: Int32 = 0
        var counted = rusage()
        guard wait4(pid, &status, WNOHANG, &counted) == pid else { return }
        children[pid] = nil
        let exit = ChildExit(waitStatus: status)
        func microseconds(_ t: timeval) -> UInt64 { UInt64(max(0, t.tv_sec)) * 1_000_000 + UInt64(max(0, t.tv_usec)) }
        child.reaped(exit, usage: ChildUsage(userMicroseconds: microseconds(counted.ru_utime),
                                             systemMicroseconds: microseconds(counted.ru_stime),
                                             maxResidentBytes: UInt64(max(0, counted.ru_maxrss)) * 1024))
        // The owner has killed what was left of the group (killLeftoverGroup) by now.
        groupGuard.forget(pid)
    }

    /// Kills every process whose parent is this one and that is not a task being watched:
    /// orphans adopted as a subreaper, at shutdown, so nothing is left running.
    ///
    /// An orphan's own children are reparented to us only as it dies, and theirs after
    /// them (`setsid sh -c 'sleep 1000 & wait'`: the `sleep` lands here once its shell is
    /// killed). So it sweeps again until a sweep finds no one, each orphan's group with it
    /// (a daemon's children usually share its group and go in the same sweep). Bounded, so
    /// that a process forking as fast as it is killed cannot hold the shutdown: at most
    /// `orphanSweepNanoseconds`, then what is left is left.
    func killAdoptedOrphans() {
        let end = EventLoop.now() + Self.orphanSweepNanoseconds
        // Killed but not reaped within a second (stuck in the kernel, a hung network mount):
        // it dies when it returns; waiting for it again each sweep would only delay the exit.
        var givenUp: Set<Int32> = []
        while EventLoop.now() < end {
            let orphans = Self.childrenOfThisProcess().filter { children[$0] == nil && $0 != groupGuard.exitingPID && !givenUp.contains($0) }
            if orphans.isEmpty { return }
            for pid in orphans {
                // It is alive (or a zombie) and not reaped, so its group id is still its own.
                if getpgid(pid) == pid { kill(-pid, SIGKILL) }
                kill(pid, SIGKILL)
            }
            for pid in orphans where overtime_reap_within(pid, 1000) == 0 {
                givenUp.insert(pid)
            }
        }
    }

    /// The longest the shutdown sweeps for adopted orphans: 3 s.
    static let orphanSweepNanoseconds: Int64 = 3_000_000_000

    /// The children of this process: from each thread's /proc/self/task/TID/children (an
    /// orphan is adopted by one of the threads), else by scanning /proc for our pid as parent.
    static func childrenOfThisProcess() -> [Int32] {
        var found: [Int32] = []
        var listed = false
        for name in Descriptors.directoryEntries("/proc/self/task") ?? [] {
            guard Int32(name) != nil, let text = Descriptors.readWholeFile("/proc/self/task/\(name)/children") else { continue }
            listed = true
            found += String(decoding: text, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }
        }
        if listed { return found }
        let me = getpid()
        for name in Descriptors.directoryEntries("/proc") ?? [] {
            if let pid = Int32(name), pid != me, parent(of: pid) == me { found.append(pid) }
        }
        return found
    }

    /// The parent pid from /proc/PID/stat (the field after the parenthesised command).
    private static func parent(of pid: Int32) -> Int32? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0, let paren = buffer[0..<n].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(paren + 1)..<n].split(separator: UInt8(ascii: " "))
        guard fields.count > 1 else { return nil }
        return Int32(String(decoding: fields[1], as: UTF8.self))
    }

    override func closeForShutdown() {
        guard !closed else { return }
        closed = true
        for child in children.values { child.killForShutdown() }
        groupGuard.close()
        if reapsOrphans { killAdoptedOrphans() }
        closeOwnedHandle(handle)
    }
}

/// An environment as C strings, made once and shared by every spawn that starts from it
/// (copying a few dozen strings per spawn showed up in spawn throughput).
public final class EnvironmentBlock: @unchecked Sendable {
    // Immutable after init; the strings are only read, by the spawning child.
    private let strings: CStringArray
    private let count: Int

    /// - Parameter entries: `NAME=value` strings.
    public init(_ entries: [String]) {
        strings = CStringArray(entries)
        count = entries.count
    }

    /// - Parameter entries: `NAME=value` C strings (the process's own `environ`, say), copied.
    public init(copying entries: [UnsafePointer<CChar>]) {
        strings = CStringArray(copying: entries)
        count = entries.count
    }

    /// The entries, less those whose name one of `overrides` (`NAME=value`) sets.
    func entries(overriddenBy overrides: [String]) -> [UnsafeMutablePointer<CChar>?] {
        let names: [[CChar]] = overrides.compactMap { entry in
            guard let eq = entry.utf8.firstIndex(of: UInt8(ascii: "=")) else { return nil }
            return entry.utf8[...eq].map { CChar(bitPattern: $0) }  // "NAME=" without NUL
        }
        var result: [UnsafeMutablePointer<CChar>?] = []
        result.reserveCapacity(count)
        for i in 0..<count {
            let entry = strings.base[i]!
            let replaced = names.contains { name in name.withUnsafeBufferPointer { strncmp(entry, $0.baseAddress!, $0.count) == 0 } }
            if !replaced { result.append(entry) }
        }
        return result
    }
}

/// A NULL-terminated array of C strings, freed with the value.
final class CStringArray {
    let base: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    convenience init(_ strings: [String]) {
        self.init(count: strings.count) { strdup(strings[$0]) }
    }

    convenience init(copying strings: [UnsafePointer<CChar>]) {
        self.init(count: strings.count) { strdup(strings[$0]) }
    }

    private init(count: Int, copy: (Int) -> UnsafeMutablePointer<CChar>?) {
        self.count = count
        base = .allocate(capacity: count + 1)
        for i in 0..<count { base[i] = copy(i) }
        base[count] = nil
    }

    deinit {
        for i in 0..<count { free(base[i]) }
        base.deallocate()
    }
}

/// Calls `body` with a C string of `text`, or with nil.
private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}
