import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Something the loop reads a task's output from until it ends.
public protocol OutputReader: AnyObject {
    /// Starts reading; `onEnd` is called once, after which no data arrives.
    func startReading(onData: @escaping ByteStream.DataHandler, onEnd: @escaping ByteStream.EndHandler)
    /// Stops reading and closes the descriptor. Idempotent.
    func close()
    /// Reads nothing more until `resumeReading` (the consumer is behind); what the writer
    /// sends meanwhile waits in the kernel, and then the writer waits.
    func pauseReading()
    func resumeReading()
    var isPaused: Bool { get }
}

extension ByteStream: OutputReader {}

/// Reads the supervisor's end of a pseudo-terminal to its end. Loop-thread only.
///
/// Not a libuv stream: libuv takes a hang-up seen together with a read shorter than its
/// buffer for end of file, which is right for a pipe and wrong for a terminal. A pseudo-
/// terminal hands out at most a few KiB a read, while the task's last writes may still be
/// on their way through the kernel when its side closes; libuv then dropped the tail of a
/// flood of output (hundreds of lines, seen under load). So this polls for readability and
/// reads until the kernel says there is nothing more now (EAGAIN) or ever (EIO, end of
/// file), at most 32 reads a turn.
public final class TerminalReader: LoopHandleOwner, OutputReader {
    private let fd: Int32
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private let buffer: UnsafeMutableRawPointer
    private var onData: ByteStream.DataHandler?
    private var onEnd: ByteStream.EndHandler?
    private var closed = false
    public private(set) var isPaused = false

    static let readBufferSize = 64 * 1024

    /// Takes ownership of `fd` (closed with the reader).
    public init(loop: EventLoop, fd: Int32) throws(SystemError) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        self.fd = fd
        handle = .allocate(capacity: 1)
        buffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        let rc = uv_poll_init(loop.uvLoop, handle, fd)
        if rc < 0 {
            handle.deallocate()
            buffer.deallocate()
            Descriptors.close(fd)
            try uvCheck("watching terminal \(fd) on the loop", rc)
        }
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    public func startReading(onData: @escaping ByteStream.DataHandler, onEnd: @escaping ByteStream.EndHandler) {
        guard !closed else { return }
        self.onData = onData
        self.onEnd = onEnd
        poll()
    }

    private func poll() {
        uv_poll_start(handle, Int32(UV_READABLE.rawValue)) { h, _, _ in
            // Whatever woke us (data, a hang-up, an error), reading says which it is.
            Unmanaged<TerminalReader>.fromOpaque(h!.pointee.data).takeUnretainedValue().readAvailable()
        }
    }

    public func pauseReading() {
        guard !closed, onEnd != nil, !isPaused else { return }
        isPaused = true
        uv_poll_stop(handle)
    }

    public func resumeReading() {
        guard isPaused else { return }
        isPaused = false
        if !closed, onEnd != nil { poll() }
    }

    private func readAvailable() {
        // A bounded turn: a task writing without pause could keep a terminal from ever
        // running dry, and the loop has timers and other tasks to serve. The poll is
        // level-triggered, so what is left is read on the next turn.
        var reads = 0
        while !closed, !isPaused, onEnd != nil, reads < 32 {
            let code: Int32
            do throws(SystemError) {
                let n = try Syscall.retrying("read a task's terminal") { read(fd, buffer, Self.readBufferSize) }
                if n > 0 {
                    reads += 1
                    onData?(UnsafeRawBufferPointer(start: buffer, count: n))
                    continue
                }
                code = 0
            } catch {
                code = error.errno
            }
            if code == EAGAIN || code == EWOULDBLOCK { return }
            // 0 or EIO: the task's side is closed and everything it wrote has been read.
            uv_poll_stop(handle)
            let end = onEnd
            onData = nil
            onEnd = nil
            end?(code == 0 || code == EIO ? nil : code)
            return
        }
    }

    /// After terminal `from` was resized: gives this pseudo-terminal the same size, before
    /// SIGWINCH is passed on to the task.
    public func copyWindowSize(from terminal: Int32) {
        guard !closed else { return }
        Descriptors.copyWindowSize(from: terminal, to: fd)
    }

    public func close() {
        guard !closed else { return }
        closed = true
        onData = nil
        onEnd = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let raw = h!
            let reader = Unmanaged<TerminalReader>.fromOpaque(raw.pointee.data).takeRetainedValue()
            Descriptors.close(reader.fd)
            reader.buffer.deallocate()
            UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_poll_t.self).deallocate()
        }
    }

    override func closeForShutdown() { close() }
}
