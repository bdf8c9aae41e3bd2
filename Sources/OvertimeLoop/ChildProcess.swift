import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How a child ended, as `waitpid` reported it.
public enum ChildExit: Sendable, Equatable {
    case exited(Int32)
    case signaled(Int32)
}

/// What to spawn. Arguments go to `execvp` as they are: never through a shell.
public struct SpawnRequest {
    /// argv; the first element is the command, looked up in the supervisor's `PATH`.
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

    public init(arguments: [String], baseEnvironment: EnvironmentBlock?, environment: [String], workingDirectory: String?, descriptors: [Int32]) {
        self.arguments = arguments
        self.baseEnvironment = baseEnvironment
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.descriptors = descriptors
    }
}

/// A child process in a session (and process group) of its own. Loop-thread only.
///
/// Spawned with `posix_spawn` rather than libuv's `uv_spawn`: libuv 1.44 forks, and
/// forking a multi-threaded supervisor copies its page tables only for exec to throw them
/// away, which halved spawn throughput (docs/benchmarks.md). glibc's `posix_spawn` runs
/// the child on the parent's memory until exec (vfork semantics) and reports exec errors
/// synchronously. In the child, before exec: a new session (`setsid`), every signal back
/// to its default, an empty signal mask, the requested descriptors at 0…n−1 and every
/// other descriptor closed.
///
/// The child is reaped by the loop's `ChildReaper` with `waitpid(pid)`, never
/// `waitpid(-1)`, so libuv's own children (and anyone else's) are never stolen. The group
/// is signalled only while the leader is known to be alive or a zombie.
public final class ChildProcess {
    public let pid: Int32
    /// True once the child has been reaped.
    public private(set) var isReaped = false
    private var onExit: ((ChildExit) -> Void)?

    /// Spawns the child and registers it for reaping.
    /// - Throws: `SystemError` with exec's errno (ENOENT, EACCES, …) when it cannot run.
    public init(loop: EventLoop, request: SpawnRequest, onExit: @escaping (ChildExit) -> Void) throws(SystemError) {
        precondition(!request.arguments.isEmpty, "spawn needs a command")
        self.onExit = onExit
        pid = try Self.spawn(request)
        loop.reaper.watch(self)
    }

