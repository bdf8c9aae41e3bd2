import OvertimeProtocol
import OvertimeTestSupport
import Testing
@testable import OvertimeCore

/// `every-reporter`: each reporter that has reported keeps its own deadline, and the
/// earliest among those connected is in force (docs/protocol.md), on a fake clock.
@Suite struct EveryReporterTests {
    typealias Harness = TaskMachineTests.Harness
    static let rank = ReporterID(1)

    /// Budget 5 s, window 1 s; the leader and `rank` both report every 0.5 s until 6 s,
    /// then only the leader does.
    static func oneRankStops(_ policy: BudgetPolicy) -> Harness {
        var h = Harness(policy)
        h.machine.reporterJoined(rank, now: h.now, into: &h.actions)
        for step in 1...12 {
            h.run(for: .milliseconds(500))
            h.send(.progress(Progress(completed: step)))
            h.send(.progress(Progress(completed: step)), from: rank)
        }
        _ = h.take()
        return h
    }

    static func policy(requireAdvance: Bool = false, window: Duration? = .seconds(1), everyReporter: Bool = true) -> BudgetPolicy {
        BudgetPolicy(budget: .seconds(5), window: window, grace: .seconds(1), requireAdvance: requireAdvance, everyReporter: everyReporter)
    }

    /// The leader keeps reporting every 0.2 s for `duration`.
    static func leaderReports(_ h: inout Harness, for duration: Duration, from first: Int = 100) {
        var step = first
        let end = h.now + duration
        while h.now < end, h.machine.phase == .running {
            h.run(for: .milliseconds(200))
            step += 1
            h.send(.progress(Progress(completed: step)))
        }
    }

    static func quiet(_ actions: [TaskMachine.Action]) -> [String] {
        actions.compactMap { if case let .emit(.reporterQuiet(name)) = $0 { name } else { nil } }
    }

    @Test func aRankThatStopsIsCancelledAtItsOwnDeadlineAndNamed() {
        var h = Self.oneRankStops(Self.policy())
        let stopped = h.now
        Self.leaderReports(&h, for: .milliseconds(800))
        #expect(h.machine.phase == .running)
        Self.leaderReports(&h, for: .milliseconds(400))
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(h.now - stopped <= .milliseconds(1200), "cancelled one window after the rank's last report")
        let events = h.actions.compactMap { if case let .emit(kind) = $0 { kind } else { nil } }
        let cancel = events.firstIndex { if case let .cancelSent(reason, grace, _) = $0 { reason == .timeout && grace == Duration.seconds(1) } else { false } }
        let named = events.firstIndex(of: .reporterQuiet(name: Self.rank.description))
        #expect(cancel != nil && named != nil && cancel! < named!, "the quiet reporter follows the cancel it explains: \(events)")
    }

    @Test func withoutTheFlagAnyReporterKeepsTheTaskAlive() {
        var h = Self.oneRankStops(Self.policy(everyReporter: false))
        Self.leaderReports(&h, for: .seconds(20))
        #expect(h.machine.phase == .running)
        #expect(Self.quiet(h.actions).isEmpty)
    }

    @Test func aRankThatDisconnectsStopsCounting() {
        var h = Self.oneRankStops(Self.policy())
        h.run(for: .milliseconds(500))
        h.send(.progress(Progress(completed: 99)))
        h.machine.reporterLeft(Self.rank, into: &h.actions)
        Self.leaderReports(&h, for: .seconds(20))
        #expect(h.machine.phase == .running)
        #expect(h.machine.reporterRemaining(at: h.now).map(\.reporter) == [.leader])
    }

    @Test func theLeadersChannelClosingStopsItCounting() {
        var h = Self.oneRankStops(Self.policy())
        h.machine.reporterLeft(.leader, into: &h.actions)
        for step in 1...40 {
            h.run(for: .milliseconds(500))
            h.send(.progress(Progress(completed: 100 + step)), from: Self.rank)
        }
        #expect(h.machine.phase == .running)
    }

    @Test func beforeAnyReportTheBudgetRules() {
        var h = Harness(Self.policy())
        h.machine.reporterJoined(Self.rank, now: h.now, into: &h.actions)
        h.run(for: .milliseconds(4900))
        #expect(h.machine.phase == .running)
        h.run(for: .milliseconds(200))
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(Self.quiet(h.actions).isEmpty, "nobody's own deadline passed: the task's did")
    }

    @Test func aFirstReportStartsFromTheTasksDeadline() {
        var h = Harness(Self.policy())
        h.machine.reporterJoined(Self.rank, now: h.now, into: &h.actions)
        h.run(for: .seconds(1))
        h.send(.heartbeat, from: Self.rank)
        #expect(h.machine.remaining(at: h.now) == .seconds(4), "the budget still holds for a rank that reported once")
        Self.leaderReports(&h, for: .seconds(3.8))
        #expect(h.machine.phase == .running)
        Self.leaderReports(&h, for: .milliseconds(400))
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(Self.quiet(h.actions) == [Self.rank.description])
    }

