import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// The order of what one input decides: the task's own actions first, the events last. An
/// event's sinks may call back into the runner (an embedder cancels on `started`), and what
/// the task is told and sent must not follow what such a call made it do.
@Suite struct TaskMachineOrderTests {
    static let start = MonotonicInstant(nanoseconds: 1_000_000_000_000)
    static let mib: UInt64 = 1 << 20

    static func machine(_ policy: BudgetPolicy = BudgetPolicy(budget: .seconds(10), grace: .seconds(5)),
                        memory: MemoryPolicy = .none, diagnose: Duration? = nil) -> TaskMachine {
        var policy = policy
        policy.diagnoseLimit = diagnose
        var machine = TaskMachine(policy: policy, memory: memory, startedAt: start)
        var ignored: [TaskMachine.Action] = []
        machine.start(pid: 42, now: start, into: &ignored)
        return machine
    }

    /// One input's list, with what it must hold: no action after its first event.
    static func expectEventsLast(_ actions: [TaskMachine.Action], _ input: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let firstEvent = actions.firstIndex { if case .emit = $0 { true } else { false } } ?? actions.endIndex
        let late = actions[firstEvent...].filter { if case .emit = $0 { false } else { true } }
        #expect(late.isEmpty, "\(input): \(late) after an event in \(actions)", sourceLocation: sourceLocation)
    }

    static func events(_ actions: [TaskMachine.Action]) -> [TaskEvent.Kind] {
        actions.compactMap { if case let .emit(kind) = $0 { kind } else { nil } }
    }

    @Test func startTellsTheTaskItsBudgetBeforeItsStartIsReported() {
        var machine = TaskMachine(policy: BudgetPolicy(budget: .seconds(30)), startedAt: Self.start)
        var actions: [TaskMachine.Action] = []
        machine.start(pid: 42, now: Self.start, into: &actions)
        #expect(actions == [.send(.budget(remaining: 30, granted: nil), to: .reporter(.leader)),
                            .emit(.started(pid: 42)),
                            .emit(.budgetChanged(remaining: .seconds(30), cause: .start))])
    }

    @Test func aReporterThatJoinsIsToldBeforeItIsCounted() {
        var machine = Self.machine()
        var actions: [TaskMachine.Action] = []
        machine.reporterJoined(ReporterID(1), now: Self.start, into: &actions)
        Self.expectEventsLast(actions, "joined while running")
        actions.removeAll()
        _ = machine.cancel(reason: .user, now: Self.start, into: &actions)
        actions.removeAll()
        machine.reporterJoined(ReporterID(2), now: Self.start, into: &actions)
        #expect(actions.first == .send(.cancel(reason: .user, grace: 5), to: .reporter(ReporterID(2))))
        Self.expectEventsLast(actions, "joined while cancelling")
    }

    @Test func aSampleThatWarnsAndCancelsKeepsItsEventsInOrderAfterItsActions() {
        for diagnose in [nil, Duration.seconds(3)] {
            var machine = Self.machine(memory: MemoryPolicy(max: 200 * Self.mib, warn: .bytes(50 * Self.mib)), diagnose: diagnose)
            var actions: [TaskMachine.Action] = []
            machine.memorySample(900 * Self.mib, now: Self.start, into: &actions)
            Self.expectEventsLast(actions, "memory past the max, diagnose \(String(describing: diagnose))")
            let expected: [TaskEvent.Kind] = diagnose == nil
                ? [.memoryWarning(used: 900 * Self.mib, limit: 200 * Self.mib), .cancelSent(reason: .memory, grace: .seconds(5))]
                : [.memoryWarning(used: 900 * Self.mib, limit: 200 * Self.mib), .diagnosing(reason: .memory, limit: .seconds(3))]
            #expect(Self.events(actions) == expected)
        }
    }

    @Test func aRevokeThatEndsTheBudgetCancelsBeforeItsEvents() {
        var machine = Self.machine()
        var actions: [TaskMachine.Action] = []
        _ = machine.revoke(after: .zero, now: Self.start, into: &actions)
        Self.expectEventsLast(actions, "revoke now")
        #expect(Self.events(actions) == [.budgetChanged(remaining: .zero, cause: .revoke(after: .zero)),
                                         .cancelSent(reason: .revoked, grace: .seconds(5))])
    }

    @Test func aSecondSignalDuringADiagnosisKillsBeforeItsEvents() {
        var machine = Self.machine(diagnose: .seconds(3))
        var actions: [TaskMachine.Action] = []
        machine.tick(now: Self.start + .seconds(10), into: &actions)
        Self.expectEventsLast(actions, "deadline with a diagnose command")
        #expect(actions.first == .diagnose, "the command starts before its event, so a sink that cancels on it cuts it")
        actions.removeAll()
        machine.escalate(now: Self.start + .seconds(11), into: &actions)
        Self.expectEventsLast(actions, "escalate while diagnosing")
        #expect(Self.events(actions) == [.cancelSent(reason: .timeout, grace: .seconds(5), why: ProgressSilence.neverReported.text(clock: machine.timeOfDay)),
                                         .killSent])
    }

    @Test func everyOtherInputKeepsItsEventsLast() {
        var machine = Self.machine(BudgetPolicy(budget: .seconds(10), grace: .seconds(5), warnBefore: .seconds(2)), diagnose: .seconds(3))
        var actions: [TaskMachine.Action] = []
        func check(_ input: String, _ body: (inout TaskMachine, inout [TaskMachine.Action]) -> Void) {
            body(&machine, &actions)
            Self.expectEventsLast(actions, input)
            actions.removeAll()
        }
        check("extend") { $0.receive(.extend(seconds: 5, why: nil), now: Self.start, into: &$1) }
        check("progress") { $0.receive(.progress(Progress(completed: 1)), now: Self.start, into: &$1) }
        check("operator extend") { _ = $0.operatorExtend(by: .seconds(1), pastMax: false, now: Self.start, into: &$1) }
        check("engine expiring") { $0.engineExpiring(remaining: .seconds(60), source: .head, now: Self.start, into: &$1) }
        check("warning tick") { $0.tick(now: Self.start + .seconds(9.5), into: &$1) }
        check("watchdog trigger") { $0.notify(.watchdogTrigger, now: Self.start + .seconds(9.5), into: &$1) }
        check("diagnosis over") { $0.diagnosisEnded(now: Self.start + .seconds(10), into: &$1) }
        check("grace over") { $0.tick(now: Self.start + .seconds(30), into: &$1) }
        check("exited") { $0.exited(into: &$1) }
    }
}
