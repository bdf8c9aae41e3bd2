import Dispatch
import OvertimeProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The task's end of the channel: one writer thread, one reader thread, started on first
/// use and only when the task runs under Overtime. The channel is fd 3 when it is this
/// process's own (`OVERTIME_FD` set, and its peer is this process's parent: the supervisor
/// started it), else a connection to the task's `OVERTIME_SOCKET` (a child the task
/// started: its fd 3, if any, is its parent's, and sharing it would mix their lines and
/// take their replies).
///
/// The job never waits on the supervisor: calls queue their message and return. Progress
/// coalesces (the latest value wins, at most `progressInterval` apart), so a tight loop
/// cannot flood the channel; `extend`, `ready`, `result` and `phase` are never dropped.
final class WorkerConnection: Sendable {
    static let shared = WorkerConnection()

    /// Progress and heartbeats go out at most this often.
    static let progressInterval = Duration.milliseconds(50)

    struct State {
        var outgoing: [ChildMessage] = []
        var pendingProgress: Progress?
        var pendingHeartbeat = false
        var remaining: Duration?
        var remainingSetAt: Int64 = 0
        var cancellation: CancellationReason?
        var scopes: [Int: @Sendable (CancellationReason) -> Void] = [:]
        var nextScope = 0
        var expiringHandlers: [@Sendable (Duration) -> Void] = []
        var memoryWarning: MemoryWarning?
        var memoryWarningHandlers: [@Sendable (MemoryWarning) -> Void] = []
        var checkpointAdvice: CheckpointAdvice?
        var checkpointAdviceHandlers: [@Sendable (CheckpointAdvice) -> Void] = []
        /// The phase the task last said it is in; nil until it names one.
        var phase: WorkerPhase?
        var extendWaiters: [CheckedContinuation<Budget, Never>] = []
    }

    let fd: Int32?
    let state = Mutex(State())
    private let workAvailable = DispatchSemaphore(value: 0)
    /// Held while lines are written, so the exit-time flush never interleaves with the
    /// writer thread.
    private let writing = Mutex(())
    /// The name this connection goes by until its first progress or heartbeat says it.
    private let unnamed = Mutex<String?>(WorkerConnection.reporterName())

    /// `rank R` from `RANK` (torchrun, DeepSpeed and Accelerate set it in every rank), else
    /// `local rank R` from `LOCAL_RANK`, else `pid N`: how the supervisor tells this
    /// process's reports from its other processes' (docs/protocol.md).
    static func reporterName() -> String {
        for (variable, label) in [("RANK", "rank"), ("LOCAL_RANK", "local rank")] {
            if let text = getenv(variable).map({ String(cString: $0) }), let rank = UInt32(text) { return "\(label) \(rank)" }
        }
        return "pid \(getpid())"
    }

    private init() {
        guard let fd = Self.inheritedChannel() ?? Self.connectToTaskSocket() else {
            fd = nil
            return
        }
        self.fd = fd
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // the job's own children must not inherit the channel
        SignalRelay.install()
        atexit { WorkerConnection.shared.flush() }
        startThread { WorkerConnection.shared.writerLoop() }
        startThread { WorkerConnection.shared.readerLoop() }
    }

    var isActive: Bool { fd != nil }

