@testable import OvertimeLoop
import Testing

// The pacing's rule on a fake clock: it paces only light wake-ups that come a thousand a
// second or more, never delays a poll past the quantum, not at all when work is pending,
// and stops once they thin out or grow heavy.
@Suite struct WakeupPacingTests {
    /// A loop on a fake clock: each wake-up waits `wait` in its poll, then works `work`.
    struct FakeLoop {
        var pacing = WakeupPacing()
        var now: UInt64 = 1_000_000_000
        var idle: UInt64 = 0
        var pauses: [UInt64] = []

        /// One turn: the poll's wait, the callbacks' work, then the pacing's decision (and
        /// its sleep, taken whole).
        mutating func turn(wait: UInt64, work: UInt64, pollTimeout: Int32 = -1) -> UInt64 {
            now += wait
            idle += wait
            now += work
            let pause = pacing.beforePoll(now: now, idle: idle, pollTimeout: pollTimeout)
            if pause > 0 {
                now += pause
                pacing.slept(until: now)
            }
            pauses.append(pause)
            return pause
        }

        /// A loop already paced: 30 ms of light wake-ups, 100 µs apart, 10 µs of work each.
        static func paced() throws -> FakeLoop {
            var loop = FakeLoop()
            for _ in 0..<300 { _ = loop.turn(wait: 90_000, work: 10_000) }
            try #require(loop.pacing.pacing, "30 ms of light wake-ups did not start pacing")
            return loop
        }
    }

    @Test("10,000 light wake-ups a second: paced after one window, each poll a quantum apart")
    func lightAndFrequentIsPaced() {
        var loop = FakeLoop()
        // 100 µs apart, 10 µs of work each: 30 ms of them.
        for _ in 0..<300 { _ = loop.turn(wait: 90_000, work: 10_000) }
        #expect(loop.pacing.pacing)
        // Once pacing, the next poll waits out the quantum: its wait and work were 100 µs.
        let pause = loop.turn(wait: 90_000, work: 10_000)
        #expect(pause == WakeupPacing.quantum - 100_000)
        // No sleep ever longer than a quantum.
        #expect(loop.pauses.allSatisfy { $0 <= WakeupPacing.quantum })
    }

    @Test("the first window is never paced, however busy")
    func firstWindowIsNotPaced() {
        var loop = FakeLoop()
        for _ in 0..<150 { #expect(loop.turn(wait: 90_000, work: 10_000) == 0) }
    }

    @Test("a loop busy most of the time (a batch spawning tasks) is never paced, however often it wakes")
    func heavyWorkIsNotPaced() {
        var loop = FakeLoop()
        // 300 µs of work each, 100 µs apart: spawns and reaps.
        for _ in 0..<500 { #expect(loop.turn(wait: 100_000, work: 300_000) == 0) }
        #expect(!loop.pacing.pacing)
    }

    @Test("wake-ups fewer than a thousand a second are never paced")
    func sparseWakeupsAreNotPaced() {
        var loop = FakeLoop()
        // 2 ms apart: 500 a second, 10 in a window.
        for _ in 0..<100 { #expect(loop.turn(wait: 1_990_000, work: 10_000) == 0) }
        #expect(!loop.pacing.pacing)
    }

    @Test("pending work (a zero poll timeout) cancels the sleep; a later timer leaves it as it is")
    func pendingWorkCancelsTheSleep() throws {
        var loop = try FakeLoop.paced()
        // Due in 0 ms (libuv's timeout for "run this now"): no sleep.
        #expect(loop.turn(wait: 90_000, work: 10_000, pollTimeout: 0) == 0)
        // The quantum's end is 900 µs off, but no timer limits it below a millisecond...
        #expect(loop.turn(wait: 90_000, work: 10_000, pollTimeout: 5) == WakeupPacing.quantum - 100_000)
        // ... and a poll that came after a whole quantum is not delayed.
        #expect(loop.turn(wait: 1_200_000, work: 10_000, pollTimeout: 5) == 0)
    }

    @Test("pacing stops within a window of the wake-ups thinning out")
    func pacingStopsWhenQuiet() throws {
        var loop = try FakeLoop.paced()
        // Then one wake-up every 5 ms: at most one more window paced.
        for _ in 0..<10 { _ = loop.turn(wait: 5_000_000, work: 10_000) }
        #expect(!loop.pacing.pacing)
        // After a quiet spell the first poll is never delayed.
        #expect(loop.turn(wait: 50_000_000, work: 10_000) == 0)
    }

    @Test("the sleep is not counted as work: a paced loop stays paced")
    func sleepIsNotWork() throws {
        // Light wake-ups: after pacing starts, each turn's wait shrinks (the events piled up
        // during the sleep), but its sleep (up to 900 µs) must not make it look heavy.
        var loop = try FakeLoop.paced()
        for _ in 0..<200 {
            _ = loop.turn(wait: 1_000, work: 30_000)
            // Paced, the loop polls once a quantum: a thousand a second, which keeps it paced
            // (it would otherwise stop and start again window after window).
            #expect(loop.pacing.pacing)
        }
    }

    @Test("a paced loop whose wake-ups turn heavy stops pacing within a window")
    func heavierWorkStopsPacing() throws {
        var loop = try FakeLoop.paced()
        // 900 µs of work in each 1 ms quantum: busy nine tenths of the time.
        for _ in 0..<60 { _ = loop.turn(wait: 1_000, work: 900_000) }
        #expect(!loop.pacing.pacing)
    }
}
