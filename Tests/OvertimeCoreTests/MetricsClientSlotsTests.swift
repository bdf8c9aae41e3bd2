import Testing
@testable import OvertimeCore

/// Whom a new `/metrics` client pushes out (docs/metrics.md): the oldest, its own host's
/// oldest once the host holds its share.
@Suite struct MetricsClientSlotsTests {
    let hostA: [UInt8] = [127, 0, 0, 1]
    let hostB: [UInt8] = [10, 0, 0, 2]
    let hostC: [UInt8] = [10, 0, 0, 3]

    @Test func aNewClientIsNeverRefusedAndPushesOutTheOldest() {
        var slots = MetricsClientSlots<Int>(capacity: 3, perPeer: 3)
        #expect(slots.admit(1, peer: hostA) == [])
        #expect(slots.admit(2, peer: hostB) == [])
        #expect(slots.admit(3, peer: hostC) == [])
        #expect(slots.admit(4, peer: hostC) == [1])
        slots.remove(3)
        #expect(slots.admit(5, peer: hostA) == [])
        #expect(slots.admit(6, peer: hostA) == [2])
        #expect(slots.count == 3)
    }

    @Test func aHostAtItsShareCannotPushOutAnotherHost() {
        var slots = MetricsClientSlots<Int>(capacity: 4, perPeer: 2)
        #expect(slots.admit(1, peer: hostB) == [])
        for id in 2...20 {
            let pushedOut = slots.admit(id, peer: hostA)
            #expect(!pushedOut.contains(1), "host A pushed out host B's client")
        }
        #expect(slots.count == 3)
        // The scrape from host B still gets its place while host A holds its share.
        #expect(slots.admit(21, peer: hostB) == [])
        #expect(slots.admit(22, peer: hostC) == [1])
    }

    @Test func removingWhatIsNotHeldIsHarmless() {
        var slots = MetricsClientSlots<Int>(capacity: 2)
        slots.remove(9)
        #expect(slots.admit(1, peer: hostA) == [])
        slots.remove(1)
        slots.remove(1)
        #expect(slots.count == 0)
    }

    @Test func oneHostIsAnIPv4AddressOrAnIPv6Slash64() {
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1]
        #expect(MetricsClientSlots<Int>.group(mapped) == hostA)
        let one: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1] + [UInt8](repeating: 1, count: 8)
        let sameSlash64: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1] + [UInt8](repeating: 7, count: 8)
        let otherSlash64: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 2] + [UInt8](repeating: 1, count: 8)
        #expect(MetricsClientSlots<Int>.group(one) == MetricsClientSlots<Int>.group(sameSlash64))
        #expect(MetricsClientSlots<Int>.group(one) != MetricsClientSlots<Int>.group(otherSlash64))

        var slots = MetricsClientSlots<Int>(capacity: 8, perPeer: 1)
        #expect(slots.admit(1, peer: one) == [])
        #expect(slots.admit(2, peer: sameSlash64) == [1])
        #expect(slots.admit(3, peer: otherSlash64) == [])
        #expect(slots.admit(4, peer: hostA) == [])
        #expect(slots.admit(5, peer: mapped) == [4])
    }
}
