import CLibUV
import COvertime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A bound Unix datagram socket on the loop (the sd_notify protocol's shape): each datagram
/// arrives with its sender's credentials (SO_PASSCRED) and the descriptors it carried,
/// which the handler then owns. Loop-thread only.
///
/// At most `perTurn` datagrams are read each time the loop finds the socket readable.
/// `admit` is asked about each sender before anything is copied, so a datagram it turns
/// away costs the read alone; and at most `perSecond` admitted datagrams a second are
/// handled, the rest of that second's read and dropped. The socket is always read, never
/// left unwatched for the rest of a second: the kernel queues only ten datagrams, and a
/// flooder that spins on it refills every place as soon as it is free, so a daemon's own
/// notifications would never get a place while the queue stood still.
public final class DatagramReceiver: LoopHandleOwner {
    public struct Datagram {
        public var bytes: [UInt8]
        /// Longer than `maximumLength`: `bytes` holds its start only.
        public var truncated: Bool
        public var sender: PeerCredentials?
        /// Descriptors that came with it; the handler must close them.
        public var descriptors: [Int32]
    }

    public typealias Handler = (Datagram) -> Void
    /// Whether a sender's datagram is to be handled at all (nil: the kernel named none).
    public typealias Admission = (PeerCredentials?) -> Bool

    /// systemd reads notifications into a buffer of this size too.
    public static let maximumLength = 4096
    static let perTurn = 64
    /// Far above what a daemon sends (a watchdog ping a second, a status line a step).
    public static let perSecond = 500

    public let path: String
    private let fd: Int32
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private var handler: Handler?
    private let admit: Admission
    private let loop: EventLoop
    /// When the current second of the budget began (the loop's clock, ms), and how many
    /// datagrams were handled in it.
    private var secondStart: UInt64 = 0
    private var handledThisSecond = 0
    private var buffer = [UInt8](repeating: 0, count: DatagramReceiver.maximumLength)
    private var closed = false

    /// Binds at `path` (`@name`: the abstract namespace).
    /// - Throws: `SystemError` naming the path.
    public init(loop: EventLoop, path: String, admit: @escaping Admission = { _ in true }, handler: @escaping Handler) throws(SystemError) {
        guard path.utf8.count <= UnixListener.maxPathLength else {
            throw SystemError("\(path): a Unix socket path may be at most \(UnixListener.maxPathLength) bytes", errno: ENAMETOOLONG)
        }
        self.path = path
        self.handler = handler
        self.admit = admit
        self.loop = loop
        let fd = try syscall("datagram socket for \(path)") { overtime_datagram_socket_with_credentials() }
        self.fd = fd
        do throws(SystemError) {
            var (address, length) = UnixListener.address(path)
            try syscall("bind \(path)") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
                }
            }
        } catch {
            Descriptors.close(fd)
            throw error
        }
        handle = .allocate(capacity: 1)
        uv_poll_init(loop.uvLoop, handle, fd)
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        uv_poll_start(handle, Int32(UV_READABLE.rawValue), Self.readable)
    }

    private static let readable: uv_poll_cb = { h, status, _ in
        guard status >= 0 else { return }
        Unmanaged<DatagramReceiver>.fromOpaque(h!.pointee.data).takeUnretainedValue().receiveSome()
    }

    private func receiveSome() {
        let now = uv_now(loop.uvLoop)
        if now &- secondStart >= 1000 {
            secondStart = now
            handledThisSecond = 0
        }
        var descriptors = [Int32](repeating: -1, count: 16)
        for _ in 0..<Self.perTurn where !closed {
            var sender = overtime_peer()
            var count: Int32 = 0
            let length = buffer.withUnsafeMutableBytes { raw in
                descriptors.withUnsafeMutableBufferPointer { fds in
                    overtime_receive_datagram(fd, raw.baseAddress!, UInt(raw.count), &sender, fds.baseAddress!, Int32(fds.count), &count)
                }
            }
            if length < 0 {
                if errno == EINTR { continue }
                return  // EAGAIN: none left (any other error: the next readiness says)
            }
            let peer = sender.pid > 0 ? PeerCredentials(pid: sender.pid, uid: sender.uid, gid: sender.gid) : nil
            guard admit(peer), handledThisSecond < Self.perSecond else {
                for index in 0..<Int(count) { Descriptors.close(descriptors[index]) }
                continue
            }
            handledThisSecond += 1
            let truncated = length > buffer.count
            let datagram = Datagram(bytes: Array(buffer[0..<min(Int(length), buffer.count)]), truncated: truncated,
                                    sender: peer,
                                    descriptors: Array(descriptors[0..<Int(count)]))
            if let handler {
                handler(datagram)
            } else {
                datagram.descriptors.forEach(Descriptors.close)
            }
        }
    }

    /// Stops receiving; the name goes with the socket.
    public func close() {
        guard !closed else { return }
        closed = true
        handler = nil
        if !UnixListener.isAbstract(path) { unlink(path) }
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }

    // The poll handle is closed by then (it holds the receiver until its close callback).
    deinit { Descriptors.close(fd) }
}
