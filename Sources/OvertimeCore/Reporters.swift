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

    /// The bar that moved last, kept out of the dictionary: a message for it (nearly every
    /// message, on the hot path of a chatty task) is recorded with no hashing and no copy.
    private var current: (key: Key, bar: Bar)?
    /// Every other bar.
    private var others: [Key: Bar] = [:]
    private var records = 0
    /// What the bar last shown showed, once its reporter has gone.
    private var shownByGone: Progress?

    /// The merged progress of the bar that moved last; nil before any.
    var lastProgress: Progress? { current?.bar.progress ?? shownByGone }

    /// Records a progress message; returns whether it advanced its bar.
    mutating func record(_ progress: Progress, from reporter: ReporterID) -> Bool {
        records += 1
        if current != nil, current!.key.reporter == reporter, current!.key.bar == progress.bar {
            return Self.update(&current!.bar, with: progress, at: records)
        }
        if let previous = current {
            others[previous.key] = previous.bar
        }
        let key = Key(reporter: reporter, bar: progress.bar)
        if var bar = others.removeValue(forKey: key) {
            let advanced = Self.update(&bar, with: progress, at: records)
            current = (key, bar)
            return advanced
        }
        if others.count >= Self.limit - 1, let stalest = others.min(by: { $0.value.touched < $1.value.touched })?.key {
            others[stalest] = nil
        }
        current = (key, Bar(progress: progress, lastCompleted: progress.completed, lastFraction: progress.fraction, touched: records))
        return true
    }

    /// Judges `progress` against the bar's previous message, then merges it in.
    private static func update(_ bar: inout Bar, with progress: Progress, at record: Int) -> Bool {
        var advanced = false
        if let c = progress.completed {
            advanced = bar.lastCompleted.map { c > $0 } ?? true
            bar.lastCompleted = c
        }
        if let f = progress.fraction {
            advanced = (bar.lastFraction.map { f > $0 } ?? true) || advanced
            bar.lastFraction = f
        }
        bar.progress.merge(progress)
        bar.touched = record
        return advanced
    }

    /// A reporter's bars go; what the last one shown showed stays as the task's progress.
    mutating func forget(_ reporter: ReporterID) {
        others = others.filter { $0.key.reporter != reporter }
        if let shown = current, shown.key.reporter == reporter {
            shownByGone = shown.bar.progress
            current = nil
        }
    }
}
