import OvertimeProtocol

/// One process's connection to its task's supervisor: the leader's fd 3, or a connection
/// to the task's `OVERTIME_SOCKET` (DESIGN §3a). Numbered by the supervisor, the leader 0.
public struct ReporterID: Hashable, Sendable, CustomStringConvertible {
    public let number: Int
    public init(_ number: Int) { self.number = number }
    public static let leader = ReporterID(0)
    public var description: String { "reporter \(number)" }
}

/// What a reporter's name says.
public enum ReporterName {
    /// The rank a reporter named itself by (`rank 3` is "3"), as the worker libraries name
    /// a distributed job's processes; nil for any other name.
    public static func rank(_ name: String) -> String? {
        guard name.hasPrefix("rank ") else { return nil }
        let number = name.dropFirst(5)
        return !number.isEmpty && number.allSatisfy(\.isASCII) && number.allSatisfy(\.isNumber) ? String(number) : nil
    }
}

/// One reporter as `status` lists it: its name, its own latest bar, how long ago that moved.
public struct ReporterSummary: Sendable, Equatable {
    public var name: String
    /// Its own bar that moved last; nil before it reported progress.
    public var progress: Progress?
    public var sinceReport: Duration?
    public var closed: Bool

    public init(name: String, progress: Progress?, sinceReport: Duration?, closed: Bool) {
        self.name = name
        self.progress = progress
        self.sinceReport = sinceReport
        self.closed = closed
    }
}

/// A task's progress bars, each known by its reporter and its `bar` id (nil: the reporter's
/// only bar). Each holds its merged progress (a bar may send its title once, then only
/// counts) and its previous message's count, which `require-advance` judges against: a
/// message advances when its bar is new or its `completed` or `fraction` is above that
/// bar's previous one. A bar that starts again lower (a new epoch) neither counts nor
/// harms, and its next step up counts; a loop re-sending one number never advances.
///
/// What the task shows: with one reporter, the bar that moved last. While two or more
/// reporters each have an open bar with a fraction as their own latest, the one furthest
/// behind (the lowest fraction; of equals, the one that moved longest ago), so that the
/// slowest rank of a distributed job is the one in sight.
struct BarTable: Sendable {
    struct Key: Hashable, Sendable {
        var reporter: ReporterID
        var bar: String?
    }

    struct Bar: Sendable {
        /// Its merged progress, named for its reporter (`Progress.reporter`).
        var progress: Progress
        var lastCompleted: Int?
        var lastFraction: Double?
        /// When it last moved, in records (for evicting the stalest past `limit`, and for
        /// ties among the furthest behind).
        var touched: Int
        var movedAt: MonotonicInstant
        /// When a message closed it; nil while open.
        var closedAt: MonotonicInstant?
        /// When a message on it last counted (moved, or would move, the deadline: under
        /// require-advance, only one that advanced); nil before any did.
        var countedAt: MonotonicInstant?
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
    /// The bar that moved last, once its reporter has gone.
    private var lastByGone: Bar?
    /// Each reporter's own bar that moved last. Changed only when another bar than
    /// `current` moves, so the hot path leaves it alone.
    private var latest: [ReporterID: Key] = [:]
    /// What reporters called themselves, or what the supervisor knows them by (`pid N`).
    private var names: [ReporterID: String] = [:]

    /// The name `reporter` goes by: its own, its pid's, or its number's.
    func name(of reporter: ReporterID) -> String { names[reporter] ?? reporter.description }

    /// The bar that moved last (of a reporter still here, or of the last to leave).
    var lastMoved: Bar? { current?.bar ?? lastByGone }

    /// The merged progress of the bar that moved last; nil before any.
    var lastProgress: Progress? { current?.bar.progress ?? lastByGone?.progress }

    /// How many reporters have progress among their bars.
    var reportingCount: Int { latest.count }

    /// What the task shows (see the type's comment), with how many reporters report
    /// progress when more than one does.
    var shown: Progress? {
        guard latest.count > 1 else { return lastProgress }
        var behind: (fraction: Double, bar: Bar)?
        var open = 0
        for key in latest.values {
            guard let bar = bar(at: key), !bar.progress.closed, let fraction = bar.progress.fractionCompleted else { continue }
            open += 1
            if let b = behind, (b.fraction, b.bar.touched) < (fraction, bar.touched) { continue }
            behind = (fraction, bar)
        }
        var shown = open > 1 ? behind?.bar.progress : lastProgress
        shown?.reporting = latest.count
        return shown
    }

