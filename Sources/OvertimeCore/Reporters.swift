import OvertimeProtocol

/// One process's connection to its task's supervisor: the leader's fd 3, or a connection
/// to the task's `OVERTIME_SOCKET` (DESIGN §3a). Numbered by the supervisor, the leader 0.
public struct ReporterID: Hashable, Sendable, CustomStringConvertible {
    public let number: Int
    public init(_ number: Int) { self.number = number }
    public static let leader = ReporterID(0)
    public var description: String { "reporter \(number)" }
}

/// A task's progress bars, each known by its reporter and its `bar` id (nil: the reporter's
/// only bar). Each holds its merged progress (a bar may send its title once, then only
/// counts) and its previous message's count, which `require-advance` judges against: a
/// message advances when its bar is new or its `completed` or `fraction` is above that
/// bar's previous one. A bar that starts again lower (a new epoch) neither counts nor
/// harms, and its next step up counts; a loop re-sending one number never advances.
struct BarTable: Sendable {
    struct Key: Hashable, Sendable {
        var reporter: ReporterID
        var bar: String?
    }

    struct Bar: Sendable {
        var progress: Progress
        var lastCompleted: Int?
        var lastFraction: Double?
        /// When it last moved, in records (for evicting the stalest past `limit`).
        var touched: Int
    }

    /// Bars kept per task: a program that makes a bar per item must not grow the
    /// supervisor without bound. Past it the bar updated longest ago is forgotten (if it
    /// reports again it is new, and so advances once).
    static let limit = 256

    private var bars: [Key: Bar] = [:]
    private var records = 0

    /// Records a progress message; returns the bar's merged progress and whether it advanced.
    mutating func record(_ progress: Progress, from reporter: ReporterID) -> (merged: Progress, advanced: Bool) {
        records += 1
        let key = Key(reporter: reporter, bar: progress.bar)
        guard var bar = bars[key] else {
            if bars.count >= Self.limit, let stalest = bars.min(by: { $0.value.touched < $1.value.touched })?.key {
                bars[stalest] = nil
            }
            bars[key] = Bar(progress: progress, lastCompleted: progress.completed, lastFraction: progress.fraction, touched: records)
            return (progress, true)
        }
        var advanced = false
        if let c = progress.completed {
            if let last = bar.lastCompleted { advanced = c > last } else { advanced = true }
            bar.lastCompleted = c
        }
        if let f = progress.fraction {
            if let last = bar.lastFraction { advanced = advanced || f > last } else { advanced = true }
            bar.lastFraction = f
        }
        bar.progress.merge(progress)
        bar.touched = records
        let merged = bar.progress
        bars[key] = bar
        return (merged, advanced)
    }

    mutating func forget(_ reporter: ReporterID) {
        bars = bars.filter { $0.key.reporter != reporter }
    }

    var count: Int { bars.count }
}
