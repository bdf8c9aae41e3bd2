import CLibUV

/// A one-shot timer on a loop. Loop-thread only.
public final class LoopTimer: LoopHandleOwner {
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private let loop: EventLoop
    private var callback: (() -> Void)?
    private var closed = false

    public init(loop: EventLoop) {
        self.loop = loop
        handle = .allocate(capacity: 1)
        uv_timer_init(loop.uvLoop, handle)
        // Retained until the close callback: libuv may only free the handle there.
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Fires `callback` once, `nanoseconds` from now (rounded up to libuv's millisecond).
    /// Replaces any earlier schedule.
    public func schedule(inNanoseconds nanoseconds: Int64, _ callback: @escaping () -> Void) {
        guard !closed else { return }
        self.callback = callback
        uv_update_time(loop.uvLoop)
        let ms = UInt64(max(0, (nanoseconds + 999_999) / 1_000_000))
        uv_timer_start(handle, { h in
            let timer = Unmanaged<LoopTimer>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            let callback = timer.callback
            timer.callback = nil
            callback?()
        }, ms, 0)
    }

    public func cancel() {
        guard !closed else { return }
        uv_timer_stop(handle)
        callback = nil
    }

    /// Stops and releases the timer; it cannot be used again.
    public func close() {
        guard !closed else { return }
        closed = true
        callback = nil
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }
}
