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
    /// argv; the first element is the command, looked up in the child's `PATH`.
    public var arguments: [String]
    /// The complete environment, as `NAME=value` strings.
    public var environment: [String]
    /// The working directory, or nil for the supervisor's.
    public var workingDirectory: String?
    /// The descriptors the child gets, by position: index 0 becomes its fd 0, and so on.
    /// Nothing else is open in the child at exec.
    public var descriptors: [Int32]

    public init(arguments: [String], environment: [String], workingDirectory: String?, descriptors: [Int32]) {
        self.arguments = arguments
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.descriptors = descriptors
    }
}

/// A child process in a session (and process group) of its own. Loop-thread only.
///
/// The group is signalled only while the leader is known to be alive or a zombie: once
/// libuv has reaped it, the pid may be reused, and `signalGroup` refuses.
public final class ChildProcess: LoopHandleOwner {
    private let handle: UnsafeMutablePointer<uv_process_t>
    private var onExit: ((ChildExit) -> Void)?
    public private(set) var pid: Int32 = 0
    /// True once libuv has reaped the child.
    public private(set) var isReaped = false
    private var closed = false

    /// Spawns the child. The request's descriptors are inherited at their positions; the
    /// child becomes a session leader (its pid is its process group id).
    /// - Throws: `SystemError` with exec's errno (ENOENT, EACCES, …) when it cannot run.
    public init(loop: EventLoop, request: SpawnRequest, onExit: @escaping (ChildExit) -> Void) throws(SystemError) {
        handle = .allocate(capacity: 1)
        self.onExit = onExit
        let argv = CStringArray(request.arguments)
        let envp = CStringArray(request.environment)
        let containers = UnsafeMutablePointer<uv_stdio_container_t>.allocate(capacity: request.descriptors.count)
        defer { containers.deallocate() }
        for (index, fd) in request.descriptors.enumerated() {
            containers[index].flags = UV_INHERIT_FD
            containers[index].data.fd = fd
        }
        // Descriptors we did not open (inherited, or opened by an embedding program without
        // O_CLOEXEC) must not reach the child.
        Descriptors.markInheritedCloseOnExec()
        let rc: Int32 = request.workingDirectory.withOptionalCString { cwd in
            var options = uv_process_options_t()
            options.exit_cb = { h, status, signal in
                let child = Unmanaged<ChildProcess>.fromOpaque(h!.pointee.data).takeUnretainedValue()
                child.didExit(status: status, signal: signal)
            }
            options.file = UnsafePointer(argv.pointers[0])
            options.args = argv.base
            options.env = envp.base
            options.cwd = cwd
            options.flags = UInt32(UV_PROCESS_DETACHED.rawValue)
            options.stdio_count = Int32(request.descriptors.count)
            options.stdio = containers
            return uv_spawn(loop.uvLoop, handle, &options)
        }
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        if rc < 0 {
            isReaped = true  // libuv has already reaped a child whose exec failed
            self.onExit = nil
            close()
            throw SystemError(request.arguments[0], errno: -rc)
        }
        pid = handle.pointee.pid
    }

    private func didExit(status: Int64, signal: Int32) {
        isReaped = true
        let exit: ChildExit = signal != 0 ? .signaled(signal) : .exited(Int32(truncatingIfNeeded: status))
        let callback = onExit
        onExit = nil
        close()
        callback?(exit)
    }

    /// Signals the child's whole process group while the leader is alive or a zombie.
    /// - Returns: false once the child has been reaped (nothing was sent).
    @discardableResult
    public func signalGroup(_ signal: Int32) -> Bool {
        guard !isReaped, pid > 0 else { return false }
        return kill(-pid, signal) == 0
    }

    /// Kills what is left of the group right after the leader was reaped, in the same loop
    /// turn: the group id stays held by any member still alive, so it cannot yet belong to
    /// anyone else. Once the group is empty this is a harmless ESRCH.
    public func killLeftoverGroup() {
        guard isReaped, pid > 0 else { return }
        _ = kill(-pid, SIGKILL)
    }

    private func close() {
        guard !closed else { return }
        closed = true
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let raw = h!
            if let data = raw.pointee.data {
                Unmanaged<ChildProcess>.fromOpaque(data).release()
            }
            UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_process_t.self).deallocate()
        }
    }

    func closeForShutdown() {
        // A child still running at loop shutdown is killed: nothing runs unsupervised.
        signalGroup(SIGKILL)
        onExit = nil
        close()
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

    var pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> { base }

    deinit {
        for i in 0..<count { free(base[i]) }
        base.deallocate()
    }
}

extension Optional where Wrapped == String {
    func withOptionalCString<R>(_ body: (UnsafePointer<CChar>?) -> R) -> R {
        switch self {
        case let s?: return s.withCString { body($0) }
        case nil: return body(nil)
        }
    }
}
