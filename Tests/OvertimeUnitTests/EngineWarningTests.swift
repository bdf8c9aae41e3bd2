import OvertimeProtocol
import Testing
@testable import Overtime
@testable import OvertimeCore

/// The engine's warning (DESIGN §8) as an input of the pure machine, on a fake clock.
@Suite struct EngineWarningTests {
    let start = MonotonicInstant(nanoseconds: 1_000_000_000_000)

    func running(_ policy: BudgetPolicy = BudgetPolicy(budget: .seconds(100))) -> TaskMachine {
        var machine = TaskMachine(policy: policy, startedAt: start)
        var ignored: [TaskMachine.Action] = []
        machine.start(pid: 7, now: start, into: &ignored)
        return machine
    }

    @Test("every reporter is told expiring with the engine's time; the task's own deadline does not move")
    func tellsEveryReporterAndKeepsTheDeadline() {
        var machine = running()
        let deadline = machine.deadline
        var actions: [TaskMachine.Action] = []
        machine.engineExpiring(remaining: .seconds(30), source: .warnLead, now: start + .seconds(10), into: &actions)
        #expect(actions == [.send(.expiring(remaining: 30), to: .everyReporter),
                            .emit(.engineExpiring(remaining: .seconds(30), source: .warnLead))])
        #expect(machine.deadline == deadline)
        #expect(machine.phase == .running)
        // The engine's 30 s pass: the task is not cancelled for them (its budget is 100 s).
        actions.removeAll()
        machine.tick(now: start + .seconds(45), into: &actions)
        #expect(actions.isEmpty)
    }

    @Test("the engine's warning does not use up warn-before: the task is still warned of its own deadline")
    func ownWarningStillComes() {
        var machine = running(BudgetPolicy(budget: .seconds(100), warnBefore: .seconds(10)))
        var actions: [TaskMachine.Action] = []
        machine.engineExpiring(remaining: .seconds(60), source: .slurm, now: start + .seconds(5), into: &actions)
        actions.removeAll()
        machine.tick(now: start + .seconds(90), into: &actions)
        #expect(actions.contains(.send(.expiring(remaining: 10), to: .everyReporter)))
    }

    @Test("a task being cancelled, or ended, is not told: its cancel says more")
    func notWhileCancellingOrExited() {
        var machine = running()
        var actions: [TaskMachine.Action] = []
        _ = machine.cancel(reason: .shutdown, now: start + .seconds(1), into: &actions)
        actions.removeAll()
        machine.engineExpiring(remaining: .seconds(30), source: .fallback, now: start + .seconds(2), into: &actions)
        #expect(actions.isEmpty)
        machine.exited(into: &actions)
        actions.removeAll()
        machine.engineExpiring(remaining: .seconds(30), source: .fallback, now: start + .seconds(3), into: &actions)
        #expect(actions.isEmpty)
    }

    @Test("a time already past is sent as 0, never negative")
    func neverNegative() {
        var machine = running()
        var actions: [TaskMachine.Action] = []
        machine.engineExpiring(remaining: .seconds(-5), source: .slurm, now: start, into: &actions)
        #expect(actions.first == .send(.expiring(remaining: 0), to: .everyReporter))
    }

    @Test("the journal's line names the source")
    func eventJSON() throws {
        let event = TaskEvent(task: TaskRef(id: 1, name: "train"), time: start, kind: .engineExpiring(remaining: .seconds(60), source: .fallback))
        let line = String(decoding: EventEncoder(runID: "r").line(for: event), as: UTF8.self)
        #expect(line.contains(#""event":"engine-expiring""#), "\(line)")
        #expect(line.contains(#""remaining":60"#), "\(line)")
        #expect(line.contains(#""source":"default""#), "\(line)")
    }

    @Test("Slurm's end times: squeue's field and scontrol's EndTime=; Unknown and junk are nil")
    func slurmTimes() {
        let squeue = SlurmEndTime.parse("2030-01-02T03:04:05\n")
        #expect(squeue != nil)
        #expect(SlurmEndTime.parseScontrol("JobId=1 JobName=x\n   StartTime=2030-01-02T02:04:05 EndTime=2030-01-02T03:04:05 Deadline=N/A\n") == squeue)
        #expect(SlurmEndTime.parse("2030-01-02T03:04:06").map { $0 - squeue! } == 1)
        #expect(SlurmEndTime.parse("Unknown") == nil)
        #expect(SlurmEndTime.parse("N/A") == nil)
        #expect(SlurmEndTime.parse("2030-01-02 03:04:05") == nil)
        #expect(SlurmEndTime.parseScontrol("JobId=1 EndTime=Unknown") == nil)
    }
}
