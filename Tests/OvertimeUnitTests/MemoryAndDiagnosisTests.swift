import OvertimeProtocol
import Testing
@testable import Overtime
@testable import OvertimeCore
@testable import OvertimeLoop

/// The memory watchdog's and the diagnosis's rules in the machine, on a fake clock; the size
/// parser.
@Suite struct MemoryAndDiagnosisTests {
    static let start = MonotonicInstant(nanoseconds: 1_000_000_000_000)
    static let mib: UInt64 = 1 << 20

    static func machine(memory: MemoryPolicy = .none, diagnose: Duration? = nil, budget: Duration = .seconds(10)) -> (TaskMachine, [TaskMachine.Action]) {
        var policy = BudgetPolicy(budget: budget, grace: .seconds(5))
        policy.diagnoseLimit = diagnose
        var machine = TaskMachine(policy: policy, memory: memory, startedAt: start)
        var actions: [TaskMachine.Action] = []
        machine.start(pid: 42, now: start, into: &actions)
        return (machine, [])
    }

    @Test func theWarningGoesOutOnceAtNinetyPercentThenTheCancelAtTheMax() {
        var (machine, actions) = Self.machine(memory: MemoryPolicy(max: 200 * Self.mib))
        machine.memorySample(100 * Self.mib, now: Self.start, into: &actions)
        #expect(actions.isEmpty)
        machine.memorySample(181 * Self.mib, now: Self.start, into: &actions)
        #expect(actions == [.send(.warning(resource: "memory", used: 181 * Self.mib, limit: 200 * Self.mib), to: .everyReporter),
                            .emit(.memoryWarning(used: 181 * Self.mib, limit: 200 * Self.mib))])
        actions.removeAll()
        machine.memorySample(150 * Self.mib, now: Self.start, into: &actions)
        machine.memorySample(190 * Self.mib, now: Self.start, into: &actions)
        #expect(actions.isEmpty, "one warning per task")
        machine.memorySample(200 * Self.mib, now: Self.start, into: &actions)
        #expect(actions.first == .send(.cancel(reason: .memory, grace: 5), to: .everyReporter))
        #expect(machine.cancelReason == .memory)
        #expect(machine.peakMemory == 200 * Self.mib)
    }

    @Test func aBurstPastTheMaxWarnsAndCancelsInOneSample() {
        var (machine, actions) = Self.machine(memory: MemoryPolicy(max: 200 * Self.mib, warn: .bytes(50 * Self.mib)))
        machine.memorySample(900 * Self.mib, now: Self.start, into: &actions)
        let sent = actions.compactMap { action -> SupervisorMessage? in if case let .send(m, _) = action { m } else { nil } }
        #expect(sent.count == 2)
        #expect(sent.first == .warning(resource: "memory", used: 900 * Self.mib, limit: 200 * Self.mib))
        #expect(sent.last == .cancel(reason: .memory, grace: 5))
    }

    @Test func withoutAMaxSamplesOnlyCount() {
        var (machine, actions) = Self.machine()
        machine.memorySample(10_000 * Self.mib, now: Self.start, into: &actions)
        #expect(actions.isEmpty && machine.phase == .running && machine.peakMemory == 10_000 * Self.mib)
    }

    @Test func aMemoryCancelExitsLikeTheOtherLimits() {
        let outcome = TaskOutcome(task: TaskRef(id: 1, name: "t"), pid: 1, termination: .signaled(.terminate), cancelReason: .memory,
                                  killed: false, elapsed: .seconds(1), lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
        #expect(outcome.exitCode == 124 && outcome.kind == .cancelled)
        var oomDuringGrace = outcome
        oomDuringGrace.termination = .signaled(.kill)
        oomDuringGrace.oomKills = 1
        #expect(oomDuringGrace.exitCode == 137 && oomDuringGrace.kind == .oom, "a SIGKILL during grace is not an end within grace")
    }

    @Test func outcomesSayWhoEndedTheTask() {
        func outcome(_ termination: Termination, reason: CancelReason? = nil, killed: Bool = false, oom: Int? = nil,
                     sender: SignalSender? = nil) -> TaskOutcome {
            var o = TaskOutcome(task: TaskRef(id: 1, name: "t"), pid: 1, termination: termination, cancelReason: reason, killed: killed,
                                elapsed: .seconds(1), lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
            o.oomKills = oom
            o.signalSender = sender
            return o
        }
        #expect(outcome(.exited(0)).kind == .succeeded)
        #expect(outcome(.exited(3)).kind == .failed)
        #expect(outcome(.signaled(.kill), oom: 1, sender: .outside).kind == .oom)
        #expect(outcome(.signaled(.kill), reason: .memory, killed: true, oom: 1, sender: .overtime).kind == .oom)
        #expect(outcome(.signaled(.kill), reason: .timeout, killed: true, oom: 0, sender: .overtime).kind == .killed)
        #expect(outcome(.signaled(.kill), oom: 0, sender: .outside).kind == .signal)
        #expect(outcome(.signaled(.segmentationFault), sender: .outside).kind == .signal)
        #expect(outcome(.signaled(.terminate), reason: .timeout, sender: .overtime).kind == .cancelled)
        #expect(outcome(.exited(0), oom: 2).kind == .succeeded, "a child killed by the OOM killer does not undo a success")
    }

    // MARK: Diagnosis

    @Test func aTimeoutWithADiagnoseCommandDiagnosesFirstThenCancels() {
        var (machine, actions) = Self.machine(diagnose: .seconds(3), budget: .seconds(10))
        let due = Self.start + .seconds(10)
        machine.tick(now: due, into: &actions)
        #expect(actions == [.diagnose, .emit(.diagnosing(reason: .timeout, limit: .seconds(3)))])
        #expect(machine.phase == .cancelling(.timeout) && machine.nextWake == due + .seconds(3))
        actions.removeAll()
        // Progress during the diagnosis moves nothing: the cancel is decided.
        machine.receive(.heartbeat, now: due + .seconds(1), into: &actions)
        #expect(machine.nextWake == due + .seconds(3))
        actions.removeAll()
        machine.diagnosisEnded(now: due + .seconds(1), into: &actions)
        #expect(actions.first == .endDiagnosis(.finished))
        #expect(actions.contains { if case .send(.cancel(reason: .timeout, grace: 5, why: _), to: .everyReporter) = $0 { true } else { false } })
        #expect(machine.killAt == due + .seconds(6))
    }

    @Test func aDiagnosisThatOutlivesItsLimitIsCut() {
        var (machine, actions) = Self.machine(diagnose: .seconds(3), budget: .seconds(10))
        machine.tick(now: Self.start + .seconds(10), into: &actions)
        actions.removeAll()
        machine.tick(now: Self.start + .seconds(13), into: &actions)
        #expect(actions.first == .endDiagnosis(.limitReached))
        #expect(actions.contains(.signalGroup(.terminate)))
    }

    @Test func userCancelsAndDeadlinesAreNotDiagnosedAndEscalationSkipsTheDiagnosis() {
        var (machine, actions) = Self.machine(diagnose: .seconds(3))
        _ = machine.cancel(reason: .user, now: Self.start, into: &actions)
        #expect(!actions.contains(.diagnose))
        var (other, more) = Self.machine(memory: MemoryPolicy(max: 100), diagnose: .seconds(3))
        other.memorySample(200, now: Self.start, into: &more)
        #expect(more.contains(.diagnose))
        more.removeAll()
        #expect(other.escalate(now: Self.start, into: &more))
        #expect(more.contains(.endDiagnosis(.preempted)) && more.contains(.signalGroup(.kill)))
    }

    @Test func aShutdownDuringADiagnosisCutsItAndCancelsAtOnceWithItsReasonAndGrace() {
        var (machine, actions) = Self.machine(diagnose: .seconds(10), budget: .seconds(10))
        let due = Self.start + .seconds(10)
        machine.tick(now: due, into: &actions)
        actions.removeAll()
        #expect(machine.cancel(reason: .timeout, now: due, into: &actions) == .alreadyCancelling(.timeout))
        #expect(machine.cancel(reason: .shutdown, grace: .seconds(2), now: due, into: &actions) == .cancelling)
        #expect(actions.first == .endDiagnosis(.preempted))
        #expect(actions.contains(.send(.cancel(reason: .shutdown, grace: 2), to: .everyReporter)))
        #expect(machine.cancelReason == .shutdown && machine.killAt == due + .seconds(2))
    }

    @Test func aTaskThatEndsDuringItsDiagnosisWasNotCancelled() {
        var (machine, actions) = Self.machine(diagnose: .seconds(10), budget: .seconds(10))
        machine.tick(now: Self.start + .seconds(10), into: &actions)
        actions.removeAll()
        machine.exited(into: &actions)
        #expect(actions == [.endDiagnosis(.taskEnded), .killLeftovers])
        #expect(machine.cancelReason == nil)
    }

    // MARK: Sizes

    @Test func sizesAreReadAsUsersWriteThem() throws {
        #expect(try ByteSize.parse("200M") == 200 << 20)
        #expect(try ByteSize.parse("1.5G") == 3 << 29)
        #expect(try ByteSize.parse("512MiB") == 512 << 20)
        #expect(try ByteSize.parse("2Gi") == 2 << 30)
        #expect(try ByteSize.parse("4096") == 4096)
        for bad in ["", "M", "-5M", "0", "1.5X", "nan", "1e99G"] {
            #expect(throws: ByteSize.ParseError.self, "\(bad)") { try ByteSize.parse(bad) }
        }
        #expect(try MemoryPolicy.parseWarn("80%") == .share(0.8))
        #expect(try MemoryPolicy.parseWarn("1G") == .bytes(1 << 30))
        #expect(throws: ByteSize.ParseError.self) { try MemoryPolicy.parseWarn("120%") }
        #expect(MemoryPolicy(max: 1000 << 20).warnBytes == 900 << 20)
        #expect(MemoryPolicy(max: 1000 << 20).hardLimit == 1100 << 20)
        #expect(MemoryPolicy(max: 100 << 20).hardLimit == 132 << 20)
        #expect(ByteSize.text(200 << 20) == "200 MiB")
        #expect(DiagnoseCommand("py-spy dump --pid {pid}; echo {pid}").command(pid: 7) == "py-spy dump --pid 7; echo 7")
    }
}
