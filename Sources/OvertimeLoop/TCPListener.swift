import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A listening TCP socket on the loop (libuv's own `uv_tcp_t`: it accepts with
/// close-on-exec and non-blocking set, and rides out running out of descriptors with its
/// reserve descriptor). Each connection arrives as a `TCPConnection`. Loop-thread only.
public final class TCPListener: LoopHandleOwner {
    public typealias ConnectionHandler = (TCPConnection) -> Void

    /// The address and port bound: the port the kernel chose when asked for port 0.
    public private(set) var host = ""
    public private(set) var port = 0
    private let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private var onConnection: ConnectionHandler?
    private var closed = false

    /// Binds `host` (a numeric IPv4 or IPv6 address; `::` takes IPv4 too where the system
    /// allows) and `port` (0: any free one), and listens.
    /// - Throws: `SystemError` naming the address: not an address (EINVAL), in use
    ///   (EADDRINUSE), not allowed (EACCES).
    public init(loop: EventLoop, host: String, port: Int, onConnection: @escaping ConnectionHandler) throws(SystemError) {
        self.loop = loop
        self.onConnection = onConnection
        let shown = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var address = sockaddr_storage()
        let parsed = withUnsafeMutableBytes(of: &address) { raw -> Bool in
            let storage = raw.baseAddress!
            // A port out of range is refused below; it must not trap here first.
            let portNumber = Int32(clamping: port)
            if uv_ip4_addr(host, portNumber, storage.assumingMemoryBound(to: sockaddr_in.self)) == 0 { return true }
            return uv_ip6_addr(host, portNumber, storage.assumingMemoryBound(to: sockaddr_in6.self)) == 0
        }
        handle = .allocate(capacity: 1)
        uv_tcp_init(loop.uvLoop, handle)
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        guard parsed, (0...65535).contains(port) else {
            close()
            throw SystemError("\(shown): not an IP address and port", errno: EINVAL)
        }
        do throws(SystemError) {
            _ = try withUnsafePointer(to: &address) { pointer throws(SystemError) in
                try uvCheck("bind \(shown)", pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_bind(handle, $0, 0) })
            }
            // libuv reports an address in use here rather than at bind.
            try uvCheck("listen on \(shown)", uv_listen(stream, 128) { server, status in
                guard status >= 0, let server else { return }
                Unmanaged<TCPListener>.fromOpaque(server.pointee.data).takeUnretainedValue().acceptOne()
            })
        } catch {
            close()
            throw error
        }
        (self.host, self.port) = boundAddress() ?? (host, port)
    }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    private func boundAddress() -> (String, Int)? {
        var address = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutableBytes(of: &address) { raw -> (String, Int)? in
            let storage = raw.baseAddress!
            guard uv_tcp_getsockname(handle, storage.assumingMemoryBound(to: sockaddr.self), &length) == 0 else { return nil }
            var name = [CChar](repeating: 0, count: 64)
            let port: UInt16
            if storage.assumingMemoryBound(to: sockaddr.self).pointee.sa_family == sa_family_t(AF_INET6) {
                let v6 = storage.assumingMemoryBound(to: sockaddr_in6.self)
                uv_ip6_name(v6, &name, name.count)
                port = v6.pointee.sin6_port
            } else {
                let v4 = storage.assumingMemoryBound(to: sockaddr_in.self)
                uv_ip4_name(v4, &name, name.count)
                port = v4.pointee.sin_port
            }
            let text = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return (text, Int(UInt16(bigEndian: port)))
        }
    }

    private func acceptOne() {
        guard !closed else { return }
        let connection = TCPConnection(loop: loop)
        guard uv_accept(stream, connection.stream) == 0 else {
            connection.close()
            return
        }
        onConnection?(connection)
    }

    /// Stops listening. Idempotent.
    public func close() {
        guard !closed else { return }
        closed = true
        onConnection = nil
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }
}

/// One accepted TCP connection. Loop-thread only.
///
/// Writes go through libuv's queue: what the peer does not take at once waits there, never
/// blocking the loop. The owner bounds it, by how many connections it keeps and how long it
/// gives each, and drops a peer that does not read.
/// libuv writes with writev(2): a peer that reset the connection raises SIGPIPE, which the
/// program must ignore (the `overtime` CLI does, for all of its output).
public final class TCPConnection: LoopHandleOwner {
    /// Bytes read, valid only during the call.
    public typealias DataHandler = (UnsafeRawBufferPointer) -> Void

    static let readBufferSize = 16 * 1024

    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private let buffer: UnsafeMutableRawPointer
    private var onData: DataHandler?
    private var onEnd: (() -> Void)?
    public private(set) var isClosed = false

