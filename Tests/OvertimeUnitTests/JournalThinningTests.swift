// A task can cause some events as fast as it writes lines (issue 10, "The journal can fill
// the disk"): every consumer that writes events out thins them per task and kind, and
// says how many it held back.

import Foundation
import Overtime
@testable import OvertimeCore
import OvertimeProtocol
import Testing

@Suite struct JournalThinningTests {
    static let task = TaskRef(id: 1, name: "flood")

    static func event(_ kind: TaskEvent.Kind, at ms: Int64) -> TaskEvent {
        TaskEvent(task: task, time: MonotonicInstant(nanoseconds: 1_000_000_000_000 + ms * 1_000_000), kind: kind)
    }

    @Test("each kind's counts sit at its own place in allCases")
    func kindIndexesFollowAllCases() {
        for (place, kind) in ThinnedKind.allCases.enumerated() { #expect(kind.index == place, "\(kind)") }
    }

    static let bad = TaskEvent.Kind.protocolError(ProtocolError(.notJSON, "not JSON"), excerpt: "")
    static let reply = TaskEvent.Kind.budgetChanged(remaining: .seconds(30), cause: .childExtend(asked: .seconds(30), why: nil, granted: true))

    @Test("protocol errors: the first ten, then one a second, each after a 'thinned' count; the end owes the rest and the totals")
    func protocolErrors() {
        var throttle = FrequentEventThrottle(interval: .seconds(1))
        var written = 0
        var summarised = 0
        // 100,000 bad lines over 2.5 s.
        for i in 0..<100_000 {
            let a = throttle.admit(Self.event(Self.bad, at: Int64(i) / 40))
            if a.write { written += 1 }
            summarised += a.summaries.filter { $0.kind == .protocolError }.map(\.count).reduce(0, +)
        }
        #expect(written == 10 + 2, "ten, then one at 1 s and one at 2 s: \(written)")
        let end = throttle.admit(Self.event(.exited(TaskOutcome.placeholder(Self.task)), at: 3000))
        #expect(end.write)
        summarised += end.summaries.map(\.count).reduce(0, +)
        #expect(written + summarised == 100_000, "every bad line is written or counted: \(written) + \(summarised)")
        #expect(end.totals == [.protocolError: 100_000 - written])
    }

    @Test("extend replies thinned; an operator's extend, a start and a cancel always pass")
    func extendReplies() {
        var throttle = FrequentEventThrottle(interval: .seconds(1))
        var written = 0
        // Ten at once, then one a second: the next is 1 s after the tenth (at 9 ms).
        for i in 0..<2000 where throttle.admit(Self.event(Self.reply, at: Int64(i))).write { written += 1 }
        #expect(written == 11, "\(written)")
        let always: [TaskEvent.Kind] = [.started(pid: 1), .cancelSent(reason: .user, grace: .seconds(1)), .killSent,
                                        .budgetChanged(remaining: nil, cause: .operatorExtend(amount: .seconds(1), pastMax: false, clipped: false))]
        for kind in always {
            for _ in 0..<20 { #expect(throttle.admit(Self.event(kind, at: 500)).write) }
        }
    }
}

extension TaskOutcome {
    static func placeholder(_ task: TaskRef) -> TaskOutcome {
        TaskOutcome(task: task, pid: 1, termination: .exited(0), cancelReason: nil, killed: false, elapsed: .seconds(3),
                    lastProgress: nil, result: nil, protocolErrors: 100_000, wasReady: false)
    }
}
