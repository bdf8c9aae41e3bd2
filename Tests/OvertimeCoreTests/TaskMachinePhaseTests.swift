import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// Phases, learned windows, `--on-stall warn` and the checkpoint advice, on a fake clock.
@Suite struct TaskMachinePhaseTests {
    typealias Harness = TaskMachineTests.Harness

    static func step(_ n: Int, of total: Int = 1000, closed: Bool = false) -> ChildMessage {
        .progress(Progress(completed: n, total: total, closed: closed))
    }

    func events(_ h: Harness) -> [TaskEvent.Kind] {
        h.actions.compactMap { if case let .emit(kind) = $0 { kind } else { nil } }
    }

    // MARK: Phases

    @Test func aWindowSetFromOutsideRulesItsPhaseAndTheNextPhaseTakesOverAtOnce() {
        var policy = BudgetPolicy(budget: .seconds(3))
        policy.phaseWindows = ["compile": .seconds(20)]
        var h = Harness(policy)
        h.send(.phase(name: "compile", window: nil))
        #expect(events(h).contains(.phase(name: "compile", window: .seconds(20))))
        h.run(for: .seconds(15))
        #expect(h.machine.phase == .running)
        #expect(h.machine.phaseName == "compile")
        // Leaving compile, the budget's 3 s rules again from now: not compile's 20 s.
        h.send(.phase(name: "train", window: nil))
        h.run(for: .seconds(2.9))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(0.2))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func theTasksOwnWindowRulesItsPhaseUnlessOneIsSetFromOutside() {
        var h = Harness(BudgetPolicy(budget: .seconds(3)))
        h.send(.phase(name: "eval", window: 20))
        h.run(for: .seconds(19.9))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(0.2))
        #expect(h.machine.phase == .cancelling(.timeout))

