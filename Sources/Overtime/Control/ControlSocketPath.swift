import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where control sockets live, and getting a path ready to listen on.
public enum ControlSocketPath {
    /// The per-user directory: `$XDG_RUNTIME_DIR/overtime`, else `/tmp/overtime-<uid>`.
    public static func defaultDirectory() -> String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty,
           access(runtime, W_OK | X_OK) == 0 {
            return runtime + "/overtime"
        }
        return "/tmp/overtime-\(geteuid())"
    }

    /// The socket of run `runID` in the default directory.
    public static func defaultPath(runID: String) -> String {
        defaultDirectory() + "/" + runID + ".sock"
    }

    /// Makes the default directory (mode 0700) if needed and checks that it is this user's
    /// and closed to others, so no one else can reach a socket inside it.
    /// - Throws: `ControlSocketError` saying what is wrong with it.
    public static func prepareDirectory(_ directory: String) throws(ControlSocketError) {
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw .cannotCreateDirectory(path: directory, SystemError("mkdir", errno: errno))
        }
        var info = stat()
        guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw .notADirectory(path: directory)
        }
        guard info.st_uid == geteuid() else {
            throw .directoryNotYours(path: directory, owner: info.st_uid, you: geteuid())
        }
        if info.st_mode & 0o077 != 0, chmod(directory, 0o700) != 0 {
            throw .directoryOpenToOthers(path: directory)
        }
    }

    /// Gets `path` ready for a new listener: free, or a stale socket from a supervisor that
    /// died (removed). A live one, or a file that is not a socket, is an error.
    public static func claim(_ path: String) throws(ControlSocketError) {
        guard path.utf8.count <= UnixListener.maxPathLength else {
            throw .pathTooLong(path: path, limit: UnixListener.maxPathLength)
        }
        switch UnixListener.probe(path) {
        case .free:
            return
        case .stale:
            unlink(path)
        case .live:
            throw .inUse(path: path)
        case .notASocket:
            throw .notASocket(path: path)
        }
    }

    /// The sockets in `directory` with a supervisor listening, oldest run first. Sockets
    /// left by supervisors that died (nobody listens) are removed as they are found.
    public static func live(in directory: String = defaultDirectory()) -> [String] {
        scan(directory).live
    }

    /// The live sockets in `directory`, oldest run first, and the stale ones it removed:
    /// a socket nobody listens on, made more than a few seconds ago (a supervisor binds
    /// and listens at once; the age keeps one caught in between from losing its socket).
    public static func scan(_ directory: String = defaultDirectory()) -> (live: [String], removed: [String]) {
        var live: [String] = []
        var removed: [String] = []
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        for name in Descriptors.directoryEntries(directory) ?? [] {
            guard name.hasSuffix(".sock") else { continue }
            let path = directory + "/" + name
            switch UnixListener.probe(path) {
            case .live:
                live.append(path)
            case .stale:
                var info = stat()
                if lstat(path, &info) == 0, now.tv_sec - info.st_mtim.tv_sec > staleAfterSeconds, unlink(path) == 0 {
                    removed.append(path)
                }
            case .free, .notASocket:
                break
            }
        }
        return (live.sorted(), removed.sorted())
    }

    /// How old a socket nobody listens on must be to count as left behind.
    static let staleAfterSeconds = 2

    /// `--socket`'s value: a path, or the run id of a supervisor in the default directory
    /// (`ctl list` shows run ids).
    public static func resolve(_ given: String) -> String {
        guard !given.contains("/") else { return given }
        let byRun = defaultPath(runID: given.hasSuffix(".sock") ? String(given.dropLast(5)) : given)
        return UnixListener.probe(byRun) == .free ? given : byRun
    }
}

/// A control socket could not be set up.
public enum ControlSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The per-user directory could not be made.
    case cannotCreateDirectory(path: String, SystemError)
    /// Something other than a directory is where the per-user directory goes.
    case notADirectory(path: String)
    /// The per-user directory is another user's.
    case directoryNotYours(path: String, owner: UInt32, you: UInt32)
    /// Other users may enter the per-user directory, and it cannot be made 0700.
    case directoryOpenToOthers(path: String)
    /// The socket's path is longer than a Unix socket address holds (`limit` bytes).
    case pathTooLong(path: String, limit: Int)
    /// Another supervisor listens on the path.
    case inUse(path: String)
    /// Something other than a socket is at the path.
    case notASocket(path: String)
    /// The listener could not be made at the path.
    case cannotListen(path: String, SystemError)
    /// The control protocol cannot be served on stdin and stdout.
    case cannotServeStandardStreams(SystemError)
    /// The supervisor shut down before its control socket was set up.
    case supervisorShutDown

    public var message: String {
        switch self {
        case let .cannotCreateDirectory(path, error): "cannot create \(path): \(error.reason)"
        case let .notADirectory(path): "\(path) is not a directory"
        case let .directoryNotYours(path, owner, you): "\(path) belongs to uid \(owner), not to you (uid \(you)); pass --control PATH"
        case let .directoryOpenToOthers(path): "\(path) is open to other users and cannot be made 0700"
        case let .pathTooLong(path, limit):
            "control socket path is \(path.utf8.count) bytes; a Unix socket path must be at most \(limit): \(path)"
        case let .inUse(path): "another supervisor is listening on \(path)"
        case let .notASocket(path): "\(path) exists and is not a socket"
        case let .cannotListen(path, error): "cannot listen on \(path): \(error)"
        case let .cannotServeStandardStreams(error): "cannot serve control requests on stdin and stdout: \(error)"
        case .supervisorShutDown: "the supervisor has shut down"
        }
    }

    public var description: String { message }
}
