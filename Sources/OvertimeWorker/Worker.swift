import OvertimeProtocol
import Synchronization

/// The task's side of Overtime: report progress, ask for time, learn why it is cancelled.
///
/// Every call is a quiet no-op when the program runs outside Overtime (no `OVERTIME_FD`),
/// so the same program runs standalone. All of it is thread-safe, and none of it waits on
/// the supervisor except `requestExtension`, which waits for its answer.
public enum Worker {
    /// True when running under an Overtime supervisor.
    public static var isSupervised: Bool { WorkerConnection.shared.isActive }

    /// The task's progress; see `TaskProgress`.
    public static let progress = TaskProgress(connection: WorkerConnection.shared)

    /// Tells the supervisor the task is up (services; queues may wait for it).
    public static func ready() {
        WorkerConnection.shared.send(.ready)
    }

    /// Proof of life without progress: extends the budget like a progress report.
    public static func heartbeat() {
        WorkerConnection.shared.sendHeartbeat()
    }

    /// Asks for the deadline to be at least `seconds` from now, and waits for the answer.
    /// - Returns: what the supervisor granted. Outside Overtime: unlimited, granted.
    public static func requestExtension(seconds: Double, why: String? = nil) async -> Budget {
        await WorkerConnection.shared.requestExtension(seconds: seconds, why: why)
    }

    /// Reports the task's result (the last one wins). `performBackgroundTask` does this with
    /// the closure's return value.
    public static func result(_ value: JSONValue) {
        WorkerConnection.shared.send(.result(value))
    }

    /// Runs `handler` (on a background thread) when the supervisor warns that the deadline
    /// is near (`--warn-before`): a moment to checkpoint. It receives the time left.
    public static func onExpiring(_ handler: @escaping @Sendable (Duration) -> Void) {
        WorkerConnection.shared.addExpiringHandler(handler)
    }

    /// Runs `handler` (on a background thread, so it may take its time) when the
    /// supervisor warns that the task's memory passed `--memory-warn` (by default 90% of
    /// `--memory-max`): a moment to checkpoint, shrink a buffer or a batch, drop a cache,
    /// before the task is cancelled with reason `memory` at the limit. The warning comes
    /// once; a handler registered after it came runs at once with it.
    public static func onMemoryWarning(_ handler: @escaping @Sendable (MemoryWarning) -> Void) {
        WorkerConnection.shared.addOnceHandler(handler, to: \.memoryWarningHandlers, keptIn: \.memoryWarning)
    }

    /// The supervisor's memory warning, once it came; nil before and outside Overtime.
    public static var memoryWarning: MemoryWarning? { WorkerConnection.shared.memoryWarning }

    /// Runs `handler` (on a background thread, so it may take its time) when the
    /// supervisor advises a checkpoint: the task's hard end (`--max-runtime`, the batch's
    /// deadline, the engine's end) is as near as a checkpoint takes (`--checkpoint-lead`, or
    /// the longest `checkpoint` phase seen), and its pace says its work will not be done by
    /// then. Save what is needed to resume and stop cleanly: at the hard end the task is
    /// cancelled with reason `deadline`. The advice comes once; a handler registered after
    /// it came runs at once with it.
    public static func onCheckpointAdvice(_ handler: @escaping @Sendable (CheckpointAdvice) -> Void) {
        WorkerConnection.shared.addOnceHandler(handler, to: \.checkpointAdviceHandlers, keptIn: \.checkpointAdvice)
    }

    /// The supervisor's advice to checkpoint, once it came; nil before and outside Overtime.
    /// A loop may look at it between steps instead of registering a handler.
    public static var checkpointAdvice: CheckpointAdvice? { WorkerConnection.shared.checkpointAdvice }

    /// Says which part of its work the task is in from now on (`compile`, `validation`,
    /// `checkpoint`): until the next phase, that phase's window rules (`--phase-window`
    /// from outside first, else `window`, else one learned from the task's pace under
    /// `--window auto`, else the task's window). Counts as a heartbeat. A phase named
    /// `checkpoint` teaches the supervisor how long a checkpoint takes (`onCheckpointAdvice`).
    /// - Parameters:
    ///   - name: the phase's name, as the display and the events show it.
    ///   - window: how long the task may go without a report in this phase; `.zero` for
    ///     no limit but the hard end; nil (or negative) for the window it would have anyway.
    public static func phase(_ name: String, window: Duration? = nil) {
        WorkerConnection.shared.enterPhase(WorkerPhase(name: name, window: window))
    }

    /// Runs `body` in the phase `name` (see `phase(_:window:)`), then goes back to the
    /// phase the task was in before (`main` if it had named none), also when `body` throws.
    ///
    /// ```swift
    /// try await Worker.phase("checkpoint") {
    ///     try await model.save(to: checkpointURL)
    /// }
    /// ```
    /// Phases belong to the task as a whole: name them from its main line of work, not from
    /// several threads at once.
    public static func phase<T>(_ name: String, window: Duration? = nil, isolation: isolated (any Actor)? = #isolation,
                                _ body: () async throws -> T) async rethrows -> T {
        let before = WorkerConnection.shared.enterPhase(WorkerPhase(name: name, window: window))
        defer { WorkerConnection.shared.enterPhase(before ?? .initial) }
        return try await body()
    }