        var policy = BudgetPolicy(budget: .seconds(3))
        policy.phaseWindows = ["eval": .seconds(5)]
        var outside = Harness(policy)
        outside.send(.phase(name: "eval", window: 20))
        outside.run(for: .seconds(5.1))
        #expect(outside.machine.phase == .cancelling(.timeout))
    }

    @Test func aPhaseWithoutLimitLiftsTheSoftDeadlineUntilTheNextPhase() {
        var h = Harness(BudgetPolicy(budget: .seconds(3)))
        h.send(.phase(name: "eval", window: 0))
        #expect(h.machine.deadline == nil)
        h.run(for: .seconds(100))
        #expect(h.machine.phase == .running)
        h.send(.phase(name: "train", window: nil))
        #expect(h.machine.remaining(at: h.now) == .seconds(3))
        h.run(for: .seconds(3.1))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func anExtendIsNotTakenBackByTheNextPhasesShorterWindow() {
        var h = Harness(BudgetPolicy(budget: .seconds(3)))
        h.send(.extend(seconds: 60, why: "loading"))
        h.send(.phase(name: "train", window: 1))
        h.run(for: .seconds(59))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(1.1))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func theSamePhaseAgainIsAReportNotAChange() {
        var h = Harness(BudgetPolicy(budget: .seconds(3)))
        h.send(.phase(name: "train", window: nil))
        _ = h.take()
        h.advance(.seconds(2))
        h.send(.phase(name: "train", window: nil))
        #expect(events(h).isEmpty)
        #expect(h.machine.remaining(at: h.now) == .seconds(3))
    }

    @Test func anSdNotifyPhaseIsAPhase() {
        let parsed = Notification.parse(Array("OVERTIME_PHASE=checkpoint\nOVERTIME_PHASE=\n".utf8))
        #expect(parsed.notifications == [.phase("checkpoint")])
        #expect(parsed.problems.count == 1)
        var h = Harness(BudgetPolicy(budget: .seconds(3)))
        h.machine.notify(.phase("checkpoint"), now: h.now, into: &h.actions)
        #expect(h.machine.phaseName == "checkpoint")
    }

    // MARK: Learned windows

    /// `--window auto` with a 3 s budget, steps every 0.2 s.
    static func learning() -> Harness {
        var policy = BudgetPolicy(budget: .seconds(3))
        policy.learnedWindows = .default
        return Harness(policy)
    }

    @Test func stepsEveryFifthOfASecondLearnTheShortestWindowAndAHangIsCaughtWithinIt() {
        var h = Self.learning()
        // The first report ends the start, no step: one more than the intervals needed.
        for n in 1...(PaceLearner.skipped + PaceLearner.needed + 1) {
            h.advance(.milliseconds(200))
            h.send(Self.step(n))
        }
        #expect(events(h).contains(.windowLearned(phase: PhaseNames.initial, window: .seconds(1))))
        #expect(h.machine.windowInForce.window == .seconds(1))
        #expect(h.machine.windowInForce.learned)
        // The budget's 3 s no longer rules: a hang is caught 1 s after the last step.
        h.run(for: .seconds(0.99))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(0.02))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func beforeItIsLearnedTheBudgetRules() {
        var h = Self.learning()
        for n in 1...5 {
            h.advance(.milliseconds(200))
            h.send(Self.step(n))
        }
        h.run(for: .seconds(2.9))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(0.2))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func aClosedBarIsABoundaryTheNextBarsFirstStepMayTakeTheBudget() {
        var h = Self.learning()
        for n in 1...20 {
            h.advance(.milliseconds(200))
            h.send(Self.step(n, closed: n == 20))
        }
        // An evaluation of 2.5 s between epochs: longer than the learned 1 s, within 3 s.
        h.run(for: .seconds(2.5))
        #expect(h.machine.phase == .running)
        h.send(Self.step(1))
        // Not learned from: the next step is held to the learned window again.
        #expect(h.machine.windowInForce.window == .seconds(1))
        h.run(for: .seconds(1.01))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func eachPhaseLearnsItsOwnPace() {
        var h = Self.learning()
        h.send(.phase(name: "train", window: nil))
        for n in 1...12 {
            h.advance(.milliseconds(200))
            h.send(Self.step(n))
        }
        h.send(.phase(name: "eval", window: nil))
        for n in 1...12 {
            h.advance(.milliseconds(900))
            h.send(Self.step(n))
        }
        #expect(events(h).contains(.windowLearned(phase: "eval", window: .milliseconds(2700))))
        h.send(.phase(name: "train", window: nil))
        h.advance(.milliseconds(200))
        h.send(Self.step(13))
        #expect(h.machine.windowInForce.window == .seconds(1))
    }

    // MARK: Stalls

    static func warning(diagnoseLimit: Duration? = nil, maxRuntime: Duration? = nil) -> Harness {
        var policy = BudgetPolicy(budget: .seconds(2), maxRuntime: maxRuntime)
        policy.onStall = .warn
        policy.diagnoseLimit = diagnoseLimit
        return Harness(policy)
    }

    @Test func underWarnAPassedDeadlineMarksTheTaskStalledAndItsNextReportResumesIt() {
        var h = Self.warning()
        h.advance(.seconds(1))
        h.send(Self.step(1))
        _ = h.take()
        h.run(for: .seconds(2.1))
        #expect(h.machine.phase == .running)
        #expect(h.signals.isEmpty)
        #expect(h.machine.stalledSince != nil)
        #expect(events(h).contains { if case let .stalled(quiet, _) = $0 { quiet == .seconds(2) } else { false } })
        #expect(h.machine.nextWake == nil)
        _ = h.take()
        h.run(for: .seconds(4))
        h.send(Self.step(2))
        #expect(events(h).contains(.resumed(after: .milliseconds(4100))))
        #expect(h.machine.stalledSince == nil)
        #expect(h.machine.remaining(at: h.now) == .seconds(2))
    }

    @Test func aStallRunsTheDiagnoseCommandOnceAndCutsItAtItsLimitWithoutACancel() {
        var h = Self.warning(diagnoseLimit: .seconds(3))
        _ = h.take()
        h.run(for: .seconds(2.1))
        #expect(h.actions.filter { $0 == .diagnose }.count == 1)
        _ = h.take()
        h.run(for: .seconds(3))
        #expect(h.actions == [.endDiagnosis(.limitReached)])
        #expect(h.machine.phase == .running)
    }

    @Test func aStalledTaskIsEndedByItsMaxRuntime() {
        var h = Self.warning(diagnoseLimit: .seconds(30), maxRuntime: .seconds(6))
        h.run(for: .seconds(5))
        #expect(h.machine.stalledSince != nil)
        _ = h.take()
        h.run(for: .seconds(1.1))
        #expect(h.machine.phase == .cancelling(.deadline))
        #expect(h.actions.first == .endDiagnosis(.preempted))
    }

    // MARK: The checkpoint advice

    @Test func aTaskThatCannotFinishIsAdvisedOnceAtTheLeadBeforeMaxRuntime() {
        var policy = BudgetPolicy(budget: .seconds(30), maxRuntime: .seconds(60))
        policy.checkpointLead = .seconds(10)
        var h = Harness(policy)
        for second in stride(from: 5, through: 45, by: 5) {
            h.run(for: .seconds(5))
            h.send(.progress(Progress(fraction: Double(second) / 200)))
        }
        _ = h.take()
        h.run(for: .seconds(4.9))
        #expect(h.sent.isEmpty)
        h.run(for: .seconds(0.2))
        let advice = h.addressed.first { if case .advice = $0.0 { true } else { false } }
        #expect(advice?.1 == .everyReporter)
        guard case let .advice(action, remaining, why)? = advice?.0 else {
            Issue.record("no advice")
            return
        }
        #expect(action == "checkpoint")
        #expect(remaining == 10)
        #expect(why.hasPrefix("max-runtime is 10s away; at its pace the work needs about"))
        _ = h.take()
        h.run(for: .seconds(5))
        #expect(h.sent.isEmpty)
    }

    @Test func aTaskWhosePaceFinishesInTimeIsNotAdvised() {
        var policy = BudgetPolicy(budget: .seconds(30), maxRuntime: .seconds(60))
        policy.checkpointLead = .seconds(10)
        var h = Harness(policy)
        for second in stride(from: 5, through: 50, by: 5) {
            h.run(for: .seconds(5))
            h.send(.progress(Progress(fraction: Double(second) / 55)))
        }
        h.run(for: .seconds(4))
        let advice = h.actions.filter { if case .send(.advice, _) = $0 { true } else { false } }
        #expect(advice.isEmpty, "\(advice)")
    }

    @Test func aTaskWhoseShareDoneStartedOverIsAdvisedWhateverItsBarsPace() {
        var policy = BudgetPolicy(budget: .seconds(60), maxRuntime: .seconds(60))
        policy.checkpointLead = .seconds(10)
        var h = Harness(policy)
        // A bar an epoch: the second epoch's bar alone would be done by 55 s, but the work
        // is more than one bar.
        for (second, fraction) in [(5, 0.5), (10, 1.0), (15, 0.1), (45, 0.8)] {
            h.run(for: .seconds(second) - (h.now - h.machine.startedAt))
            h.send(.progress(Progress(fraction: fraction)))
        }
        _ = h.take()
        h.run(for: .seconds(5.1))
        guard case let .advice(_, _, why)? = h.sent.first else {
            Issue.record("no advice: \(h.actions)")
            return
        }
        #expect(why.contains("started over"), "\(why)")
    }

    @Test func theLongestCheckpointPhaseSetsTheLeadWithNoOption() {
        var h = Harness(BudgetPolicy(budget: nil, maxRuntime: .seconds(60)))
        h.send(.phase(name: "train", window: nil))
        h.run(for: .seconds(5))
        h.send(.phase(name: PhaseNames.checkpoint, window: nil))
        h.run(for: .seconds(4))
        h.send(.phase(name: "train", window: nil))
        // Lead: 1.5 × 4 s = 6 s before max-runtime; no share done reported, so the work's
        // end is not known.
        _ = h.take()
        h.run(for: .seconds(44.9))
        #expect(!h.actions.contains { if case .send(.advice, _) = $0 { true } else { false } })
        h.run(for: .seconds(0.2))
        #expect(h.actions.contains { if case .send(.advice, _) = $0 { true } else { false } })
    }

    @Test func theEnginesEndAdvisesAtOnceWhenItIsInsideTheLead() {
        var policy = BudgetPolicy(budget: .seconds(300))
        policy.checkpointLead = .seconds(120)
        var h = Harness(policy)
        h.run(for: .seconds(10))
        _ = h.take()
        h.machine.engineExpiring(remaining: .seconds(60), source: .slurm, now: h.now, into: &h.actions)
        guard case let .advice(_, remaining, why)? = h.sent.last else {
            Issue.record("no advice: \(h.sent)")
            return
        }
        #expect(remaining == 60)
        #expect(why.hasPrefix("the engine's end"))
    }

    @Test func phasesAreWrittenFreelyWhereFrequentEventsAreThinned() {
        var throttle = FrequentEventThrottle(interval: .milliseconds(100))
        let task = TaskRef(id: 1, name: "fit")
        let at = MonotonicInstant(nanoseconds: 1_000_000_000)
        let written = (0..<200).filter { i in
            throttle.admits(TaskEvent(task: task, time: at, kind: .phase(name: i % 2 == 0 ? "train" : "validation", window: nil)))
        }
        #expect(written.count == 200)
    }

    // MARK: The wire

    @Test func phaseAndAdviceMessagesRoundTrip() throws {
        let phase = ChildMessage.phase(name: "checkpoint", window: 90)
        #expect(try ChildMessage.decode(phase.encoded()) == phase)
        #expect(try ChildMessage.decode(Array(#"{"type":"phase","name":"x"}"#.utf8)) == .phase(name: "x", window: nil))
        #expect(throws: ProtocolError.self) { try ChildMessage.decode(Array(#"{"type":"phase"}"#.utf8)) }
        #expect(throws: ProtocolError.self) { try ChildMessage.decode(Array(#"{"type":"phase","name":"x","window":-1}"#.utf8)) }
        let advice = SupervisorMessage.advice(action: "checkpoint", remaining: 12.5, why: "max-runtime")
        let line = advice.encoded()
        #expect(try line.withUnsafeBytes { try SupervisorMessage.decode(UnsafeRawBufferPointer(rebasing: $0.dropLast())) } == advice)
    }

    @Test func windowAutoReadsItsRange() throws {
        #expect(try WindowSetting.parse("auto") == .learned(.default))
        #expect(try WindowSetting.parse("auto:0.5s..2m") == .learned(LearnedWindows(minimum: .milliseconds(500), maximum: .seconds(120))))
        #expect(try WindowSetting.parse("auto:2s..") == .learned(LearnedWindows(minimum: .seconds(2), maximum: LearnedWindows.default.maximum)))
        #expect(try WindowSetting.parse("5s") == .fixed(.seconds(5)))
        for bad in ["auto:", "auto:5m..1s", "auto:0..1s", "auto:x..1s", "autox"] {
            #expect(throws: TaskSetting.ValueError.self, "\(bad)") { try WindowSetting.parse(bad) }
        }
    }
}
