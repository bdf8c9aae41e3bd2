import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// Reporters told apart: names that stick to a connection, closed bars, the furthest behind
/// shown, and what a `timeout` cancel says went quiet. A fake clock throughout.
@Suite struct ReporterProgressTests {
    typealias Harness = TaskMachineTests.Harness

    static let rank0 = ReporterID(1), rank1 = ReporterID(2)

    /// A machine with two more reporters connected, named `rank 0` and `rank 1`.
    static func twoRanks(_ policy: BudgetPolicy = BudgetPolicy(budget: .seconds(30))) -> Harness {
        var h = Harness(policy)
        h.machine.reporterJoined(rank0, pid: 100, now: h.now, into: &h.actions)
        h.machine.reporterJoined(rank1, pid: 101, now: h.now, into: &h.actions)
        h.machine.reporterNamed(rank0, "rank 0")
        h.machine.reporterNamed(rank1, "rank 1")
        return h
    }

    @Test func namesStickToTheConnectionUntilReplacedOrGone() {
        var h = Harness(BudgetPolicy(budget: .seconds(30)))
        #expect(h.machine.name(of: .leader) == "pid 42", "the leader is known by its pid")
        let worker = ReporterID(3)
        h.machine.reporterJoined(worker, pid: nil, now: h.now, into: &h.actions)
        #expect(h.machine.name(of: worker) == "reporter 3", "no pid known: its number")
        h.send(.progress(Progress(completed: 1)), from: worker)
        #expect(h.machine.lastProgress?.reporter == "reporter 3")
        h.machine.reporterNamed(worker, "rank 1")
        #expect(h.machine.lastProgress?.reporter == "rank 1", "a name given later names the bars it already has")
        h.send(.progress(Progress(completed: 2)), from: worker)
        #expect(h.machine.lastProgress?.reporter == "rank 1", "the name sticks")
        h.machine.reporterNamed(worker, "rank 2")
        #expect(h.machine.name(of: worker) == "rank 2", "a later name replaces it")
        h.machine.reporterLeft(worker, into: &h.actions)
        #expect(h.machine.name(of: worker) == "reporter 3", "the name goes with the connection")
        #expect(h.machine.lastProgress?.reporter == "rank 2", "what it showed last stays, named")
    }

    @Test func oneReporterShowsTheBarThatMovedLast() {
        var h = Harness(BudgetPolicy(budget: .seconds(30)))
        h.send(.progress(Progress(completed: 9, total: 10, bar: "a")))
        h.send(.progress(Progress(completed: 1, total: 10, bar: "b")))
        h.send(.progress(Progress(completed: 10, total: 10, bar: "a")))
        #expect(h.machine.lastProgress == Progress(completed: 10, total: 10, bar: "a", reporter: "pid 42"))
    }

    @Test func theFurthestBehindIsShownWithTheCount() {
        var h = Self.twoRanks()
        h.send(.progress(Progress(completed: 40, total: 100)), from: Self.rank1)
        h.send(.progress(Progress(completed: 70, total: 100)), from: Self.rank0)
        #expect(h.machine.lastProgress == Progress(completed: 40, total: 100, reporter: "rank 1", reporting: 2))
        let events = h.actions.compactMap { if case let .emit(.progress(p, _)) = $0 { p } else { nil } }
        #expect(events.last?.reporter == "rank 1", "the event carries the shown reporter")
        h.send(.progress(Progress(completed: 90, total: 100)), from: Self.rank1)
        #expect(h.machine.lastProgress?.reporter == "rank 0", "rank 0 is behind now")
        #expect(h.machine.lastProgress?.completed == 70)
    }

    @Test func aReporterIsJudgedByItsOwnLatestBar() {
        var h = Self.twoRanks()
        h.send(.progress(Progress(completed: 1, total: 100, bar: "epoch")), from: Self.rank0)
        h.send(.progress(Progress(completed: 50, total: 100, bar: "batch")), from: Self.rank0)
        h.send(.progress(Progress(completed: 30, total: 100, bar: "batch")), from: Self.rank1)
        #expect(h.machine.lastProgress?.reporter == "rank 1", "rank 0's epoch bar is not its latest")
    }