    /// Runs `body` in the phase `name`, then goes back to the phase the task was in before;
    /// the same as the `async` form, for code that does not wait.
    public static func phase<T>(_ name: String, window: Duration? = nil, _ body: () throws -> T) rethrows -> T {
        let before = WorkerConnection.shared.enterPhase(WorkerPhase(name: name, window: window))
        defer { WorkerConnection.shared.enterPhase(before ?? .initial) }
        return try body()
    }

    /// Time left in the budget, from the supervisor's last word; nil when unlimited or
    /// outside Overtime.
    public static var remaining: Duration? { WorkerConnection.shared.remainingNow() }

    /// Why the task is being cancelled, once it is.
    public static var cancellation: CancellationReason? { WorkerConnection.shared.cancellation }
}

/// A phase as the task last named it, to go back to after a scoped one.
struct WorkerPhase: Sendable, Equatable {
    var name: String
    /// Seconds, as the `phase` message carries it (0: no soft limit).
    var window: Double?

    init(name: String, window: Duration?) {
        self.name = name
        self.window = window.flatMap { $0 < .zero ? nil : $0.wireSeconds }
    }

    /// The phase a task is in before it names one, as the supervisor calls it.
    static let initial = WorkerPhase(name: "main", window: nil)
}

/// Runs `operation` with a cancellation handler that learns why the task is cancelled.
///
/// When the supervisor cancels the task (its `cancel` message, or SIGTERM), `onCancel` runs
/// first, with the reason and the grace left before SIGKILL; then the Swift task running
/// `operation` is cancelled, so `try Task.checkCancellation()` and `Task.sleep` throw. The
/// handler has finished its rollback before the operation unwinds and the program exits.
/// Keep it short: roll back, save state, and return.
/// - Returns: the operation's value.
/// - Throws: what the operation throws (`CancellationError` once cancelled).
public func withIntentCancellationHandler<T: Sendable>(
    operation: @escaping @Sendable () async throws -> T,
    onCancel: @escaping @Sendable (CancellationReason) -> Void
) async throws -> T {
    // The scope opens before the work starts: a SIGTERM that follows the work's first
    // report must find it open, or it would end the process instead of the operation.
    let handle = WorkHandle<T>()
    let scope = WorkerConnection.shared.openScope { reason in
        onCancel(reason)
        handle.cancel()
    }
    defer { WorkerConnection.shared.closeScope(scope) }
    let work = Task { try await operation() }
    handle.attach(work)
    return try await withTaskCancellationHandler {
        try await work.value
    } onCancel: {
        work.cancel()
    }
}

/// The operation's task, for a cancellation that may come before the task exists.
private final class WorkHandle<T: Sendable>: Sendable {
    private let state = Mutex<(task: Task<T, any Error>?, cancelled: Bool)>((nil, false))

    func attach(_ task: Task<T, any Error>) {
        let cancelled = state.withLock { s in
            s.task = task
            return s.cancelled
        }
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { s in
            s.cancelled = true
            return s.task
        }
        task?.cancel()
    }
}

/// Runs a long task whose budget its progress extends, and reports its return value as
/// the task's `result`.
///
/// ```swift
/// let message = try await performBackgroundTask { progress in
///     progress.totalUnitCount = 100
///     progress.localizedDescription = "Uploading file"
///     for chunk in 0..<100 {
///         try Task.checkCancellation()
///         await uploadChunk(chunk)
///         progress.completedUnitCount = Int64(chunk + 1)
///     }
///     return "Upload complete!"
/// }
/// ```
/// Cancellation works as in `withIntentCancellationHandler`.
public func performBackgroundTask<T: Sendable>(
    _ operation: @escaping @Sendable (TaskProgress) async throws -> T
) async throws -> T {
    let value = try await withIntentCancellationHandler {
        try await operation(Worker.progress)
    } onCancel: { _ in }
    Worker.result(JSONValue(reporting: value))
    return value
}

/// Sets the task's share done and subtitle (`Worker.progress.updateProgress`).
public func updateProgress(fractionCompleted: Double, message: String? = nil) {
    Worker.progress.updateProgress(fractionCompleted: fractionCompleted, message: message)
}

/// A value that can be a task's result.
public protocol ResultValue {
    var resultJSON: JSONValue { get }
}

extension JSONValue: ResultValue {
    public var resultJSON: JSONValue { self }
}

extension String: ResultValue {
    public var resultJSON: JSONValue { .string(self) }
}

extension Bool: ResultValue {
    public var resultJSON: JSONValue { .bool(self) }
}

extension Int: ResultValue {
    public var resultJSON: JSONValue { .number(Double(self)) }
}

extension Double: ResultValue {
    public var resultJSON: JSONValue { .number(self) }
}

extension Array: ResultValue where Element: ResultValue {
    public var resultJSON: JSONValue { .array(map(\.resultJSON)) }
}

extension Dictionary: ResultValue where Key == String, Value: ResultValue {
    public var resultJSON: JSONValue { .object(sorted { $0.key < $1.key }.map { ($0.key, $0.value.resultJSON) }) }
}

extension Optional: ResultValue where Wrapped: ResultValue {
    public var resultJSON: JSONValue { self?.resultJSON ?? .null }
}

extension JSONValue {
    /// A task's return value as a result: `ResultValue`s as themselves, `()` as null, and
    /// anything else as its description.
    init(reporting value: Any) {
        if let value = value as? ResultValue {
            self = value.resultJSON
        } else if value is Void {
            self = .null
        } else {
            self = .string(String(describing: value))
        }
    }
}