    private static func spawn(_ request: SpawnRequest) throws(SystemError) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        // Descriptors to their places. A source below the number of slots could be
        // overwritten by an earlier slot's dup2, so each such one is first copied above
        // every slot and every source.
        let slots = Int32(request.descriptors.count)
        var spare = max(slots, (request.descriptors.max() ?? 0) + 1)
        var sources: [Int32] = []
        for fd in request.descriptors {
            if fd < slots {
                posix_spawn_file_actions_adddup2(&actions, fd, spare)
                sources.append(spare)
                spare += 1
            } else {
                sources.append(fd)
            }
        }
        for (slot, source) in sources.enumerated() {
            // The copy dup2 makes is not close-on-exec; everything else goes with closefrom.
            posix_spawn_file_actions_adddup2(&actions, source, Int32(slot))
        }
        posix_spawn_file_actions_addclosefrom_np(&actions, slots)
        if let cwd = request.workingDirectory {
            posix_spawn_file_actions_addchdir_np(&actions, cwd)
        }
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        // glibc's sigfillset leaves out its two internal signals (32 and 33), and its
        // posix_spawn then sets them to SIG_IGN in the child, where they would stay ignored
        // after exec. Set their bits by hand so they too start at their default.
        withUnsafeMutableBytes(of: &defaults) { bits in
            for signal in [32, 33] { bits[(signal - 1) / 8] |= UInt8(1 << ((signal - 1) % 8)) }
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | OVERTIME_POSIX_SPAWN_SETSID))

        let argv = CStringArray(request.arguments)
        let extra = CStringArray(request.environment)
        var envp = request.baseEnvironment?.entries(overriddenBy: request.environment) ?? []
        envp.reserveCapacity(envp.count + request.environment.count + 1)
        for i in 0..<request.environment.count { envp.append(extra.base[i]) }
        envp.append(nil)
        var pid: pid_t = 0
        let rc = envp.withUnsafeMutableBufferPointer { env in
            posix_spawnp(&pid, argv.base[0]!, &actions, &attributes, argv.base, env.baseAddress)
        }
        if rc != 0 {
            throw SystemError(request.arguments[0], errno: rc)
        }
        return pid
    }

    /// Called by the reaper once `waitpid` has collected the child.
    func reaped(_ exit: ChildExit) {
        isReaped = true
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
    private var children: [Int32: ChildProcess] = [:]
    private var closed = false
    /// Also reap exited children that are not ours: orphans reparented to a subreaper or
    /// to PID 1. Off unless asked: it would take the children of an embedding program.
    var reapsOrphans = false

    init(loop: UnsafeMutablePointer<uv_loop_t>) {
        handle = .allocate(capacity: 1)
        uv_signal_init(loop, handle)
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
        for pid in children.keys { reapOwn(pid) }
        guard reapsOrphans else { return }
        // Orphans: look at each exited child without reaping it, and reap it only when it is
        // not one of ours (ours go through reapOwn, so their exits are never lost).
        for _ in 0..<100_000 {
            let pid = overtime_peek_exited_child()
            guard pid > 0 else { return }
            if children[pid] != nil {
                reapOwn(pid)
            } else {
                var status: Int32 = 0
                _ = waitpid(pid, &status, WNOHANG)
            }
        }
    }

    private func reapOwn(_ pid: Int32) {
        guard let child = children[pid] else { return }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return }
        children[pid] = nil
        let exit: ChildExit = (status & 0x7F) == 0 ? .exited((status >> 8) & 0xFF) : .signaled(status & 0x7F)
        child.reaped(exit)
    }

    /// Kills every process whose parent is this one and that is not a task being watched:
    /// orphans adopted as a subreaper, at shutdown, so nothing is left running.
    func killAdoptedOrphans() {
        for pid in Self.childrenOfThisProcess() where children[pid] == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)  // SIGKILL is prompt; reap it rather than leave a zombie
        }
    }

    /// The children of this process: from each thread's /proc/self/task/TID/children (an
    /// orphan is adopted by one of the threads), else by scanning /proc for our pid as parent.
    static func childrenOfThisProcess() -> [Int32] {
        var found: [Int32] = []
        var listed = false
        if let tasks = opendir("/proc/self/task") {
            defer { closedir(tasks) }
            while let entry = readdir(tasks) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
                guard Int32(name) != nil, let text = readSmallFile("/proc/self/task/\(name)/children") else { continue }
                listed = true
                found += text.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }
            }
        }
        if listed { return found }
        let me = getpid()
        guard let dir = opendir("/proc") else { return [] }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if let pid = Int32(name), pid != me, parent(of: pid) == me { found.append(pid) }
        }
        return found
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            text += buffer[0..<n]
        }
        return String(decoding: text, as: UTF8.self)
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

    func closeForShutdown() {
        guard !closed else { return }
        closed = true
        for child in children.values { child.killForShutdown() }
        if reapsOrphans { killAdoptedOrphans() }
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let raw = h!
            Unmanaged<ChildReaper>.fromOpaque(raw.pointee.data).release()
            UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_signal_t.self).deallocate()
        }
    }
}

/// An environment as C strings, made once and shared by every spawn that starts from it
/// (copying a few dozen strings per spawn showed up in spawn throughput).
public final class EnvironmentBlock: @unchecked Sendable {
    // Immutable after init; the strings are only read, by posix_spawn.
    private let strings: CStringArray
    private let count: Int

    /// - Parameter entries: `NAME=value` strings.
    public init(_ entries: [String]) {
        strings = CStringArray(entries)
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

    init(_ strings: [String]) {
        count = strings.count
        base = .allocate(capacity: count + 1)
        for (i, s) in strings.enumerated() { base[i] = strdup(s) }
        base[count] = nil
    }

    deinit {
        for i in 0..<count { free(base[i]) }
        base.deallocate()
    }
}
