/// A point on the monotonic clock, in nanoseconds. Budgets never use wall-clock time, so
/// a clock step (NTP, a suspended VM) cannot cancel or spare a task.
public struct MonotonicInstant: Comparable, Hashable, Sendable {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    public static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func + (a: Self, d: Duration) -> Self {
        Self(nanoseconds: a.nanoseconds.addingSaturating(d.nanoseconds))
    }

    public static func - (a: Self, d: Duration) -> Self {
        Self(nanoseconds: a.nanoseconds.addingSaturating(-d.nanoseconds))
    }

    public static func - (a: Self, b: Self) -> Duration {
        .nanoseconds(a.nanoseconds.addingSaturating(-b.nanoseconds))
    }
}

extension Duration {
    /// This duration in whole nanoseconds, saturating at Int64's range (about 292 years).
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled.addingSaturating(attoseconds / 1_000_000_000)
    }

    /// This duration in seconds, as the protocol and reports write it.
    public var seconds: Double {
        Double(nanoseconds) / 1e9
    }

    /// A duration of `seconds`, saturating for values beyond Int64 nanoseconds.
    public static func seconds(fromDouble seconds: Double) -> Duration {
        let ns = seconds * 1e9
        if !(ns < 9.2e18) { return .nanoseconds(Int64.max) }
        if !(ns > -9.2e18) { return .nanoseconds(Int64.min) }
        return .nanoseconds(Int64(ns))
    }
}

extension Int64 {
    func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if overflow { return other > 0 ? .max : .min }
        return sum
    }
}

/// The earlier of two instants (or durations) either of which may be missing: nil only when
/// both are. For limits of which the first to come rules.
func earlier<T: Comparable>(_ a: T?, _ b: T?) -> T? {
    guard let a, let b else { return a ?? b }
    return min(a, b)
}

/// The later of two that may be missing: nil only when both are.
func later<T: Comparable>(_ a: T?, _ b: T?) -> T? {
    guard let a, let b else { return a ?? b }
    return max(a, b)
}