    @Test func tiesGoToTheOneThatMovedLongestAgo() {
        var h = Self.twoRanks()
        h.send(.progress(Progress(fraction: 0.5)), from: Self.rank0)
        h.advance(.seconds(1))
        h.send(.progress(Progress(fraction: 0.5)), from: Self.rank1)
        #expect(h.machine.lastProgress?.reporter == "rank 0")
    }

    @Test func aClosedBarIsNotBehind() {
        var h = Self.twoRanks()
        h.send(.progress(Progress(completed: 10, total: 100, title: "tokenize", closed: true)), from: Self.rank0)
        h.send(.progress(Progress(completed: 60, total: 100)), from: Self.rank1)
        #expect(h.machine.lastProgress?.reporter == "rank 1", "only one open bar with a fraction: the one that moved last")
        #expect(h.machine.lastProgress?.reporting == 2)
        h.send(.progress(Progress(completed: 11, total: 100, title: "tokenize")), from: Self.rank0)
        #expect(h.machine.lastProgress?.reporter == "rank 0", "a message on a closed bar opens it again")
    }

    @Test func aReporterLeavingLeavesTheOthers() {
        var h = Self.twoRanks()
        h.send(.progress(Progress(completed: 10, total: 100)), from: Self.rank1)
        h.send(.progress(Progress(completed: 70, total: 100)), from: Self.rank0)
        h.machine.reporterLeft(Self.rank1, into: &h.actions)
        #expect(h.machine.lastProgress == Progress(completed: 70, total: 100, reporter: "rank 0"),
                "one reporter left: no count, the bar that moved last")
    }

    @Test func statusListsEachReporterWithItsLatestBar() {
        var h = Self.twoRanks()
        h.send(.progress(Progress(completed: 5, total: 10, title: "prep", closed: true)), from: Self.rank0)
        h.advance(.seconds(4))
        h.send(.progress(Progress(completed: 3, total: 10)), from: Self.rank1)
        h.advance(.seconds(1))
        let list = h.machine.reporterSummaries(now: h.now)
        #expect(list.map(\.name) == ["pid 42", "rank 0", "rank 1"])
        #expect(list[0].progress == nil && list[0].sinceReport == nil)
        #expect(list[1].closed && list[1].sinceReport == .seconds(5) && list[1].progress?.title == "prep")
        #expect(!list[2].closed && list[2].sinceReport == .seconds(1) && list[2].progress?.completed == 3)
    }

    // MARK: What went quiet

    static let clock = TimeOfDay(wallOffsetNanoseconds: 0, utcOffsetSeconds: 0)

    @Test func aTimeoutAfterAClosedBarNamesItAndWhenItClosed() {
        var h = Harness(BudgetPolicy(budget: .seconds(30), window: .seconds(10)))
        h.machine.timeOfDay = Self.clock
        h.machine.reporterNamed(.leader, "pid 4242")
        h.send(.progress(Progress(completed: 100, total: 100, title: "Tokenizing", closed: true)))
        let closedAt = h.now
        _ = h.take()
        h.run(for: .seconds(31))
        #expect(h.machine.phase == .cancelling(.timeout))
        let silence = ProgressSilence.quiet(ago: .seconds(30), bar: "Tokenizing", reporter: "pid 4242", closedAt: closedAt)
        #expect(h.machine.progressSilence(now: closedAt + .seconds(30)) == silence)
        let why = "last progress 30 s ago, from bar 'Tokenizing' (pid 4242), which closed at \(Self.clock.text(closedAt))"
        #expect(silence.text(clock: Self.clock) == why)
        #expect(h.sent.contains(.cancel(reason: .timeout, grace: 10, why: why)), "the task hears what went quiet")
        #expect(h.actions.contains(.emit(.cancelSent(reason: .timeout, grace: .seconds(10), why: why))))
    }

    @Test func aTimeoutWithoutAnyReportSaysSo() {
        var h = Harness(BudgetPolicy(budget: .seconds(5)))
        h.run(for: .seconds(6))
        #expect(h.machine.progressSilence(now: h.now) == .neverReported)
        #expect(h.sent.contains { if case let .cancel(.timeout, _, why?) = $0 { why.hasPrefix("it never reported progress") } else { false } })
    }

    @Test func aTaskKeptAliveByHeartbeatsIsToldItsLastHeartbeat() {
        var h = Harness(BudgetPolicy(budget: .seconds(5), window: .seconds(2)))
        h.send(.heartbeat)
        h.advance(.seconds(1))
        h.send(.heartbeat)
        h.run(for: .seconds(5))
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(h.machine.progressSilence(now: h.now) == .heartbeat(ago: h.now - (h.machine.startedAt + .seconds(1)), reporter: "pid 42"))
        #expect(ProgressSilence.heartbeat(ago: .milliseconds(4500), reporter: "pid 42").text(clock: Self.clock) == "last report 4.5 s ago, a heartbeat from pid 42")
    }

    @Test func underRequireAdvanceARepeatedCountIsNoLastProgress() {
        var h = Harness(BudgetPolicy(budget: .seconds(5), window: .seconds(2), requireAdvance: true))
        h.send(.progress(Progress(completed: 3, total: 5, title: "loop")))
        let advanced = h.now
        for _ in 0..<10 {
            h.advance(.milliseconds(200))
            h.send(.progress(Progress(completed: 3, total: 5, title: "loop")))   // the same number: no sign of work
        }
        #expect(h.machine.progressSilence(now: h.now) == .quiet(ago: h.now - advanced, bar: "loop", reporter: "pid 42", closedAt: nil))
    }

    @Test func anSdNotifyStatusIsNoReport() {
        var h = Harness(BudgetPolicy(budget: .seconds(5)))
        h.machine.notify(.status("loading"), now: h.now, into: &h.actions)
        #expect(h.machine.progressSilence(now: h.now) == .neverReported, "STATUS= moves no deadline, so it is no sign of life")
        h.machine.notify(.watchdog, now: h.now, into: &h.actions)
        #expect(h.machine.progressSilence(now: h.now) == .heartbeat(ago: .zero, reporter: h.machine.name(of: .notifySocket)))
    }

    @Test func underEveryReporterTheQuietReportersOwnLastReportIsTold() {
        var h = Self.twoRanks(BudgetPolicy(budget: .seconds(5), window: .seconds(1), everyReporter: true))
        h.send(.heartbeat, from: Self.rank1)   // rank 1 only ever sends heartbeats, then hangs
        let rank1Last = h.now
        for step in 1...40 {
            h.run(for: .milliseconds(200))
            if h.machine.phase != .running { break }
            h.send(.progress(Progress(completed: step, total: 100, title: "train")), from: Self.rank0)
        }
        #expect(h.machine.phase == .cancelling(.timeout))
        guard case let .heartbeat(ago, reporter) = h.machine.progressSilence(now: h.now) else {
            Issue.record("rank 1's heartbeat, not rank 0's progress: \(h.machine.progressSilence(now: h.now))")
            return
        }
        #expect(reporter == "rank 1" && ago == h.now - rank1Last)
    }

    @Test func otherReasonsCarryNoWhy() {
        var h = Harness(BudgetPolicy(budget: .seconds(5)))
        _ = h.machine.cancel(reason: .user, now: h.now, into: &h.actions)
        #expect(h.sent.contains(.cancel(reason: .user, grace: 10, why: nil)))
    }

    @Test func theWordingNamesAnOpenBarWithoutAClosingTime() {
        let silence = ProgressSilence.quiet(ago: .milliseconds(2500), bar: nil, reporter: "rank 1", closedAt: nil)
        #expect(silence.text(clock: Self.clock) == "last progress 2.5 s ago, from rank 1")
    }

    @Test func timeOfDayIsLocal() {
        let noon = MonotonicInstant(nanoseconds: 12 * 3600 * 1_000_000_000)
        #expect(TimeOfDay(wallOffsetNanoseconds: 0, utcOffsetSeconds: 0).text(noon) == "12:00:00")
        #expect(TimeOfDay(wallOffsetNanoseconds: 5_000_000_000, utcOffsetSeconds: -13 * 3600).text(noon) == "23:00:05")
    }
}
