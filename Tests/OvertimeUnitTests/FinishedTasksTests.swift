import OvertimeProtocol
import Testing
@testable import Overtime

/// The batch's compact record of its finished tasks gives back the reports it was given:
/// the summary rows and `ctl status` read from it.
@Suite struct FinishedTasksTests {
    @Test("a report kept is the report read back, nil fields and all; a task not finished has none")
    func roundTrip() {
        let full = TaskReport(name: "train", outcome: .failed, reason: "timeout", detail: "killed after grace", exitCode: 137,
                              attempts: 3, duration: .nanoseconds(5_250_000_123), result: .object([("loss", .number(0.25))]),
                              resumed: false, protocolErrors: 2,
                              usage: ResourceUsage(peakMemory: 1 << 33, cpuUser: .microseconds(1_500_001), cpuSystem: .zero, memorySource: .cgroup))
        let bare = TaskReport(name: "prep", outcome: .skipped, reason: "dependency", detail: "'fetch' did not succeed", exitCode: nil,
                              attempts: 0, duration: nil, result: nil, resumed: false)
        let resumed = TaskReport(name: "fetch", outcome: .succeeded, reason: nil, detail: nil, exitCode: 0, attempts: 0,
                                 duration: nil, result: nil, resumed: true)
        var finished = FinishedTasks(taskCount: 4)
        finished.keep(full, at: 2)
        finished.keep(bare, at: 0)
        finished.keep(resumed, at: 3)
        #expect(finished.report(at: 2, name: "train") == full)
        #expect(finished.report(at: 0, name: "prep") == bare)
        #expect(finished.report(at: 3, name: "fetch") == resumed)
        #expect(finished.report(at: 1, name: "eval") == nil && finished.reason(at: 1) == nil)
        #expect(finished.reason(at: 2) == "timeout")
        var again = full
        again.attempts = 4
        finished.keep(again, at: 2)
        #expect(finished.report(at: 2, name: "train") == again)
    }
}
