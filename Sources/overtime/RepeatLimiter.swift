import Overtime
import Synchronization

/// Lets the first few of a repeated remark through, then at most one a minute, saying how
/// many were held back: a client hammering the control socket must not flood stderr (or
/// the log it goes to).
final class RepeatLimiter: Sendable {
    static let shownFreely = 3
    static let interval = Duration.seconds(60)

    private struct State: Sendable {
        var seen = 0
        var held = 0
        var lastShown: MonotonicInstant?
    }

    private let state = Mutex(State())

    /// What to show for this occurrence of the remark, or nil to hold it back.
    func admit(_ text: String, now: MonotonicInstant = .now()) -> String? {
        state.withLock { state in
            state.seen += 1
            if state.seen <= Self.shownFreely {
                state.lastShown = now
                return state.seen == Self.shownFreely ? text + " (more of these: at most one a minute)" : text
            }
            if let last = state.lastShown, now - last < Self.interval {
                state.held += 1
                return nil
            }
            defer { state.held = 0; state.lastShown = now }
            return state.held > 0 ? text + " (and \(state.held) more since the last one shown)" : text
        }
    }
}
