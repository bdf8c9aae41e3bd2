import OvertimeProtocol

/// What went quiet before a `timeout`: the last report that moved the deadline (how long
/// ago, from which reporter, on which bar and whether that bar had closed, or that it was a
/// heartbeat), or that the task never sent one. Only reports that count: under
/// `require-advance` a progress message that did not advance is no sign of work, nor is an
/// sd_notify `STATUS=`. Decided by the task machine at the cancel, worded here for the
/// `cancel` message's `why`, the `cancel-sent` event and everything that shows them.
public enum ProgressSilence: Sendable, Equatable {
    /// No report that counts ever came.
    case neverReported
    /// The last progress that counted came `ago` before the cancel, on `bar` (its title,
    /// else its id; nil for an untitled reporter's only bar) from `reporter`; `closedAt`
    /// when a message had closed it.
    case quiet(ago: Duration, bar: String?, reporter: String, closedAt: MonotonicInstant?)
    /// The last report that counted was a heartbeat, `ago` before the cancel.
    case heartbeat(ago: Duration, reporter: String)

    /// The part after the reason: `last progress 10 s ago, from bar 'Tokenizing' (pid 4242),
    /// which closed at 15:03:45`. Times of day come from `clock`.
    public func text(clock: TimeOfDay) -> String {
        switch self {
        case .neverReported:
            return "it never reported progress; see docs/frameworks.md for what reports with no code change"
        case let .quiet(ago, bar, reporter, closedAt):
            let source = bar.map { "bar '\($0)' (\(reporter))" } ?? reporter
            var text = "last progress \(Self.seconds(ago)) ago, from \(source)"
            if let closedAt { text += ", which closed at \(clock.text(closedAt))" }
            return text
        case let .heartbeat(ago, reporter):
            return "last report \(Self.seconds(ago)) ago, a heartbeat from \(reporter)"
        }
    }

    /// Whole seconds, or tenths under ten: `0.4 s`, `12 s`.
    static func seconds(_ d: Duration) -> String {
        let s = max(0, d.seconds)
        if s < 10 { return "\((s * 10).rounded() / 10) s" }
        return "\(Int(s.rounded())) s"
    }
}

/// Turns monotonic instants into the local time of day, as the display shows times: the
/// wall clock's offset from the monotonic one and the local zone's offset from UTC, both
/// read once by whoever builds it (the core reads no clock).
public struct TimeOfDay: Sendable, Equatable {
    public var wallOffsetNanoseconds: Int64
    public var utcOffsetSeconds: Int

    public init(wallOffsetNanoseconds: Int64, utcOffsetSeconds: Int) {
        self.wallOffsetNanoseconds = wallOffsetNanoseconds
        self.utcOffsetSeconds = utcOffsetSeconds
    }

    /// `HH:MM:SS`, local.
    public func text(_ instant: MonotonicInstant) -> String {
        let wall = (instant.nanoseconds &+ wallOffsetNanoseconds) / 1_000_000_000 + Int64(utcOffsetSeconds)
        let day = Int(((wall % 86_400) + 86_400) % 86_400)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(day / 3600)):\(two(day / 60 % 60)):\(two(day % 60))"
    }
}
