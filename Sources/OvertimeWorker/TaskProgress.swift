import OvertimeProtocol
import Synchronization

/// A task's progress, reported to the supervisor as it changes (and coalesced, so setting
/// it in a tight loop is cheap). Modelled on Foundation's `Progress`: units of work, a title
/// and a subtitle. Every report extends the task's budget.
///
/// Thread-safe. Outside Overtime, setting it does nothing but remember the values.
public final class TaskProgress: Sendable {
    private struct Values {
        var total: Int64 = 0
        var completed: Int64 = 0
        var fraction: Double?
        var title: String?
        var detail: String?
    }

    private let values = Mutex(Values())
    private let connection: WorkerConnection

    init(connection: WorkerConnection) {
        self.connection = connection
    }

    /// The units of work in all; 0 while unknown.
    public var totalUnitCount: Int64 {
        get { values.withLock { $0.total } }
        set { update { $0.total = max(0, newValue); $0.fraction = nil } }
    }

    /// The units done so far.
    public var completedUnitCount: Int64 {
        get { values.withLock { $0.completed } }
        set { update { $0.completed = max(0, newValue); $0.fraction = nil } }
    }

    /// The share done, 0…1: from the units when there is a total, else the last fraction set.
    public var fractionCompleted: Double {
        values.withLock { v in
            if let f = v.fraction { return f }
            return v.total > 0 ? min(1, Double(v.completed) / Double(v.total)) : 0
        }
    }

    /// The title shown for the task (`title` on the wire).
    public var localizedDescription: String? {
        get { values.withLock { $0.title } }
        set { update { $0.title = newValue } }
    }

    /// The subtitle shown under the title (`detail` on the wire).
    public var localizedAdditionalDescription: String? {
        get { values.withLock { $0.detail } }
        set { update { $0.detail = newValue } }
    }

    /// Sets the share done and, when given, the subtitle, in one report.
    public func updateProgress(fractionCompleted: Double, message: String? = nil) {
        update { v in
            v.fraction = min(1, max(0, fractionCompleted.isFinite ? fractionCompleted : 0))
            if let message { v.detail = message }
        }
    }

    private func update(_ change: (inout Values) -> Void) {
        let report = values.withLock { v -> Progress in
            change(&v)
            if let fraction = v.fraction {
                return Progress(fraction: fraction, title: v.title, detail: v.detail)
            }
            return Progress(completed: Int(v.completed), total: v.total > 0 ? Int(v.total) : nil, title: v.title, detail: v.detail)
        }
        connection.sendProgress(report)
    }
}
