import CLibUV

/// Reads a pipe or socket on the loop, and (for a task's channel) writes to it.
/// Loop-thread only.
///
/// Reads land in one reusable 64 KiB buffer and are handed out in place. Writes never block
/// and never raise SIGPIPE: they go straight to the socket with `send`, and whatever does
/// not fit waits in a bounded queue, retried every few milliseconds until the peer takes it.
/// A peer that never reads (most tasks ignore fd 3) cannot make the supervisor buffer
/// without bound: beyond the bound, new messages are dropped whole. (A single message larger
/// than the bound, such as the status of a thousand-task batch, is taken when the queue is
/// empty.)
///
/// Reading is fair: after a read that fills the whole buffer (the writer has more), the
/// stream waits for the next loop turn, so one task flooding its channel or output cannot
/// hold the loop for libuv's 32 reads (2 MiB) while other tasks' deadlines and the control
/// socket wait.
public final class ByteStream: LoopHandleOwner {
    /// Bytes read, valid only during the call.
    public typealias DataHandler = (UnsafeRawBufferPointer) -> Void
    /// The stream ended: nil at end of file, an errno on a read error.
    public typealias EndHandler = (Int32?) -> Void

    static let readBufferSize = 64 * 1024
    /// The most the outgoing queue holds before whole messages are dropped.
    public static let maxQueuedOutput = 64 * 1024

    private let handle: UnsafeMutablePointer<uv_pipe_t>
    private let buffer: UnsafeMutableRawPointer
    private let fd: Int32
    private let loop: EventLoop
    private var retryTimer: LoopTimer?
    /// Ends a yield of the current loop turn (see the type's comment).
    private var yieldTimer: LoopTimer?
    private var yielding = false
    /// Inside the read callback: writes are queued and sent together once it returns, so a
    /// chunk of a thousand requests costs one `send`, not a thousand.
    private var corked = false
    private var onData: DataHandler?
    private var onEnd: EndHandler?
    private var outgoing: [UInt8] = []
    private var peerGone = false
    public private(set) var isClosed = false
    public private(set) var isPaused = false
    /// Bytes written but not yet taken by the peer.
    public var pendingOutput: Int { peerGone ? 0 : outgoing.count }

    /// Takes ownership of `fd` (closed with the stream).
    public init(loop: EventLoop, fd: Int32) throws(SystemError) {
        self.fd = fd
        self.loop = loop
        handle = .allocate(capacity: 1)
        buffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        uv_pipe_init(loop.uvLoop, handle, 0)
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let rc = uv_pipe_open(handle, fd)
        if rc < 0 {
            close()
            Descriptors.close(fd)
            try uvCheck("opening descriptor \(fd) on the loop", rc)
        }
    }

    private var uvStream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    /// Starts reading; `onEnd` is called once, after which no data arrives.
    public func startReading(onData: @escaping DataHandler, onEnd: @escaping EndHandler) {
        guard !isClosed else { return }
        self.onData = onData
        self.onEnd = onEnd
        read()
    }

    private func read() {
        // The handle holds its stream retained until closed: borrowed here, without a retain
        // and release on each of the two calls a read makes.
        uv_read_start(uvStream, { h, _, buf in
            let buffer = Unmanaged<ByteStream>.fromOpaque(h!.pointee.data)._withUnsafeGuaranteedRef { $0.buffer }
            buf!.pointee = uv_buf_init(buffer.assumingMemoryBound(to: CChar.self), UInt32(ByteStream.readBufferSize))
        }, { h, nread, _ in
            Unmanaged<ByteStream>.fromOpaque(h!.pointee.data)._withUnsafeGuaranteedRef { $0.didRead(nread) }
        })
    }

    /// Stops reading until `resumeReading` (the consumer of the data is behind).
    public func pauseReading() {
        guard !isClosed, onEnd != nil, !isPaused else { return }
        isPaused = true
        uv_read_stop(uvStream)
    }

    public func resumeReading() {
        guard isPaused else { return }
        isPaused = false
        if !isClosed, !yielding, onEnd != nil { read() }
    }

    /// Stops reading until the next loop turn.
    private func yieldTurn() {
        yielding = true
        uv_read_stop(uvStream)
        let timer = yieldTimer ?? LoopTimer(loop: loop)
        yieldTimer = timer
        timer.schedule(inNanoseconds: 0) { [weak self] in
            guard let self else { return }
            self.yielding = false
            if !self.isClosed, !self.isPaused, self.onEnd != nil { self.read() }
        }
    }

    private func didRead(_ nread: Int) {
        if nread > 0 {
            corked = true
            onData?(UnsafeRawBufferPointer(start: buffer, count: nread))
            corked = false
            if !outgoing.isEmpty { flush() }
            if nread == Self.readBufferSize, !isClosed, !isPaused, onEnd != nil { yieldTurn() }
        } else if nread < 0 {
            uv_read_stop(uvStream)
            let end = onEnd
            onData = nil
            onEnd = nil
            end?(nread == Int(UV_EOF.rawValue) ? nil : Int32(-nread))
        }
    }

    /// Queues `message` whole (or drops it whole) and sends what the peer will take now.
    /// - Returns: false when the message was dropped.
    @discardableResult
    public func write(_ message: [UInt8]) -> Bool {
        guard !isClosed, !peerGone else {
            return false
        }
        if !outgoing.isEmpty, outgoing.count + message.count > Self.maxQueuedOutput {
            return false
        }
        outgoing.append(contentsOf: message)
        if !corked || outgoing.count >= Self.maxQueuedOutput / 2 { flush() }
        return true
    }

    private func flush() {
        guard !isClosed, !outgoing.isEmpty, !peerGone else { return }
        let sent = outgoing.withUnsafeBytes { Descriptors.sendNonBlocking(fd, $0) }
        guard let sent else {
            peerGone = true
            outgoing.removeAll()
            return
        }
        outgoing.removeFirst(sent)
        if !outgoing.isEmpty {
            // The peer's buffer is full. There is no writability callback on a descriptor
            // libuv reads, so look again shortly.
            let timer = retryTimer ?? LoopTimer(loop: loop)
            retryTimer = timer
            timer.schedule(inNanoseconds: 5_000_000) { [weak self] in self?.flush() }
        }
    }

    /// Stops reading and closes the descriptor. Idempotent.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        onData = nil
        onEnd = nil
        retryTimer?.close()
        retryTimer = nil
        yieldTimer?.close()
        yieldTimer = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let raw = h!
            let stream = Unmanaged<ByteStream>.fromOpaque(raw.pointee.data).takeRetainedValue()
            stream.buffer.deallocate()
            UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_pipe_t.self).deallocate()
        }
    }

    override func closeForShutdown() { close() }
}