    @Test func anExtendRaisesEveryReportersDeadline() {
        // The task's own extend, from the leader: the rank's deadline rises with it.
        var h = Self.oneRankStops(Self.policy())
        h.send(.extend(seconds: 10, why: nil))
        Self.leaderReports(&h, for: .seconds(9.8))
        #expect(h.machine.phase == .running)
        Self.leaderReports(&h, for: .milliseconds(400))
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(Self.quiet(h.actions) == [Self.rank.description])

        // An operator's.
        h = Self.oneRankStops(Self.policy())
        let result = h.machine.operatorExtend(by: .seconds(10), pastMax: false, now: h.now, into: &h.actions)
        #expect(result == .applied(remaining: .seconds(11), clipped: false))
        Self.leaderReports(&h, for: .seconds(10.8))
        #expect(h.machine.phase == .running)
        Self.leaderReports(&h, for: .milliseconds(400))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func aRevokeOverridesThemAll() {
        var h = Self.oneRankStops(Self.policy())
        _ = h.machine.revoke(after: .seconds(3), now: h.now, into: &h.actions)
        #expect(h.machine.reporterRemaining(at: h.now).isEmpty)
        Self.leaderReports(&h, for: .seconds(2.8))
        #expect(h.machine.phase == .running, "the rank's own deadline no longer counts")
        Self.leaderReports(&h, for: .milliseconds(400))
        #expect(h.machine.phase == .cancelling(.revoked))
        #expect(Self.quiet(h.actions).isEmpty)
    }

    @Test func underRequireAdvanceOnlyAnAdvanceCounts() {
        var h = Self.oneRankStops(Self.policy(requireAdvance: true))
        let stopped = h.now
        var step = 100
        while h.machine.phase == .running, h.now - stopped < .seconds(5) {
            h.run(for: .milliseconds(200))
            step += 1
            h.send(.progress(Progress(completed: step)))
            h.send(.progress(Progress(completed: 12)), from: Self.rank)
            h.send(.heartbeat, from: Self.rank)
        }
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(h.now - stopped <= .milliseconds(1200), "a rank re-sending one number is quiet")
        #expect(Self.quiet(h.actions) == [Self.rank.description])
    }

    @Test func anUnlimitedWindowLiftsItAsBefore() {
        var h = Self.oneRankStops(Self.policy(window: BudgetPolicy.unlimitedWindow))
        Self.leaderReports(&h, for: .seconds(20))
        h.run(for: .seconds(60))
        #expect(h.machine.phase == .running)
        #expect(h.machine.deadline == nil)
    }

    @Test func theHardLimitHoldsAndIsNoReportersFault() {
        var policy = Self.policy()
        policy.maxRuntime = .seconds(7)
        var h = Self.oneRankStops(policy)
        h.send(.extend(seconds: 60, why: nil))
        Self.leaderReports(&h, for: .seconds(2))
        #expect(h.machine.phase == .cancelling(.deadline))
        #expect(Self.quiet(h.actions).isEmpty)
    }

    @Test func theWatchdogIsTheNotifySocketsReport() {
        var h = Harness(Self.policy())
        for _ in 1...12 {
            h.run(for: .milliseconds(500))
            h.machine.notify(.watchdog, now: h.now, into: &h.actions)
            h.send(.heartbeat)
        }
        Self.leaderReports(&h, for: .seconds(2))
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(Self.quiet(h.actions) == [ReporterID.notifySocket.description])
    }

    @Test func theStatusListsEachReportersTimeLeftTheLeastFirst() {
        var h = Self.oneRankStops(Self.policy())
        h.run(for: .milliseconds(300))
        h.send(.heartbeat)
        let left = h.machine.reporterRemaining(at: h.now)
        #expect(left.map(\.reporter) == [Self.rank, .leader])
        #expect(left.map(\.remaining) == [.milliseconds(700), .seconds(1)])
        #expect(h.machine.remaining(at: h.now) == .milliseconds(700))
    }

    /// The earliest deadline kept as reports come matches a look at every one, whatever the
    /// order of reports, extends and departures.
    @Test func theEarliestIsAlwaysTheLeast() {
        var dice = TestDice(state: 29)
        var deadlines = ReporterDeadlines()
        var all: [ReporterID: MonotonicInstant] = [:]
        var now = MonotonicInstant(nanoseconds: 0)
        for _ in 0..<5000 {
            now = now + .milliseconds(dice.roll(50))
            let reporter = ReporterID(dice.roll(6))
            switch dice.roll(20) {
            case 0:
                let target = now + .milliseconds(dice.roll(3000))
                deadlines.raise(to: target)
                for (r, d) in all where d < target { all[r] = target }
            case 1, 2:
                deadlines.remove(reporter)
                all[reporter] = nil
            default:
                let candidate = now + .seconds(1)
                let start = now + .milliseconds(dice.roll(2000))
                deadlines.reported(reporter, candidate: candidate, start: start)
                all[reporter] = max(all[reporter] ?? start, candidate)
            }
            let least = all.min { ($0.value, $0.key.number) < ($1.value, $1.key.number) }
            #expect(deadlines.earliest?.reporter == least?.key && deadlines.earliest?.deadline == least?.value)
        }
    }
}
