/// Why a task is being cancelled; the words travel on the wire and appear in reports.
public enum CancelReason: String, Sendable, CaseIterable, Hashable {
    /// The deadline passed because progress stopped (or never came).
    case timeout
    /// `max-runtime` was reached.
    case deadline
    /// An operator or a policy revoked the budget and the revoked time ran out.
    case revoked
    /// An operator cancelled it (`overtime ctl cancel`, Ctrl-C to the supervisor).
    case user
    /// The supervisor itself is stopping.
    case shutdown
    /// It never started: something it depends on failed (queues only).
    case dependency
    /// A sibling failed under `--fail-fast` (queues only).
    case failFast = "fail-fast"
    /// Its memory reached `memory-max` (DESIGN §7).
    case memory
    /// In a batch, its pace fell far below its peers' and `stragglers` says `restart`: it
    /// is retried.
    case straggler
}

/// A progress report: units done and total, or a fraction, with an optional title and detail.
///
/// Every progress message is copied several times between the decoder and the events, in
/// values that hold it with a little more (the `progress` event, with the time left; the
/// machine's actions). Past 128 bytes Swift copies such a value with a call to `memcpy`
/// rather than a few moves, a quarter more work a message; so the fields are laid out to
/// keep those within it: `closed` and the reporting count sit in the padding after
/// `completed`, and `fraction` is kept as its bits, with one pattern no fraction has for
/// none (8 bytes, where a `Double?` takes 16). ProgressLayoutTests checks the sizes.
public struct Progress: Sendable, Equatable {
    public var completed: Int?
    /// The bar is finished (tqdm's close, the end of an epoch); a later message on it opens
    /// it again.
    public var closed: Bool
    /// `reporting`, 0 for none.
    private var reportingCount: UInt32
    public var total: Int?
    /// `fraction`'s bit pattern, `Self.noFraction` for none.
    private var fractionBits: UInt64
    public var title: String?
    public var detail: String?
    /// Which of its reporter's bars this is (DESIGN §3): any string; nil for a reporter's
    /// only bar.
    public var bar: String?
    /// The process this progress came from, as the supervisor names it: what its connection
    /// said in `reporter`, else `pid N` or `reporter N`. Set by the supervisor, not read
    /// from a task's progress message.
    public var reporter: String?

    private static let noFraction = UInt64.max   // a NaN's pattern that no arithmetic makes

    /// Bits compared as numbers compare: -0 is kept as 0.
    private static func bits(_ fraction: Double?) -> UInt64 {
        guard let fraction else { return noFraction }
        return (fraction == 0 ? 0 : fraction).bitPattern
    }

    public var fraction: Double? {
        get { fractionBits == Self.noFraction ? nil : Double(bitPattern: fractionBits) }
        set { fractionBits = Self.bits(newValue) }
    }

    /// How many of the task's reporters report progress, when more than one does (set by
    /// the supervisor on what a task shows).
    public var reporting: Int? {
        get { reportingCount == 0 ? nil : Int(reportingCount) }
        set { reportingCount = newValue.map { UInt32(clamping: max(0, $0)) } ?? 0 }
    }

    public init(completed: Int? = nil, total: Int? = nil, fraction: Double? = nil, title: String? = nil, detail: String? = nil,
                bar: String? = nil, closed: Bool = false, reporter: String? = nil, reporting: Int? = nil) {
        self.completed = completed
        self.closed = closed
        reportingCount = 0
        self.total = total
        fractionBits = Self.bits(fraction)
        self.title = title
        self.detail = detail
        self.bar = bar
        self.reporter = reporter
        self.reporting = reporting
    }

    /// The share done, 0…1, from `fraction` or from `completed`/`total`; nil when unknown.
    public var fractionCompleted: Double? {
        if let fraction { return fraction }
        if let completed, let total, total > 0 { return min(1, Double(completed) / Double(total)) }
        return nil
    }

    /// Takes the fields `newer` carries and keeps the rest: a task may send its total and
    /// title once and then only `completed`.
    public mutating func merge(_ newer: Progress) {
        if newer.completed != nil || newer.total != nil {
            if let completed = newer.completed { self.completed = completed }
            if let total = newer.total { self.total = total }
            fraction = newer.fraction
        } else if let fraction = newer.fraction {
            self.fraction = fraction
        }
        if let title = newer.title { self.title = title }
        if let detail = newer.detail { self.detail = detail }
        closed = newer.closed
    }
}

/// A message a task sends to its supervisor on fd 3.
public enum ChildMessage: Sendable, Equatable {
    /// Progress; counts as a heartbeat.
    case progress(Progress)
    /// Proof of life, nothing more.
    case heartbeat
    /// A request for `seconds` more time, answered with `budget`.
    case extend(seconds: Double, why: String?)
    /// The task is up (for services; queues may wait for it).
    case ready
    /// The task's return value; the last one wins.
    case result(JSONValue)
    /// The task entered the part of its work called `name` (`compile`, `validation`,
    /// `checkpoint`); until its next phase message, that phase's window rules. `window`
    /// is the task's own for it, in seconds (0: no soft limit in this phase; nil: the
    /// window the task would have anyway). Counts as a heartbeat.
    case phase(name: String, window: Double?)
}

/// A message the supervisor sends to a task on fd 3.
public enum SupervisorMessage: Sendable, Equatable {
    /// What is left of the budget, in seconds (nil: unlimited). `granted` answers an `extend`.
    case budget(remaining: Double?, granted: Bool?)
    /// The deadline is `remaining` seconds away: time to checkpoint.
    case expiring(remaining: Double)
    /// The task is being cancelled; SIGTERM follows, SIGKILL after `grace` seconds. `why`
    /// says more in words (for a `timeout`: what went quiet, and when).
    case cancel(reason: CancelReason, grace: Double, why: String? = nil)
    /// A resource (`"memory"`) first passed its warning level: `used` of `limit` bytes, the
    /// limit being where the task is cancelled (DESIGN §7). Time to checkpoint or shrink.
    case warning(resource: String, used: UInt64, limit: UInt64)
    /// Advice, sent once: `action` (`"checkpoint"`) now, since the task's pace says its work
    /// will not be done before its hard end, `remaining` seconds away. `why` says so in words.
    case advice(action: String, remaining: Double, why: String)
}
