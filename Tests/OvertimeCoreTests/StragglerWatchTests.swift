import Testing
@testable import OvertimeCore

/// The straggler decision on a fake clock: warm-up, the peer count, the median, once per
/// attempt, and one restart per task per run.
@Suite struct StragglerWatchTests {
    static func at(_ seconds: Double) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: Int64(seconds * 1e9))
    }

    /// Four elements of one sweep started at 0 under `policy`; element 2 at a quarter of the
    /// others' pace, each reporting its share at `time`.
    static func sweep(_ policy: StragglerPolicy, reportAt time: Double, into watch: inout StragglerWatch) {
        for element in 0..<4 {
            watch.started(element, group: "train", policy: policy, at: at(0))
            watch.progressed(element, fraction: element == 2 ? time / 400 : time / 100)
        }
    }

    @Test func theSlowElementAloneIsFlaggedAfterItsWarmUp() {
        var watch = StragglerWatch()
        let policy = StragglerPolicy(below: 0.5, action: .warn, warmUp: .seconds(10))
        Self.sweep(policy, reportAt: 5, into: &watch)
        #expect(watch.check(now: Self.at(5)).isEmpty, "within the warm-up nobody is judged")
        Self.sweep(policy, reportAt: 10, into: &watch)
        let flags = watch.check(now: Self.at(10))
        #expect(flags.map(\.element) == [2])
        let flag = flags[0]
        #expect(abs(flag.rate - 0.0025) < 1e-9 && abs(flag.median - 0.01) < 1e-9, "rate is the share done per second since the start")
        #expect(flag.below == 0.5 && !flag.restart)
        #expect(watch.check(now: Self.at(12)).isEmpty, "flagged once per attempt")
    }

    @Test func fewerThanThreePeersSayNothing() {
        var watch = StragglerWatch()
        let policy = StragglerPolicy(below: 0.5, warmUp: .seconds(1))
        watch.started(0, group: "g", policy: policy, at: Self.at(0))
        watch.started(1, group: "g", policy: policy, at: Self.at(0))
        watch.progressed(0, fraction: 0.5)
        watch.progressed(1, fraction: 0.01)
        #expect(watch.check(now: Self.at(5)).isEmpty)
        // A third peer that never reported a share is not counted either.
        watch.started(2, group: "g", policy: policy, at: Self.at(0))
        #expect(watch.check(now: Self.at(5)).isEmpty)
        watch.progressed(2, fraction: 0.5)
        #expect(watch.check(now: Self.at(5)).map(\.element) == [1])
    }

    @Test func groupsAreJudgedApart() {
        var watch = StragglerWatch()
        let policy = StragglerPolicy(below: 0.5, warmUp: .seconds(1))
        // A slow group of three alike, a fast group of three alike: nobody is a straggler.
        for element in 0..<3 {
            watch.started(element, group: "slow", policy: policy, at: Self.at(0))
            watch.progressed(element, fraction: 0.01)
            watch.started(10 + element, group: "fast", policy: policy, at: Self.at(0))
            watch.progressed(10 + element, fraction: 0.9)
        }
        #expect(watch.check(now: Self.at(5)).isEmpty)
    }

    @Test func anEndedMemberLeavesItsGroup() {
        var watch = StragglerWatch()
        let policy = StragglerPolicy(below: 0.5, warmUp: .seconds(1))
        Self.sweep(policy, reportAt: 4, into: &watch)
        watch.ended(0)
        watch.ended(1)
        #expect(watch.check(now: Self.at(4)).isEmpty, "two left running: no pace to compare with")
        #expect(!watch.isWatching(0) && watch.isWatching(2))
    }

    @Test func aLateStarterIsJudgedFromItsOwnStart() {
        var watch = StragglerWatch()
        let policy = StragglerPolicy(below: 0.5, warmUp: .seconds(2))
        for element in 0..<3 {
            watch.started(element, group: "g", policy: policy, at: Self.at(0))
            watch.progressed(element, fraction: 0.5)
        }
        // Started at 8 s, half done at 10 s: as fast as the others (0.5 in 10 s is slower).
        watch.started(3, group: "g", policy: policy, at: Self.at(8))
        watch.progressed(3, fraction: 0.5)
        #expect(watch.check(now: Self.at(10)).isEmpty)
    }

    @Test func aTaskIsRestartedOncePerRunAndWarnedOfAfter() {
        var watch = StragglerWatch()
        let policy = StragglerPolicy(below: 0.5, action: .restart, warmUp: .seconds(1))
        Self.sweep(policy, reportAt: 4, into: &watch)
        let first = watch.check(now: Self.at(4))
        #expect(first.map(\.element) == [2] && first.map(\.restart) == [true])
        // Its next attempt is slow again: flagged (a new attempt), not restarted again.
        watch.ended(2)
        watch.started(2, group: "train", policy: policy, at: Self.at(0))
        watch.progressed(2, fraction: 0.01)
        let again = watch.check(now: Self.at(4))
        #expect(again.map(\.element) == [2] && again.map(\.restart) == [false])
    }

    @Test func aShareOutOfRangeIsClampedAndNaNIgnored() {
        var watch = StragglerWatch()
        let policy = StragglerPolicy(below: 0.5, warmUp: .seconds(1))
        for element in 0..<3 {
            watch.started(element, group: "g", policy: policy, at: Self.at(0))
            watch.progressed(element, fraction: 7)
        }
        watch.progressed(0, fraction: .nan)
        #expect(watch.check(now: Self.at(2)).isEmpty, "every peer at 1.0: alike")
    }
}