    /// Each reporter's own bar that moved last.
    func latestBar(of reporter: ReporterID) -> Bar? {
        latest[reporter].flatMap(bar(at:))
    }

    /// The bar just recorded counted (TaskMachine decides: it knows require-advance).
    mutating func markCounted(at now: MonotonicInstant) {
        current?.bar.countedAt = now
    }

    /// The bar whose message counted last, of every reporter's or of one's (a scan: asked
    /// only when a task is cancelled). A bar of a reporter that has gone may be the one, as
    /// the task's last progress stays.
    func lastCounted(of reporter: ReporterID?) -> Bar? {
        var last = reporter == nil ? lastByGone.flatMap { $0.countedAt == nil ? nil : $0 } : nil
        func consider(_ bar: Bar) {
            guard let at = bar.countedAt, last.map({ at > $0.countedAt! }) ?? true else { return }
            last = bar
        }
        if let current, reporter == nil || current.key.reporter == reporter { consider(current.bar) }
        for (key, bar) in others where reporter == nil || key.reporter == reporter { consider(bar) }
        return last
    }

    private func bar(at key: Key) -> Bar? {
        if let current, current.key == key { return current.bar }
        return others[key]
    }

    /// Names `reporter`: what it called itself, or `pid N` for a connection whose peer is
    /// known. Its bars carry the new name.
    mutating func name(_ reporter: ReporterID, _ name: String) {
        guard names[reporter] != name else { return }
        names[reporter] = name
        if current?.key.reporter == reporter { current!.bar.progress.reporter = name }
        for key in others.keys where key.reporter == reporter { others[key]!.progress.reporter = name }
    }

    /// Names `reporter` as the supervisor knows it, unless it has a name already.
    mutating func nameUnnamed(_ reporter: ReporterID, _ name: String) {
        if names[reporter] == nil { self.name(reporter, name) }
    }

    /// Records a progress message; returns whether it advanced its bar.
    mutating func record(_ progress: Progress, from reporter: ReporterID, now: MonotonicInstant) -> Bool {
        records += 1
        if current != nil, current!.key.reporter == reporter, current!.key.bar == progress.bar {
            return Self.update(&current!.bar, with: progress, at: records, now: now)
        }
        if let previous = current {
            others[previous.key] = previous.bar
        }
        let key = Key(reporter: reporter, bar: progress.bar)
        latest[reporter] = key
        if var bar = others.removeValue(forKey: key) {
            let advanced = Self.update(&bar, with: progress, at: records, now: now)
            current = (key, bar)
            return advanced
        }
        if others.count >= Self.limit - 1, let stalest = others.min(by: { $0.value.touched < $1.value.touched })?.key {
            others[stalest] = nil
            if latest[stalest.reporter] == stalest { latest[stalest.reporter] = nil }
        }
        var shown = progress
        shown.reporter = name(of: reporter)
        current = (key, Bar(progress: shown, lastCompleted: progress.completed, lastFraction: progress.fraction, touched: records,
                            movedAt: now, closedAt: progress.closed ? now : nil))
        return true
    }

    /// Judges `progress` against the bar's previous message, then merges it in.
    private static func update(_ bar: inout Bar, with progress: Progress, at record: Int, now: MonotonicInstant) -> Bool {
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
        bar.movedAt = now
        if progress.closed {
            if bar.closedAt == nil { bar.closedAt = now }
        } else if bar.closedAt != nil {
            bar.closedAt = nil
        }
        return advanced
    }

    /// A reporter's bars and name go; the last bar that moved stays as the task's progress.
    mutating func forget(_ reporter: ReporterID) {
        others = others.filter { $0.key.reporter != reporter }
        latest[reporter] = nil
        names[reporter] = nil
        if let shown = current, shown.key.reporter == reporter {
            lastByGone = shown.bar
            current = nil
        }
    }
}
