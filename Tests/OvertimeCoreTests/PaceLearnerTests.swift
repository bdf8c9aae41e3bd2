import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// The learner's rule on its own: which intervals count, and the window it makes of them.
@Suite struct PaceLearnerTests {
    /// Bounds that never bind, so the rule's own numbers show.
    static let open = LearnedWindows(minimum: .milliseconds(1), maximum: .seconds(100_000))

    /// Records `intervals` (seconds) in `phase`; returns what each record told.
    static func feed(_ learner: inout PaceLearner, _ intervals: [Double], in phase: String = "main") -> [Duration?] {
        intervals.map { learner.record(.seconds(fromDouble: $0), in: phase) }
    }

    static func seconds(_ window: Duration?) -> Double? {
        window.map { ($0.seconds * 1000).rounded() / 1000 }
    }

    @Test func theFirstIntervalsOfAPhaseAreSkipped() {
        var learner = PaceLearner(bounds: Self.open)
        // Two slow warm-up steps, then eight of 0.1 s: the slow ones leave no trace.
        _ = Self.feed(&learner, [50, 50] + Array(repeating: 0.1, count: 8))
        #expect(Self.seconds(learner.window(for: "main")) == 0.3)
    }

    @Test func aWindowNeedsEightKeptIntervals() {
        var learner = PaceLearner(bounds: Self.open)
        let told = Self.feed(&learner, Array(repeating: 0.1, count: PaceLearner.skipped + PaceLearner.needed - 1))
        #expect(told.allSatisfy { $0 == nil })
        #expect(learner.window(for: "main") == nil)
        let learned = learner.record(.milliseconds(100), in: "main")
        #expect(Self.seconds(learned) == 0.3)
        #expect(Self.seconds(learner.window(for: "main")) == 0.3)
    }

    @Test func theWindowIsThreeTimesTheNinetyFifthPercentile() {
        // 64 kept: the 95th percentile is the 61st smallest, so four slow ones of 0.5 s
        // set it, and three do not (then the longest, × 1.5, rules).
        #expect(PaceLearner.percentile95(Array(repeating: 100, count: 60) + Array(repeating: 500, count: 4)) == 500)
        #expect(PaceLearner.percentile95(Array(repeating: 100, count: 61) + Array(repeating: 500, count: 3)) == 100)
        var four = PaceLearner(bounds: Self.open)
        _ = Self.feed(&four, [1, 1] + Array(repeating: 0.1, count: 60) + Array(repeating: 0.5, count: 4))
        #expect(Self.seconds(four.window(for: "main")) == 1.5)
        var three = PaceLearner(bounds: Self.open)
        _ = Self.feed(&three, [1, 1] + Array(repeating: 0.1, count: 61) + Array(repeating: 0.5, count: 3))
        #expect(Self.seconds(three.window(for: "main")) == 0.75)
    }

    @Test func theLongestIntervalKeptIsRememberedWithAMargin() {
        var learner = PaceLearner(bounds: Self.open)
        // One 2 s step among 0.1 s ones: 1.5 × 2 s beats 3 × the percentile (0.3 s), and
        // stays after 200 more fast steps have pushed it out of the percentile's reach.
        _ = Self.feed(&learner, [1, 1] + Array(repeating: 0.1, count: 10) + [2] + Array(repeating: 0.1, count: 200))
        #expect(Self.seconds(learner.window(for: "main")) == 3)
    }

    @Test func theWindowIsClampedToTheBounds() {
        let bounds = LearnedWindows(minimum: .seconds(1), maximum: .seconds(5))
        var fast = PaceLearner(bounds: bounds)
        _ = Self.feed(&fast, Array(repeating: 0.01, count: 10))
        #expect(fast.window(for: "main") == .seconds(1))
        var slow = PaceLearner(bounds: bounds)
        _ = Self.feed(&slow, Array(repeating: 10, count: 10))
        #expect(slow.window(for: "main") == .seconds(5))
        #expect(LearnedWindows.default == LearnedWindows(minimum: .seconds(1), maximum: .seconds(6 * 3600)))
    }

    @Test func eachPhaseLearnsItsOwnPace() {
        var learner = PaceLearner(bounds: Self.open)
        _ = Self.feed(&learner, Array(repeating: 0.1, count: 10), in: "train")
        _ = Self.feed(&learner, Array(repeating: 1, count: 9), in: "eval")
        #expect(Self.seconds(learner.window(for: "train")) == 0.3)
        // Nine in eval: two skipped, seven kept, one short of a window.
        #expect(learner.window(for: "eval") == nil)
    }

    @Test func aSlowerPaceIsLearnedAtOnceAndAFasterOneDownToTheLongest() {
        var learner = PaceLearner(bounds: Self.open)
        _ = Self.feed(&learner, Array(repeating: 0.1, count: 70))
        #expect(Self.seconds(learner.window(for: "main")) == 0.3)
        // Slower: an interval past the percentile recomputes at once. After four of 1 s
        // (one in twenty of the last 64 intervals) the percentile is 1 s.
        _ = Self.feed(&learner, [1, 1, 1])
        #expect(Self.seconds(learner.window(for: "main")) == 1.5)
        _ = Self.feed(&learner, [1])
        #expect(Self.seconds(learner.window(for: "main")) == 3)
        // Faster again: once the slow ones leave the last 64, the percentile falls back, but
        // the longest interval kept (1 s, × 1.5) is never forgotten.
        _ = Self.feed(&learner, Array(repeating: 0.1, count: 70))
        #expect(Self.seconds(learner.window(for: "main")) == 1.5)
    }

    @Test func aWindowIsToldWhenFirstLearnedAndWhenItMovesByMoreThanAFifth() {
        var learner = PaceLearner(bounds: Self.open)
        let first = Self.feed(&learner, Array(repeating: 0.1, count: 10))
        #expect(first.compactMap(Self.seconds) == [0.3])
        // 0.11 s steps: 3 × 0.11 = 0.33 s, a tenth more than told: learned, not told.
        var told = Self.feed(&learner, Array(repeating: 0.11, count: 64))
        #expect(told.allSatisfy { $0 == nil })
        #expect(Self.seconds(learner.window(for: "main")) == 0.33)
        // 0.13 s steps: 0.39 s, 30% over the 0.3 s last told: told once, when it crosses.
        told = Self.feed(&learner, Array(repeating: 0.13, count: 64))
        #expect(told.compactMap(Self.seconds) == [0.39])
        #expect(PaceLearner.changeToTell == 0.2)
    }
}
