/// Which clients `/metrics` holds, and whom a new one pushes out. Pure: the loop's side
/// closes the clients named.
///
/// A scrape is one request answered at once, so it holds its slot for milliseconds; a
/// client that holds one for long is idle (no whole request yet) or slow (its answer not
/// taken). A new client therefore never waits or is turned away: it takes the place of the
/// oldest client, which is the one most likely idle or slow. `capacity` bounds the pages
/// queued to clients that do not read; `perPeer` keeps one host from holding every slot,
/// so that clients from the other hosts are not pushed out by it.
public struct MetricsClientSlots<ID: Hashable> {
    /// Connections served at once: each may hold one page in the write queue.
    public let capacity: Int
    /// Connections served at once from one peer (an IPv4 address or an IPv6 /64). Small
    /// enough that one host holds a quarter of the slots at most, so a host opening
    /// connections it does not use pushes out its own, not other hosts' scrapes; large enough
    /// for a Prometheus pair, a curl or two and a federation scrape from one machine at once.
    public let perPeer: Int
    /// The clients, oldest first, with their peer's group.
    private var held: [(id: ID, peer: [UInt8])] = []

    public init(capacity: Int = 32, perPeer: Int = 8) {
        self.capacity = max(1, capacity)
        self.perPeer = max(1, min(perPeer, capacity))
    }

    public var count: Int { held.count }

    /// Takes `id` from `peer` (the address's bytes: 4 for IPv4, 16 for IPv6); returns the
    /// clients it pushes out (they are no longer held), oldest first.
    public mutating func admit(_ id: ID, peer address: [UInt8]) -> [ID] {
        let peer = Self.group(address)
        var pushedOut: [ID] = []
        if held.count(where: { $0.peer == peer }) >= perPeer, let oldest = held.firstIndex(where: { $0.peer == peer }) {
            pushedOut.append(held.remove(at: oldest).id)
        }
        while held.count >= capacity {
            pushedOut.append(held.removeFirst().id)
        }
        held.append((id, peer))
        return pushedOut
    }

    /// `id` is gone (answered, timed out, closed). Harmless for one not held.
    public mutating func remove(_ id: ID) {
        held.removeAll { $0.id == id }
    }

    /// What one host has to itself: an IPv4 address (also written as `::ffff:a.b.c.d`), an
    /// IPv6 /64 (a host picks any address in its /64 at will). Anything else: as given.
    static func group(_ address: [UInt8]) -> [UInt8] {
        guard address.count == 16 else { return address }
        if address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xFF, address[11] == 0xFF { return Array(address[12...]) }
        return Array(address[..<8])
    }
}
