import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Delivers a Unix signal to a callback on the loop thread. Loop-thread only.
public final class SignalWatcher: LoopHandleOwner {
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private var callback: ((Int32) -> Void)?
    private var closed = false

    /// Starts watching `signal`. libuv installs the handler at once, so a signal that
    /// arrives from here on is never lost.
    public init(loop: EventLoop, signal: Int32, _ callback: @escaping (Int32) -> Void) throws(SystemError) {
        handle = .allocate(capacity: 1)
        self.callback = callback
        uv_signal_init(loop.uvLoop, handle)
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let rc = uv_signal_start(handle, { h, signo in
            let watcher = Unmanaged<SignalWatcher>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            watcher.callback?(signo)
        }, signal)
        if rc < 0 {
            close()
            try uvCheck("watching signal \(signal)", rc)
        }
        // Only now that the handler is in place: one held until here (blocked by the thread
        // that started the supervisor, `Supervisor.holdTerminationSignalsUntilWatched`) is
        // delivered to it, not to the default action.
        Self.unblockOnThisThread(signal)
    }

    /// Lets `signal` be delivered to the calling (loop) thread even if the thread that
    /// started the supervisor blocks it. Only this thread's mask changes.
    static func unblockOnThisThread(_ signal: Int32) {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    public func close() {
        guard !closed else { return }
        closed = true
        callback = nil
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }
}
