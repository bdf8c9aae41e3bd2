import Testing
@testable import OvertimeCore

/// A task's sd_notify socket remembers refused senders for a second and counts what it
/// drops unread from them (docs/protocol.md), on a fake clock.
@Suite struct RefusedSendersTests {
    let stranger = RefusedSenders.Sender(pid: 4242, uid: 65534)
    func at(_ milliseconds: Int64) -> MonotonicInstant { MonotonicInstant(nanoseconds: milliseconds * 1_000_000) }

    @Test func aRefusedSenderIsRememberedForASecondAndItsDatagramsCounted() {
        var senders = RefusedSenders()
        let beforeRefusal = senders.remembers(stranger, now: at(0))
        #expect(!beforeRefusal)
        senders.refused(stranger, now: at(0))
        for ms in stride(from: Int64(1), to: 1000, by: 1) {
            let remembered = senders.remembers(stranger, now: at(ms))
            #expect(remembered)
        }
        #expect(senders.due(now: at(999)).isEmpty, "reported before it was forgotten")
        // A second on, it is checked afresh; what it sent meanwhile is reported once.
        let aSecondOn = senders.remembers(stranger, now: at(1000))
        #expect(!aSecondOn)
        let due = senders.due(now: at(1000))
        #expect(due.count == 1 && due.first?.sender == stranger && due.first?.count == 999)
        #expect(senders.due(now: at(5000)).isEmpty)
    }

    @Test func aRefreshedRefusalKeepsTheCountUntilItIsReported() {
        var senders = RefusedSenders()
        senders.refused(stranger, now: at(0))
        let rememberedAt10 = senders.remembers(stranger, now: at(10))
        #expect(rememberedAt10)
        senders.refused(stranger, now: at(20))
        let rememberedAfterRefresh = senders.remembers(stranger, now: at(900))
        #expect(rememberedAfterRefresh)
        #expect(senders.due(now: at(1010)).isEmpty)
        let all = senders.due(now: nil)
        #expect(all.count == 1 && all.first?.count == 2)
    }

    @Test func theSamePidOfAnotherUserIsAnotherSender() {
        var senders = RefusedSenders()
        senders.refused(stranger, now: at(0))
        let otherUser = senders.remembers(RefusedSenders.Sender(pid: 4242, uid: 0), now: at(1))
        #expect(!otherUser)
        let strangerRemembered = senders.remembers(stranger, now: at(1))
        #expect(strangerRemembered)
    }

    @Test func atTheEndEveryCountIsReportedAndNothingWithoutOne() {
        var senders = RefusedSenders()
        let other = RefusedSenders.Sender(pid: 7, uid: 1000)
        senders.refused(stranger, now: at(0))
        senders.refused(other, now: at(0))
        let otherRemembered = senders.remembers(other, now: at(5))
        #expect(otherRemembered)
        let all = senders.due(now: nil)
        #expect(all.map(\.sender) == [other] && all.map(\.count) == [1])
    }
}
