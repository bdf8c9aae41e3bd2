/// Learns a task's window from its own pace, phase by phase (`--window auto`).
///
/// The rule, for each phase:
/// - The first `skipped` intervals between reports are not learned from: a phase's first
///   steps compile, fill caches and warm up, and are slower than the rest.
/// - Once `needed` intervals are kept, the window is
///   `max(margin × the 95th percentile of the last `kept` intervals, longestMargin × the
///   longest interval kept)`, within the bounds the user gave (`LearnedWindows`).
///   The percentile follows the pace as it changes; the longest interval remembers a slow
///   step that comes back (every epoch's first, a periodic log flush).
/// - Until then the window the task would have anyway rules (the budget, by default).
///
/// The executor does not feed it every interval: one that follows a boundary (a phase
/// entered, a bar closed) is not a step's pace (`PhaseWatch` learns those apart). One that
/// ended a stall (`--on-stall warn`) is learned at once, warm-up or not: the task was
/// slower than its window, not hung, and a step that is sometimes that slow must widen it.
public struct PaceLearner: Sendable, Equatable {
    /// Intervals at a phase's start not learned from.
    public static let skipped = 2
    /// Intervals kept before a window is learned.
    public static let needed = 8
    /// The most recent intervals the percentile is taken over.
    public static let kept = 64
    /// How far above the 95th percentile of recent intervals the window sits.
    public static let margin = 3.0
    /// How far above the longest interval kept the window sits.
    public static let longestMargin = 1.5
    /// How much a learned window must move before it is told again (an event), as a share.
    public static let changeToTell = 0.2

    public let bounds: LearnedWindows
    private var phases: [String: PhasePace] = [:]

    /// One phase's intervals, in nanoseconds.
    struct PhasePace: Sendable, Equatable {
        var seen = 0
        var recent: [Int64] = []
        var next = 0
        var longest: Int64 = 0
        /// The window learned, and the one last told.
        var window: Duration?
        var told: Duration?
        /// The 95th percentile as last computed: a longer interval recomputes at once.
        var percentile: Int64 = 0
    }

    public init(bounds: LearnedWindows) {
        self.bounds = bounds
    }

    /// The learned window of `phase`; nil before enough of its pace is seen.
    public func window(for phase: String) -> Duration? {
        phases[phase]?.window
    }

    /// Records one interval between two reports in `phase`. Returns the window when it was
    /// learned for the first time or moved by more than `changeToTell` since last told.
    /// - Parameter endedStall: the interval ended a stall: learned at once.
    public mutating func record(_ interval: Duration, in phase: String, endedStall: Bool = false) -> Duration? {
        // In place in the dictionary: a copy taken out would copy its intervals each time.
        Self.record(interval, endedStall: endedStall, bounds: bounds, into: &phases[phase, default: PhasePace()])
    }

    private static func record(_ interval: Duration, endedStall: Bool, bounds: LearnedWindows, into pace: inout PhasePace) -> Duration? {
        pace.seen += 1
        guard pace.seen > skipped || endedStall else { return nil }
        let ns = max(0, interval.nanoseconds)
        if pace.recent.count < kept {
            pace.recent.append(ns)
        } else {
            pace.recent[pace.next] = ns
            pace.next = (pace.next + 1) % kept
        }
        pace.longest = max(pace.longest, ns)
        guard pace.recent.count >= needed else { return nil }
        // Sorting 64 numbers is cheap, but a step's report is the hottest input there is:
        // recompute every eighth interval, and at once for one past the percentile.
        guard pace.window == nil || ns > pace.percentile || pace.seen % 8 == 0 || endedStall else { return nil }
        pace.percentile = percentile95(pace.recent)
        let learned = max(margin * Double(pace.percentile), longestMargin * Double(pace.longest))
        let window = min(max(Duration.nanoseconds(Int64(min(learned, 9e18))), bounds.minimum), bounds.maximum)
        pace.window = window
        if let told = pace.told, abs((window - told).seconds) <= changeToTell * told.seconds { return nil }
        pace.told = window
        return window
    }

    static func percentile95(_ values: [Int64]) -> Int64 {
        let sorted = values.sorted()
        let rank = Int((Double(sorted.count) * 0.95).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }
}