    /// fd 3 (`OVERTIME_FD`) when it is a Unix stream socket whose other end is held by this
    /// process's parent, the supervisor that started it.
    static func inheritedChannel() -> Int32? {
        guard let text = getenv("OVERTIME_FD").map({ String(cString: $0) }), let fd = Int32(text), fd >= 0,
              fcntl(fd, F_GETFD) >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
        // struct ucred: pid, uid, gid.
        var peer: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: peer))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0, peer.pid == getppid() else { return nil }
        return fd
    }

    /// A connection to the task's socket (`OVERTIME_SOCKET`; `@name` is abstract), or nil.
    static func connectToTaskSocket() -> Int32? {
        guard let address = getenv("OVERTIME_SOCKET").map({ String(cString: $0) }), !address.isEmpty else { return nil }
        var bytes = Array(address.utf8)
        var socketAddress = sockaddr_un()
        guard bytes.count < MemoryLayout.size(ofValue: socketAddress.sun_path) else { return nil }
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: bytes) }
        let length = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + bytes.count + (abstract ? 0 : 1)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let connected = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(length)) }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    // MARK: Sending

    func send(_ message: ChildMessage) {
        guard isActive else { return }
        state.withLock { $0.outgoing.append(message) }
        workAvailable.signal()
    }

    /// Says the task is in `phase` from now on; returns the phase it was in (nil: none named).
    /// Outside Overtime it is only remembered, for a scoped phase to go back to.
    @discardableResult
    func enterPhase(_ phase: WorkerPhase) -> WorkerPhase? {
        let previous = state.withLock { s -> WorkerPhase? in
            defer { s.phase = phase }
            guard isActive else { return s.phase }
            // Progress reported before the change belongs to the phase it was reported in:
            // it goes out first, not coalesced past the phase message. The phase message
            // is a heartbeat itself.
            if let progress = s.pendingProgress { s.outgoing.append(.progress(progress)) }
            s.pendingProgress = nil
            s.pendingHeartbeat = false
            s.outgoing.append(.phase(name: phase.name, window: phase.window))
            return s.phase
        }
        if isActive { workAvailable.signal() }
        return previous
    }

    func sendProgress(_ progress: Progress) {
        guard isActive else { return }
        let wasIdle = state.withLock { s -> Bool in
            defer { s.pendingProgress = progress }
            return s.pendingProgress == nil
        }
        if wasIdle { workAvailable.signal() }
    }

    func sendHeartbeat() {
        guard isActive else { return }
        let wasIdle = state.withLock { s -> Bool in
            defer { s.pendingHeartbeat = true }
            return !s.pendingHeartbeat
        }
        if wasIdle { workAvailable.signal() }
    }

    private func writerLoop() {
        while true {
            workAvailable.wait()
            if flush() {
                // Let updates pile up (and coalesce) for a moment before the next line.
                var pause = timespec(tv_sec: 0, tv_nsec: Int(Self.progressInterval.nanosecondsForSleep))
                var left = timespec()
                while nanosleep(&pause, &left) != 0 && errno == EINTR { pause = left }
            }
        }
    }

    /// Writes everything queued, in order, then the latest progress (or a heartbeat).
    /// Runs on the writer thread, and at exit so that a result or last progress reported
    /// just before the program ends is not lost.
    /// - Returns: true when a progress or heartbeat line went out.
    @discardableResult
    func flush() -> Bool {
        writing.withLock { _ in
            let (messages, progress, heartbeat) = state.withLock { s in
                defer {
                    s.outgoing.removeAll()
                    s.pendingProgress = nil
                    s.pendingHeartbeat = false
                }
                return (s.outgoing, s.pendingProgress, s.pendingHeartbeat)
            }
            for message in messages { write(message.encoded(reporter: message.isReport ? takeName() : nil)) }
            if let progress {
                write(ChildMessage.progress(progress).encoded(reporter: takeName()))
            } else if heartbeat {
                write(ChildMessage.heartbeat.encoded(reporter: takeName()))
            }
            return progress != nil || heartbeat
        }
    }

    /// The connection says who it is once, with its first report: the name for the report
    /// about to be written, nil after the first.
    private func takeName() -> String? {
        unnamed.withLock { named in named.take() }
    }

    private func write(_ bytes: [UInt8]) {
        guard let fd else { return }
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                // MSG_NOSIGNAL: a supervisor that went away must not kill the job with SIGPIPE.
                var n = sendToSupervisor(fd, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                if n < 0, errno == ENOTSOCK { n = writeToSupervisor(fd, buffer.baseAddress! + offset, buffer.count - offset) }
                if n > 0 {
                    offset += n
                } else if n < 0, errno == EINTR {
                    continue
                } else {
                    return  // the supervisor is gone; nothing more can be said
                }
            }
        }
    }

    // MARK: Receiving

    private func readerLoop() {
        guard let fd else { return }
        var framer = LineFramer()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: SignalRelay.readEnd, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[0].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 {
                    // The supervisor is gone: nothing will answer an extend.
                    resolveExtendWaiters(with: Budget(remaining: remainingNow(), granted: false))
                    fds[0].fd = -1  // keep watching for SIGTERM only
                    continue
                }
                buffer.withUnsafeBytes { bytes in
                    framer.feed(UnsafeRawBufferPointer(rebasing: bytes[0..<n])) { item in
                        if case let .line(line) = item, let message = try? SupervisorMessage.decode(line) {
                            handle(message)
                        }
                    }
                }
            }
            // After the channel: Overtime writes `cancel` before it sends SIGTERM, so when both
            // are ready the message (with its reason) must be heard first.
            if fds[1].revents != 0 {
                SignalRelay.drain()
                // SIGTERM with no cancel message before it: someone else is stopping the
                // job; treat it as a shutdown.
                deliverCancel(.shutdown(grace: .zero))
            }
        }
    }

    private func handle(_ message: SupervisorMessage) {
        switch message {
        case let .budget(remaining, granted):
            let budget = remaining.map(Duration.init(wireSeconds:))
            let waiter = state.withLock { s -> CheckedContinuation<Budget, Never>? in
                s.remaining = budget
                s.remainingSetAt = monotonicNanoseconds()
                guard granted != nil, !s.extendWaiters.isEmpty else { return nil }
                return s.extendWaiters.removeFirst()
            }
            waiter?.resume(returning: Budget(remaining: budget, granted: granted ?? false))
        case let .expiring(remaining):
            let left = Duration(wireSeconds: remaining)
            let handlers = state.withLock { s in
                s.remaining = left
                s.remainingSetAt = monotonicNanoseconds()
                return s.expiringHandlers
            }
            for handler in handlers { handler(left) }
        case let .cancel(reason, grace, _):
            if let reason = CancellationReason(wireName: reason.rawValue, grace: Duration(wireSeconds: grace)) {
                deliverCancel(reason)
            }
        case let .warning(resource, used, limit):
            // A resource a newer supervisor watches is not what these handlers are for.
            guard resource == "memory" else { return }
            deliverOnce(MemoryWarning(used: used, limit: limit), to: \.memoryWarningHandlers, keptIn: \.memoryWarning)
        case let .advice(action, remaining, why):
            // Advice to do something else, from a newer supervisor, is not for these handlers.
            guard action == "checkpoint" else { return }
            deliverOnce(CheckpointAdvice(action: action, remaining: Duration(wireSeconds: remaining), why: why),
                        to: \.checkpointAdviceHandlers, keptIn: \.checkpointAdvice)
        }
    }

    /// Records the cancellation once and tells every open scope.
    private func deliverCancel(_ reason: CancellationReason) {
        let scopes = state.withLock { s -> [@Sendable (CancellationReason) -> Void] in
            guard s.cancellation == nil else { return [] }
            s.cancellation = reason
            return Array(s.scopes.values)
        }
        for scope in scopes { scope(reason) }
        resolveExtendWaiters(with: Budget(remaining: reason.grace, granted: false))
    }

    private func resolveExtendWaiters(with budget: Budget) {
        let waiters = state.withLock { s in
            defer { s.extendWaiters.removeAll() }
            return s.extendWaiters
        }
        for waiter in waiters { waiter.resume(returning: budget) }
    }

    // MARK: Scopes and hooks

    /// Registers a cancellation scope; if the task is already cancelled, `onCancel` runs now.
    func openScope(_ onCancel: @escaping @Sendable (CancellationReason) -> Void) -> Int {
        let (id, already) = state.withLock { s in
            s.nextScope += 1
            s.scopes[s.nextScope] = onCancel
            return (s.nextScope, s.cancellation)
        }
        SignalRelay.scopeOpened()
        if let already { onCancel(already) }
        return id
    }

    func closeScope(_ id: Int) {
        let cancelled = state.withLock { s in
            s.scopes.removeValue(forKey: id)
            return s.cancellation != nil
        }
        SignalRelay.scopeClosed(afterCancel: cancelled)
    }

    func addExpiringHandler(_ handler: @escaping @Sendable (Duration) -> Void) {
        state.withLock { $0.expiringHandlers.append(handler) }
    }

    /// Registers a handler of a message that comes once (the memory warning, the checkpoint
    /// advice); if it already came, the handler runs now with it. Both under the lock the
    /// reader records the message under, so a handler registered as it arrives runs once.
    func addOnceHandler<Message: Sendable>(_ handler: @escaping @Sendable (Message) -> Void,
                                           to handlers: WritableKeyPath<State, [@Sendable (Message) -> Void]>,
                                           keptIn kept: KeyPath<State, Message?>) {
        let already = state.withLock { s in
            s[keyPath: handlers].append(handler)
            return s[keyPath: kept]
        }
        if let already { runOnceHandlers([handler], already) }
    }

    /// Keeps a message that comes once and runs the handlers registered for it.
    private func deliverOnce<Message: Sendable>(_ message: Message, to handlers: KeyPath<State, [@Sendable (Message) -> Void]>,
                                                keptIn kept: WritableKeyPath<State, Message?>) {
        let registered = state.withLock { s in
            s[keyPath: kept] = message
            return s[keyPath: handlers]
        }
        runOnceHandlers(registered, message)
    }

    /// Runs the handlers in order on a thread of their own, not the reader's: a handler
    /// may take its time writing a checkpoint, and meanwhile the `cancel` that follows (at
    /// `memory-max`, at the hard end), and its SIGTERM, which the reader also watches, must
    /// still be heard.
    private func runOnceHandlers<Message: Sendable>(_ handlers: [@Sendable (Message) -> Void], _ message: Message) {
        guard !handlers.isEmpty else { return }
        startThread {
            for handler in handlers { handler(message) }
        }
    }

    var memoryWarning: MemoryWarning? { state.withLock { $0.memoryWarning } }

    var checkpointAdvice: CheckpointAdvice? { state.withLock { $0.checkpointAdvice } }

    func requestExtension(seconds: Double, why: String?) async -> Budget {
        guard isActive else { return Budget(remaining: nil, granted: true) }
        return await withCheckedContinuation { continuation in
            let cancelled = state.withLock { s -> CancellationReason? in
                if let c = s.cancellation { return c }
                s.extendWaiters.append(continuation)
                return nil
            }
            if let cancelled {
                continuation.resume(returning: Budget(remaining: cancelled.grace, granted: false))
            } else {
                send(.extend(seconds: seconds, why: why))
            }
        }
    }

    var cancellation: CancellationReason? { state.withLock { $0.cancellation } }

    /// The budget left, from the supervisor's last word on it; nil when unlimited or unknown.
    func remainingNow() -> Duration? {
        state.withLock { s in
            s.remaining.map { $0 - .nanoseconds(monotonicNanoseconds() - s.remainingSetAt) }
        }
    }
}

