/// A job file's `stragglers`: how far below its peers' pace a running task may fall before
/// it is flagged, and what is done then (docs/jobfile.md, Stragglers).
public struct StragglerPolicy: Sendable, Equatable {
    public enum Action: String, Sendable, Equatable, CaseIterable {
        /// A `straggler` event; the task goes on.
        case warn
        /// The event, then a cancel with reason `straggler` and a new attempt that does not
        /// use up the task's `retries`; once per task per run (a second time it is warned of).
        case restart
    }

    /// A task whose rate is below this share of its peers' median is a straggler; in (0, 1).
    public var below: Double
    public var action: Action
    /// Each peer is compared only once it has run this long (and reported a share done):
    /// a start-up (loading data, compiling) is not its pace.
    public var warmUp: Duration

    public static let defaultBelow = 0.5
    public static let defaultWarmUp = Duration.seconds(60)

    public init(below: Double = StragglerPolicy.defaultBelow, action: Action = .warn, warmUp: Duration = StragglerPolicy.defaultWarmUp) {
        self.below = below
        self.action = action
        self.warmUp = warmUp
    }
}

/// Which running tasks of a batch are stragglers, decided from their reported share done: a
/// pure value, fed what happens and asked on a tick (`check(now:)`), unit-tested with a fake
/// clock.
///
/// A task's rate is the share of its work done per second since its attempt started. In a
/// group (a sweep's or array's running elements, or the tasks that name one `peer-group`)
/// with at least `minimumPeers` members past their warm-up that have reported a share, a
/// member whose rate is below `below` × the median of those members' rates is flagged, once
/// per attempt. The median takes the member itself in: with three peers, one slow task
/// cannot drag the median down to its own pace.
public struct StragglerWatch: Sendable {
    /// A task found to be a straggler.
    public struct Flag: Sendable, Equatable {
        /// The element, as the batch numbers it.
        public var element: Int
        /// Its rate and its group's median, in share done per second.
        public var rate: Double
        public var median: Double
        public var below: Double
        /// Its policy says `restart` and it was not restarted before in this run.
        public var restart: Bool
    }

    private struct Member: Sendable {
        var group: Int
        var policy: StragglerPolicy
        var startedAt: MonotonicInstant
        var fraction: Double?
        var flagged = false
    }

    /// Fewer running peers past their warm-up than this say nothing of a pace.
    public static let minimumPeers = 3

    /// Running members, by element.
    private var members: [Int: Member] = [:]
    private var groupNumbers: [String: Int] = [:]
    /// Elements restarted as stragglers in this run: never again.
    private var restarted: Set<Int> = []

    public init() {}

    /// Element `element` started an attempt, as a member of `group` under `policy`.
    public mutating func started(_ element: Int, group: String, policy: StragglerPolicy, at now: MonotonicInstant) {
        let number = groupNumbers[group] ?? groupNumbers.count
        groupNumbers[group] = number
        members[element] = Member(group: number, policy: policy, startedAt: now)
    }

    /// Element `element` reported `fraction` of its work done (nil: a progress with no share).
    public mutating func progressed(_ element: Int, fraction: Double?) {
        guard let fraction, fraction.isFinite else { return }
        members[element]?.fraction = min(1, max(0, fraction))
    }

    /// Element `element`'s attempt ended.
    public mutating func ended(_ element: Int) {
        members[element] = nil
    }

    /// Whether element `element` is watched now (it runs and is in a group).
    public func isWatching(_ element: Int) -> Bool {
        members[element] != nil
    }

    /// The members found to be stragglers now, in element order; each is flagged once per
    /// attempt.
    public mutating func check(now: MonotonicInstant) -> [Flag] {
        var rates: [Int: [(element: Int, rate: Double)]] = [:]
        for (element, member) in members {
            let elapsed = (now - member.startedAt).seconds
            guard let fraction = member.fraction, elapsed > 0, now - member.startedAt >= member.policy.warmUp else { continue }
            rates[member.group, default: []].append((element, fraction / elapsed))
        }
        var flags: [Flag] = []
        for peers in rates.values where peers.count >= Self.minimumPeers {
            let sorted = peers.map(\.rate).sorted()
            let middle = sorted.count / 2
            let median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
            guard median > 0 else { continue }
            for (element, rate) in peers {
                guard let member = members[element], !member.flagged, rate < member.policy.below * median else { continue }
                members[element]!.flagged = true
                let restart = member.policy.action == .restart && !restarted.contains(element)
                if restart { restarted.insert(element) }
                flags.append(Flag(element: element, rate: rate, median: median, below: member.policy.below, restart: restart))
            }
        }
        return flags.sorted { $0.element < $1.element }
    }
}
