import CLibUV
import COvertime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Who is on the other end of a Unix socket, as the kernel says (SO_PEERCRED).
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
}

/// A listening Unix stream socket on the loop; each connection arrives as a `ByteStream`
/// with its peer's credentials. Loop-thread only.
///
/// The socket is made non-blocking and close-on-exec, bound, given mode 0600 and watched
/// with a `uv_poll_t`; connections are taken with `accept4` until none is left.
/// (`uv_listen` would do the accepting itself, one connection per callback, on a
/// descriptor libuv owns; with our own socket the flags and the path stay in our hands.)
public final class UnixListener: LoopHandleOwner {
    public typealias ConnectionHandler = (ByteStream, PeerCredentials?) -> Void

    /// The longest path a Unix socket address holds (sun_path, less its NUL).
    public static let maxPathLength = 107

    public let path: String
    private let fd: Int32
    private let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private var onConnection: ConnectionHandler?
    private var closed = false

    /// Binds and listens at `path`, which must not exist (see `probe`). A path that starts
    /// with `@` names a socket in the abstract namespace (no file: nothing to remove, and
    /// the kernel frees the name with the socket).
    /// - Throws: `SystemError` naming the path.
    public init(loop: EventLoop, path: String, onConnection: @escaping ConnectionHandler) throws(SystemError) {
        guard path.utf8.count <= Self.maxPathLength else {
            throw SystemError("\(path): a Unix socket path may be at most \(Self.maxPathLength) bytes; this one is \(path.utf8.count)", errno: ENAMETOOLONG)
        }
        self.path = path
        self.loop = loop
        self.onConnection = onConnection
        let fd = try syscall("socket for \(path)") {
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        }
        self.fd = fd
        // Set once bind made the file: only then is it ours to remove on failure. A bind that
        // fails on a path that exists (EADDRINUSE: another supervisor got there first) must
        // leave that one's socket alone.
        var bound = false
        do throws(SystemError) {
            var (address, length) = Self.address(path)
            try syscall("bind \(path)") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
                }
            }
            bound = true
            if !Self.isAbstract(path) { try syscall("chmod \(path)") { chmod(path, 0o600) } }
            try syscall("listen \(path)") { listen(fd, 64) }
        } catch {
            Descriptors.close(fd)
            if bound, !Self.isAbstract(path) { unlink(path) }
            throw error
        }
        handle = .allocate(capacity: 1)
        uv_poll_init(loop.uvLoop, handle, fd)
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        uv_poll_start(handle, Int32(UV_READABLE.rawValue), Self.readable)
    }

    /// What is at `path` now: nothing, a live listener, or a stale socket left by a
    /// supervisor that died (nobody accepts on it).
    public enum Probe: Equatable {
        case free, live, stale, notASocket
    }

    public static func probe(_ path: String) -> Probe {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .free }
        guard info.st_mode & S_IFMT == S_IFSOCK else { return .notASocket }
        do {
            Descriptors.close(try clientSocket(connectedTo: path, within: .seconds(1)))
            return .live
        } catch {
            // Only a refusal proves nobody listens; anything else may be a busy listener.
            return error.errno == ECONNREFUSED ? .stale : .live
        }
    }

    /// Connects a blocking client socket (close-on-exec) to the listener at `path`.
    /// - Parameter limit: how long the connect (and each later send) may wait. A listener
    ///   that stopped accepting (SIGSTOP, a debugger) with its backlog full makes a connect
    ///   wait for it; past the limit that is EAGAIN: busy, not gone.
    /// - Throws: `SystemError` when the path is too long or nobody listens there.
    public static func clientSocket(connectedTo path: String, within limit: Duration = .seconds(5)) throws(SystemError) -> Int32 {
        guard path.utf8.count <= maxPathLength else {
            throw SystemError("the path is too long for a Unix socket", errno: ENAMETOOLONG)
        }
        let fd = try syscall("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        setTimeout(fd, SO_SNDTIMEO, limit)
        var (address, length) = address(path)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard rc == 0 else {
            let code = errno
            Descriptors.close(fd)
            throw SystemError("connect \(path)", errno: code)
        }
        return fd
    }

    /// Sets a socket's `SO_SNDTIMEO` or `SO_RCVTIMEO`: how long a blocking call may wait.
    public static func setTimeout(_ fd: Int32, _ option: Int32, _ limit: Duration) {
        var wait = timeval(tv_sec: Int(limit.components.seconds), tv_usec: Int(limit.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, option, &wait, socklen_t(MemoryLayout<timeval>.size))
    }

    /// A path of the abstract namespace: `@name`.
    public static func isAbstract(_ path: String) -> Bool { path.utf8.first == UInt8(ascii: "@") }

    /// A Unix socket address for `path` and its length (cut at `maxPathLength`; callers
    /// check the length). An abstract name is a NUL and then its bytes, and its length is
    /// exact: the kernel tells `@a` from `@a` followed by NULs.
    static func address(_ path: String) -> (sockaddr_un, socklen_t) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let abstract = isAbstract(path)
        var bytes = Array(path.utf8.prefix(maxPathLength))
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            if !abstract { raw[bytes.count] = 0 }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)!
        let length = abstract ? pathOffset + bytes.count : MemoryLayout<sockaddr_un>.size
        return (address, socklen_t(length))
    }

    private func acceptAll() {
        while !closed {
            let client: Int32
            do throws(SystemError) {
                client = try Syscall.retrying("accept") { overtime_accept_cloexec_nonblock(fd) }
            } catch {
                switch error.errno {
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors or memory: the socket stays readable, so polling on
                    // would spin. Rest a moment, then listen again.
                    pause()
                default:
                    break  // EAGAIN: none left
                }
                return
            }
            var peer = overtime_peer()
            let credentials: PeerCredentials? = overtime_peer_credentials(client, &peer) == 0
                ? PeerCredentials(pid: peer.pid, uid: peer.uid, gid: peer.gid) : nil
            guard let stream = try? ByteStream(loop: loop, fd: client) else { continue }
            onConnection?(stream, credentials)
        }
    }

    private var resumeTimer: LoopTimer?

    private static let readable: uv_poll_cb = { h, status, _ in
        guard status >= 0 else { return }
        Unmanaged<UnixListener>.fromOpaque(h!.pointee.data).takeUnretainedValue().acceptAll()
    }

    private func pause() {
        uv_poll_stop(handle)
        let timer = resumeTimer ?? LoopTimer(loop: loop)
        resumeTimer = timer
        timer.schedule(inNanoseconds: 100_000_000) { [weak self] in
            guard let self, !self.closed else { return }
            uv_poll_start(self.handle, Int32(UV_READABLE.rawValue), Self.readable)
        }
    }

    /// Stops listening and removes the socket file.
    public func close() {
        guard !closed else { return }
        closed = true
        onConnection = nil
        resumeTimer?.close()
        resumeTimer = nil
        if !Self.isAbstract(path) { unlink(path) }
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }

    // The poll handle is closed by then (it holds the listener until its close callback).
    deinit { Descriptors.close(fd) }
}
