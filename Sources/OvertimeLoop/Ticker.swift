import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A thread of its own that calls `body` every `interval` until stopped. `stop` wakes it
/// at once and waits for the call in progress to end, so nothing runs after it returns.
///
/// The CLI's display draws here rather than on the supervisor's loop thread (a slow
/// terminal must never hold up budgets and signals), and the metrics read the tasks' cgroup
/// files here (the kernel makes each afresh, slowly).
public final class Ticker: Sendable {
    private let interval: Duration
    private let body: @Sendable () -> Void
    private let stopping = Atomic<Bool>(false)
    /// Its write end wakes the thread early; close-on-exec, so no task inherits it.
    private let wake: (read: Int32, write: Int32)?
    private let thread = Mutex<pthread_t?>(nil)

    public init(interval: Duration, _ body: @escaping @Sendable () -> Void) {
        self.interval = interval
        self.body = body
        wake = try? Descriptors.socketPair()
    }

    deinit {
        if let wake {
            close(wake.read)
            close(wake.write)
        }
    }

    /// Starts the thread; false if it could not be made (then nothing ticks).
    @discardableResult
    public func start() -> Bool {
        let context = Unmanaged.passRetained(self).toOpaque()
        var id = pthread_t()
        let rc = pthread_create(&id, nil, { context in
            let ticker = Unmanaged<Ticker>.fromOpaque(context!).takeRetainedValue()
            ticker.run()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<Ticker>.fromOpaque(context).release()
            return false
        }
        thread.withLock { $0 = id }
        return true
    }

    private func run() {
        while !stopping.load(ordering: .acquiring) {
            body()
            if stopping.load(ordering: .acquiring) { break }
            pause()
        }
    }

    private func pause() {
        // (OvertimeCore's `Duration.nanoseconds` is not this module's to use.)
        let (seconds, attoseconds) = interval.components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        let ms = Int32(max(1, nanoseconds / 1_000_000))
        guard let wake else {
            var ts = timespec(tv_sec: 0, tv_nsec: Int(min(nanoseconds, 999_999_999)))
            nanosleep(&ts, nil)
            return
        }
        var entry = pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)
        // A signal (EINTR) only makes the next call early.
        if poll(&entry, 1, ms) > 0, entry.revents & Int16(POLLIN) != 0 {
            // Take the wake-ups (`wake`), or every later pause would end at once.
            var bytes = [UInt8](repeating: 0, count: 64)
            _ = read(wake.read, &bytes, bytes.count)
        }
    }

    /// Makes the thread call `body` now rather than at the end of its pause.
    public func wakeNow() {
        guard let wake else { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// Stops the thread and waits for it. Idempotent.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        if let wake {
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }
        let id = thread.withLock { current -> pthread_t? in
            defer { current = nil }
            return current
        }
        if let id { pthread_join(id, nil) }
    }
}