func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

extension ChildMessage {
    /// Progress, a heartbeat or a phase: what may carry the connection's name.
    fileprivate var isReport: Bool {
        switch self {
        case .progress, .heartbeat, .phase: true
        case .extend, .ready, .result: false
        }
    }
}

extension Duration {
    /// Seconds as the supervisor sends them, to the millisecond; a value beyond what a
    /// `Duration` of milliseconds holds is clamped rather than trapping.
    init(wireSeconds seconds: Double) {
        let milliseconds = (seconds * 1000).rounded()
        self = .milliseconds(milliseconds.isNaN ? 0 : Int64(max(-9e15, min(9e15, milliseconds))))
    }

    /// The seconds a message to the supervisor carries.
    var wireSeconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    var nanosecondsForSleep: Int64 {
        let (s, atto) = components
        return s * 1_000_000_000 + atto / 1_000_000_000
    }
}

private func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    let rc = pthread_create(&thread, &attributes, { arg in
        let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
        // These threads never take the job's signals: SIGTERM reaches it through the relay.
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_BLOCK, &all, nil)
        box.body()
        return nil
    }, box)
    if rc != 0 { Unmanaged<Box>.fromOpaque(box).release() }
}

// send(2) and write(2) by names the connection's own `write` does not shadow (a
// module-qualified `Glibc.send` would leave the Musl build without them).
private func sendToSupervisor(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
    send(fd, bytes, count, flags)
}

private func writeToSupervisor(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, bytes, count)
}
