import Overtime
import Synchronization

/// The first few of a repeated remark, then at most one per `interval`, counting those held
/// back in between: a client hammering the control socket, or a task asking for more time
/// in a loop, must not flood stderr (or the log it goes to).
struct RepeatAllowance: Sendable, Equatable {
    let shownFreely: Int
    let interval: Duration
    private(set) var seen = 0
    private var held = 0
    private var lastShown: MonotonicInstant?

    init(shownFreely: Int, interval: Duration) {
        self.shownFreely = shownFreely
        self.interval = interval
    }

    /// nil to hold this occurrence back; else how many were held back since the last one shown.
    mutating func admit(at now: MonotonicInstant) -> Int? {
        seen += 1
        if seen > shownFreely, let lastShown, now - lastShown < interval {
            held += 1
            return nil
        }
        defer { held = 0; lastShown = now }
        return held
    }
}

/// `RepeatAllowance` for a remark said from any thread, with the words that tell a reader
/// some are held back.
final class RepeatLimiter: Sendable {
    static let shownFreely = 3
    static let interval = Duration.seconds(60)

    private let allowance = Mutex(RepeatAllowance(shownFreely: RepeatLimiter.shownFreely, interval: RepeatLimiter.interval))

    /// A handler for a remark that may come in a flood (a refused control connection):
    /// each occurrence it lets through goes to `say`.
    static func passing(to say: @escaping @Sendable (String) -> Void) -> @Sendable (String) -> Void {
        let limiter = RepeatLimiter()
        return { text in
            if let shown = limiter.admit(text) { say(shown) }
        }
    }

    /// What to show for this occurrence of the remark, or nil to hold it back.
    func admit(_ text: String, now: MonotonicInstant = .now()) -> String? {
        allowance.withLock { allowance in
            guard let heldBack = allowance.admit(at: now) else { return nil }
            if allowance.seen == Self.shownFreely { return text + " (more of these: at most one a minute)" }
            return heldBack > 0 ? text + " (and \(heldBack) more since the last one shown)" : text
        }
    }
}