    init(loop: EventLoop) {
        handle = .allocate(capacity: 1)
        buffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        uv_tcp_init(loop.uvLoop, handle)
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    /// The peer's address: 4 bytes for IPv4, 16 for IPv6; empty when the kernel no longer
    /// has it (the peer is gone).
    public func peerAddress() -> [UInt8] {
        guard !isClosed else { return [] }
        var address = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutableBytes(of: &address) { raw -> [UInt8] in
            let storage = raw.baseAddress!
            guard uv_tcp_getpeername(handle, storage.assumingMemoryBound(to: sockaddr.self), &length) == 0 else { return [] }
            switch Int32(storage.assumingMemoryBound(to: sockaddr.self).pointee.sa_family) {
            case AF_INET: return withUnsafeBytes(of: storage.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_addr) { Array($0) }
            case AF_INET6: return withUnsafeBytes(of: storage.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_addr) { Array($0) }
            default: return []
            }
        }
    }

    /// Caps the kernel's send buffer for this connection (Linux doubles the figure for its
    /// bookkeeping). A stream whose owner bounds what waits for a slow peer sets it, so that
    /// the bound counts the peer's real lag and not megabytes the kernel would hold first.
    public func limitSendBuffer(_ bytes: Int) {
        guard !isClosed else { return }
        var value = Int32(clamping: bytes)
        _ = uv_send_buffer_size(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self), &value)
    }

    /// Stops reading: what the peer sends from now on stays in the kernel (and is discarded
    /// with the connection).
    public func stopReading() {
        guard !isClosed else { return }
        uv_read_stop(stream)
        onData = nil
        onEnd = nil
    }

    /// Starts reading; `onEnd` is called once, at the peer's end or a read error.
    public func startReading(onData: @escaping DataHandler, onEnd: @escaping () -> Void) {
        guard !isClosed else { return }
        self.onData = onData
        self.onEnd = onEnd
        uv_read_start(stream, { h, _, buf in
            let connection = Unmanaged<TCPConnection>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            buf!.pointee = uv_buf_init(connection.buffer.assumingMemoryBound(to: CChar.self), UInt32(TCPConnection.readBufferSize))
        }, { h, nread, _ in
            let connection = Unmanaged<TCPConnection>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            if nread > 0 {
                connection.onData?(UnsafeRawBufferPointer(start: connection.buffer, count: nread))
            } else if nread < 0 {
                uv_read_stop(h)
                let end = connection.onEnd
                connection.onData = nil
                connection.onEnd = nil
                end?()
            }
        })
    }

    /// Sends `bytes`, then ends the sending side once they are all taken (the peer reads
    /// the end of the stream), and tells `whenSent` (also when the connection closed
    /// first); reading goes on until the peer closes or `close()`.
    public func sendAndFinish(_ bytes: [UInt8], whenSent: @escaping () -> Void) {
        guard send(bytes) else { return }
        let shutdown = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        shutdown.pointee.data = Unmanaged.passRetained(Callback(whenSent)).toOpaque()
        let started = uv_shutdown(shutdown, stream) { request, _ in
            // Called once the writes are done, or cancelled by close: the request is freed here.
            Unmanaged<Callback>.fromOpaque(request!.pointee.data).takeRetainedValue().body()
            request!.deallocate()
        }
        if started != 0 {
            Unmanaged<Callback>.fromOpaque(shutdown.pointee.data).takeRetainedValue().body()
            shutdown.deallocate()
        }
    }

    /// Bytes written and not yet taken by the kernel: what a peer that does not read holds
    /// in libuv's queue. The owner bounds it (a stream of events drops such a peer).
    public var queuedBytes: Int {
        isClosed ? 0 : uv_stream_get_write_queue_size(stream)
    }

    /// Queues `bytes`, keeping the connection open (a stream of events); false when the
    /// connection is closed, or closed now because the write could not be queued.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        let copy = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
        bytes.withUnsafeBytes { if let source = $0.baseAddress { copy.copyMemory(from: source, byteCount: bytes.count) } }
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = copy
        var buf = uv_buf_init(copy.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        // The callback runs for every write, also one cancelled by close: the only place
        // its memory is freed.
        let rc = uv_write(request, stream, &buf, 1) { request, _ in
            request!.pointee.data!.deallocate()
            request!.deallocate()
        }
        guard rc == 0 else {
            copy.deallocate()
            request.deallocate()
            close()
            return false
        }
        return true
    }

    private final class Callback {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Closes the connection, dropping what the peer has not taken. Idempotent.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        onData = nil
        onEnd = nil
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }

    // Freed once libuv has let go of the handle (its close callback released this object).
    deinit { buffer.deallocate() }
}
