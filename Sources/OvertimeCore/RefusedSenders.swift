/// Senders a task's sd_notify socket turned away, remembered for `memory` so that a flood
/// from one of them costs one membership check a `memory` (the check reads the task's
/// cgroup and `/proc`), and counted so that one `reporter-refused` event stands for all of
/// its datagrams. Keyed by pid and uid: a pid reused by a process of another user is a new
/// sender, and only refusals are remembered, so no pid is ever let in on an old verdict.
public struct RefusedSenders {
    public static let memory = Duration.seconds(1)

    public struct Sender: Hashable, Sendable {
        public var pid: Int32
        public var uid: UInt32
        public init(pid: Int32, uid: UInt32) {
            self.pid = pid
            self.uid = uid
        }
    }

    private var senders: [Sender: (refusedAt: MonotonicInstant, unreported: Int)] = [:]

    public init() {}

    /// True (and the datagram counted) when `sender` was refused less than `memory` ago.
    public mutating func remembers(_ sender: Sender, now: MonotonicInstant) -> Bool {
        guard let entry = senders[sender], now - entry.refusedAt < Self.memory else { return false }
        senders[sender]?.unreported += 1
        return true
    }

    /// `sender` was checked and refused at `now` (that datagram reported at once).
    public mutating func refused(_ sender: Sender, now: MonotonicInstant) {
        let unreported = senders[sender]?.unreported ?? 0
        senders[sender] = (now, unreported)
    }

    /// The datagrams counted and not yet reported, of the senders whose memory has run out
    /// by `now` (of every sender when `now` is nil), which are then forgotten.
    public mutating func due(now: MonotonicInstant?) -> [(sender: Sender, count: Int)] {
        var due: [(sender: Sender, count: Int)] = []
        for (sender, entry) in senders where now.map({ $0 - entry.refusedAt >= Self.memory }) ?? true {
            senders[sender] = nil
            if entry.unreported > 0 { due.append((sender, entry.unreported)) }
        }
        return due.sorted { $0.sender.pid < $1.sender.pid }
    }
}
