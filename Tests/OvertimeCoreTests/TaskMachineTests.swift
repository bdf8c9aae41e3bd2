import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// The budget and lifecycle rules, driven by a fake clock: no processes, no timers.
@Suite struct TaskMachineTests {
    /// A machine plus the actions it asked for, on a clock the test moves by hand.
    struct Harness {
        var machine: TaskMachine
        var now: MonotonicInstant
        var actions: [TaskMachine.Action] = []

        init(_ policy: BudgetPolicy) {
            now = MonotonicInstant(nanoseconds: 1_000_000_000_000)
            machine = TaskMachine(policy: policy, startedAt: now)
            machine.start(pid: 42, now: now, into: &actions)
        }

        mutating func advance(_ d: Duration) {
            now = now + d
        }

        /// Moves the clock and delivers every timer wake-up due on the way, as the loop would.
        mutating func run(for d: Duration) {
            let end = now + d
            while let wake = machine.nextWake, wake <= end {
                now = max(now, wake)
                machine.tick(now: now, into: &actions)
            }
            now = end
        }

        mutating func send(_ message: ChildMessage, from reporter: ReporterID = .leader) {
            machine.receive(message, from: reporter, now: now, into: &actions)
        }

        mutating func take() -> [TaskMachine.Action] {
            defer { actions.removeAll() }
            return actions
        }

        var sent: [SupervisorMessage] {
            actions.compactMap { if case let .send(m, _) = $0 { m } else { nil } }
        }

        /// The messages with whom each is for.
        var addressed: [(SupervisorMessage, TaskMachine.Recipient)] {
            actions.compactMap { if case let .send(m, to) = $0 { (m, to) } else { nil } }
        }

        var signals: [Signal] {
            actions.compactMap { if case let .signalGroup(s) = $0 { s } else { nil } }
        }
    }

    @Test func startSendsTheBudgetAndReportsStart() {
        let h = Harness(BudgetPolicy(budget: .seconds(30)))
        #expect(h.sent == [.budget(remaining: 30, granted: nil)])
        #expect(h.actions.contains(.emit(.started(pid: 42))))
    }

    @Test func aSilentTaskIsCancelledForTimeoutAtItsBudget() {
        var h = Harness(BudgetPolicy(budget: .seconds(30), grace: .seconds(10)))
        _ = h.take()
        h.run(for: .seconds(29.9))
        #expect(h.take().isEmpty)
        h.run(for: .milliseconds(200))
        #expect(h.machine.phase == .cancelling(.timeout))
        #expect(h.sent == [.cancel(reason: .timeout, grace: 10, why: ProgressSilence.neverReported.text(clock: h.machine.timeOfDay))])
        #expect(h.signals == [.terminate, .continue])
        _ = h.take()
        h.run(for: .seconds(9.9))
        #expect(h.signals.isEmpty)
        h.run(for: .seconds(0.2))
        #expect(h.signals == [.kill])
        #expect(h.actions.contains(.emit(.killSent)))
        #expect(h.machine.killSent)
    }

    @Test func progressMovesTheDeadlineToNowPlusWindow() {
        var h = Harness(BudgetPolicy(budget: .seconds(10), window: .seconds(5)))
        h.run(for: .seconds(8))
        h.send(.progress(Progress(completed: 1, total: 10)))
        // now + window (13 s from start) is later than the budget's 10 s.
        #expect(h.machine.effectiveDeadline == h.machine.startedAt + .seconds(13))
        h.run(for: .seconds(4.9))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(0.2))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func progressNeverShortensTheDeadline() {
        var h = Harness(BudgetPolicy(budget: .seconds(30), window: .seconds(5)))
        h.send(.progress(Progress(completed: 1)))
        #expect(h.machine.effectiveDeadline == h.machine.startedAt + .seconds(30))
    }

    @Test func progressKeepsATaskAliveFarPastItsBudget() {
        var h = Harness(BudgetPolicy(budget: .seconds(2)))
        for i in 1...100 {
            h.run(for: .seconds(1))
            h.send(.progress(Progress(completed: i)))
        }
        #expect(h.machine.phase == .running)
        #expect(h.now - h.machine.startedAt == .seconds(100))
    }

    @Test func heartbeatCountsAsProgress() {
        var h = Harness(BudgetPolicy(budget: .seconds(2)))
        h.run(for: .seconds(1.5))
        h.send(.heartbeat)
        h.run(for: .seconds(1.5))
        #expect(h.machine.phase == .running)
    }

    @Test func progressAndHeartbeatEventsCarryTheTimeLeft() {
        var h = Harness(BudgetPolicy(budget: .seconds(10), window: .seconds(5), maxRuntime: .seconds(20)))
        h.run(for: .seconds(8))
        _ = h.take()
        h.send(.progress(Progress(completed: 1)))
        #expect(h.take().contains(.emit(.progress(Progress(completed: 1, reporter: "pid 42"), remaining: .seconds(5)))), "max(10, 8 + 5) - 8")
        h.run(for: .seconds(1))
        h.send(.heartbeat)
        #expect(h.take().contains(.emit(.heartbeat(remaining: .seconds(5)))))
        h.run(for: .seconds(4))
        h.send(.heartbeat)
        h.run(for: .seconds(4))
        h.send(.heartbeat)
        #expect(h.take().contains(.emit(.heartbeat(remaining: .seconds(3)))), "at 17 s: min(17 + 5, max-runtime 20) - 17")
        var unlimited = Harness(BudgetPolicy(budget: nil))
        unlimited.send(.heartbeat)
        #expect(unlimited.take().contains(.emit(.heartbeat(remaining: nil))))
    }

    @Test func maxRuntimeCancelsWithDeadlineWhileProgressFlows() {
        var h = Harness(BudgetPolicy(budget: .seconds(2), maxRuntime: .seconds(5)))
        for i in 1...20 {
            h.run(for: .milliseconds(500))
            h.send(.progress(Progress(completed: i)))
        }
        #expect(h.machine.phase == .cancelling(.deadline))
        #expect(h.machine.cancelReason == .deadline)
    }

    /// A batch deadline is an instant: a task started late (its spawn queued behind a
    /// thousand others) is cancelled at that instant, not its max-runtime after its start.
    @Test func anInstantToEndByCutsTheHardLimitWhateverTheStart() {
        let start = MonotonicInstant(nanoseconds: 1_000_000_000_000)
        var policy = BudgetPolicy(budget: nil, maxRuntime: .seconds(10))
        policy.endsBy = start + .seconds(3)
        var machine = TaskMachine(policy: policy, startedAt: start + .seconds(1))
        var actions: [TaskMachine.Action] = []
        machine.start(pid: 7, now: start + .seconds(1), into: &actions)
        #expect(machine.hardLimit == start + .seconds(3))
        machine.tick(now: start + .milliseconds(2999), into: &actions)
        #expect(machine.phase == .running)
        machine.tick(now: start + .seconds(3), into: &actions)
        #expect(machine.phase == .cancelling(.deadline))
        // And the earlier of the two wins the other way round.
        policy.endsBy = start + .seconds(60)
        let later = TaskMachine(policy: policy, startedAt: start)
        #expect(later.hardLimit == start + .seconds(10))
    }

    @Test func requireAdvanceIgnoresRepeatedProgress() {
        var h = Harness(BudgetPolicy(budget: .seconds(2), requireAdvance: true))
        h.send(.progress(Progress(completed: 5)))
        for _ in 0..<5 {
            h.run(for: .milliseconds(500))
            h.send(.progress(Progress(completed: 5)))
            h.send(.heartbeat)
        }
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func requireAdvanceAcceptsGrowingCountsAndFractions() {
        var h = Harness(BudgetPolicy(budget: .seconds(2), requireAdvance: true))
        for i in 1...10 {
            h.run(for: .seconds(1))
            h.send(i.isMultiple(of: 2) ? .progress(Progress(completed: i)) : .progress(Progress(fraction: Double(i) / 10)))
        }
        #expect(h.machine.phase == .running)
    }

    @Test func budgetNoneMeansOnlyMaxRuntimeApplies() {
        var h = Harness(BudgetPolicy(budget: nil, maxRuntime: .seconds(3600)))
        h.run(for: .seconds(3599))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(2))
        #expect(h.machine.phase == .cancelling(.deadline))
    }

    @Test func budgetNoneWithoutMaxRuntimeNeverExpires() {
        var h = Harness(BudgetPolicy(budget: nil))
        #expect(h.sent == [.budget(remaining: nil, granted: nil)])
        #expect(h.machine.nextWake == nil)
        h.run(for: .seconds(1_000_000))
        #expect(h.machine.phase == .running)
    }

    @Test func childExtendIsGrantedAndAnswered() {
        var h = Harness(BudgetPolicy(budget: .seconds(10)))
        h.run(for: .seconds(8))
        _ = h.take()
        h.send(.extend(seconds: 60, why: "big file"))
        #expect(h.sent == [.budget(remaining: 60, granted: true)])
        #expect(h.actions.contains(.emit(.budgetChanged(remaining: .seconds(60), cause: .childExtend(asked: .seconds(60), why: "big file", granted: true)))))
        h.run(for: .seconds(59))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(2))
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func childExtendIsClippedAtMaxRuntime() {
        var h = Harness(BudgetPolicy(budget: .seconds(10), maxRuntime: .seconds(20)))
        h.run(for: .seconds(5))
        _ = h.take()
        h.send(.extend(seconds: 60, why: nil))
        #expect(h.sent == [.budget(remaining: 15, granted: false)])
        h.run(for: .seconds(15.1))
        #expect(h.machine.phase == .cancelling(.deadline))
    }

    @Test func aShorterExtendDoesNotShortenTheDeadline() {
        var h = Harness(BudgetPolicy(budget: .seconds(30)))
        _ = h.take()
        h.send(.extend(seconds: 5, why: nil))
        #expect(h.sent == [.budget(remaining: 30, granted: true)])
    }

    @Test func operatorExtendAddsToTheDeadlineAndMayPassMaxRuntime() {
        var h = Harness(BudgetPolicy(budget: .seconds(10), maxRuntime: .seconds(20)))
        var result = h.machine.operatorExtend(by: .seconds(30), pastMax: false, now: h.now, into: &h.actions)
        #expect(result == .applied(remaining: .seconds(20), clipped: true))
        result = h.machine.operatorExtend(by: .seconds(30), pastMax: true, now: h.now, into: &h.actions)
        // From the current deadline (20 s) plus 30 s, past the old ceiling.
        #expect(result == .applied(remaining: .seconds(50), clipped: false))
        h.run(for: .seconds(49))
        #expect(h.machine.phase == .running)
        h.run(for: .seconds(2))
        // The raised ceiling and the deadline coincide; the ceiling names the reason.
        #expect(h.machine.phase == .cancelling(.deadline))
    }

    @Test func revokeSetsAFixedDeadlineThatProgressCannotMove() {
        var h = Harness(BudgetPolicy(budget: .seconds(60)))
        _ = h.take()
        let result = h.machine.revoke(after: .seconds(2), now: h.now, into: &h.actions)
        #expect(result == .applied(remaining: .seconds(2), clipped: false))
        #expect(h.sent == [.budget(remaining: 2, granted: nil)])
        h.run(for: .seconds(1))
        h.send(.progress(Progress(completed: 1)))
        _ = h.take()
        h.send(.extend(seconds: 100, why: nil))
        #expect(h.sent == [.budget(remaining: 1, granted: false)])
        h.run(for: .seconds(1.1))
        #expect(h.machine.phase == .cancelling(.revoked))
    }

    @Test func revokeWithNoTimeCancelsAtOnce() {
        var h = Harness(BudgetPolicy(budget: .seconds(60)))
        _ = h.machine.revoke(now: h.now, into: &h.actions)
        #expect(h.machine.phase == .cancelling(.revoked))
        #expect(h.signals == [.terminate, .continue])
    }

    @Test func warnBeforeSendsExpiringOncePerDeadline() {
        var h = Harness(BudgetPolicy(budget: .seconds(10), warnBefore: .seconds(3)))
        _ = h.take()
        h.run(for: .seconds(6.9))
        #expect(h.sent.isEmpty)
        h.run(for: .seconds(0.2))
        #expect(h.sent == [.expiring(remaining: 3)])
        _ = h.take()
        h.run(for: .seconds(2.5))
        #expect(h.sent.isEmpty, "a second warning for the same deadline")
        // Progress carries it out of the warning zone; the next approach warns again.
        h.send(.progress(Progress(completed: 1)))
        h.run(for: .seconds(7.1))
        #expect(h.sent == [.expiring(remaining: 3)])
        _ = h.take()
        h.run(for: .seconds(3))
        #expect(h.sent == [.cancel(reason: .timeout, grace: 10, why: "last progress 10 s ago, from pid 42")])
    }

    @Test func cancelIsIdempotentAndAFinishedTaskSaysSo() {
        var h = Harness(.default)
        _ = h.take()
        #expect(h.machine.cancel(reason: .user, now: h.now, into: &h.actions) == .cancelling)
        #expect(h.machine.cancel(reason: .shutdown, now: h.now, into: &h.actions) == .alreadyCancelling(.user))
        #expect(h.signals == [.terminate, .continue], "a second cancel must not signal again")
        h.machine.exited(into: &h.actions)
        #expect(h.machine.cancel(reason: .user, now: h.now, into: &h.actions) == .alreadyFinished)
    }

    @Test func nothingIsSignalledAfterExit() {
        var h = Harness(BudgetPolicy(budget: .seconds(1), grace: .seconds(1)))
        h.run(for: .seconds(1.5))
        #expect(h.machine.phase == .cancelling(.timeout))
        h.machine.exited(into: &h.actions)
        _ = h.take()
        h.run(for: .seconds(10))
        #expect(h.take().isEmpty)
        #expect(h.machine.nextWake == nil)
        #expect(!h.machine.killSent)
    }

    @Test func exitSweepsTheGroupOnce() {
        var h = Harness(.default)
        _ = h.take()
        h.machine.exited(into: &h.actions)
        h.machine.exited(into: &h.actions)
        #expect(h.take() == [.killLeftovers])
    }

    @Test func cancelGraceCanBeOverridden() {
        var h = Harness(BudgetPolicy(grace: .seconds(30)))
        _ = h.take()
        _ = h.machine.cancel(reason: .shutdown, grace: .seconds(2), now: h.now, into: &h.actions)
        #expect(h.sent == [.cancel(reason: .shutdown, grace: 2)])
        h.run(for: .seconds(2.1))
        #expect(h.signals == [.terminate, .continue, .kill])
    }

    @Test func escalationKillsAtOnceDuringGraceOnly() {
        var h = Harness(BudgetPolicy(grace: .seconds(30)))
        #expect(!h.machine.escalate(now: h.now, into: &h.actions), "nothing to escalate while running")
        _ = h.take()
        _ = h.machine.cancel(reason: .shutdown, now: h.now, into: &h.actions)
        #expect(h.machine.escalate(now: h.now, into: &h.actions))
        #expect(h.signals == [.terminate, .continue, .kill])
        #expect(!h.machine.escalate(now: h.now, into: &h.actions), "killed once")
        h.run(for: .seconds(60))
        #expect(h.signals == [.terminate, .continue, .kill])
    }

    @Test func zeroGraceKillsOnTheNextTick() {
        var h = Harness(BudgetPolicy(grace: .zero))
        _ = h.take()
        _ = h.machine.cancel(reason: .user, now: h.now, into: &h.actions)
        h.run(for: .zero)
        #expect(h.signals == [.terminate, .continue, .kill])
    }

    @Test func resultReadyAndProtocolErrorsAreRecorded() {
        var h = Harness(.default)
        h.send(.ready)
        h.send(.ready)
        h.send(.result(.string("first")))
        h.send(.result(.object([("loss", .number(0.1))])))
        h.machine.rejectLine(ProtocolError(.notJSON, "x"), excerpt: "x", into: &h.actions)
        #expect(h.machine.isReady)
        #expect(h.actions.filter { $0 == .emit(.ready) }.count == 1)
        #expect(h.machine.result == .object([("loss", .number(0.1))]))
        #expect(h.machine.protocolErrors == 1)
    }

    @Test func progressFieldsMerge() {
        var h = Harness(.default)
        h.send(.progress(Progress(completed: 0, total: 100, title: "Uploading")))
        h.send(.progress(Progress(completed: 40)))
        h.send(.progress(Progress(detail: "chunk 40")))
        #expect(h.machine.lastProgress == Progress(completed: 40, total: 100, title: "Uploading", detail: "chunk 40", reporter: "pid 42"))
    }

    @Test func cancellingTaskStillRecordsMessagesButGetsNoMoreTime() {
        var h = Harness(BudgetPolicy(budget: .seconds(1), grace: .seconds(5)))
        h.run(for: .seconds(1.1))
        _ = h.take()
        h.send(.extend(seconds: 100, why: nil))
        // Cancelled at 1.0 s with 5 s grace; at 1.1 s the reply tells what grace is left.
        #expect(h.sent == [.budget(remaining: 4.9, granted: false)])
        h.send(.result(.bool(true)))
        #expect(h.machine.result == .bool(true))
        h.run(for: .seconds(5))
        #expect(h.signals == [.kill])
    }

    @Test func expiryReasonPrefersDeadlineWhenTheCeilingComesFirst() {
        var h = Harness(BudgetPolicy(budget: .seconds(10), maxRuntime: .seconds(10)))
        h.run(for: .seconds(10))
        #expect(h.machine.cancelReason == .deadline)
    }
}

@Suite struct TaskOutcomeTests {
    func outcome(_ termination: Termination, reason: CancelReason? = nil, killed: Bool = false) -> TaskOutcome {
        TaskOutcome(task: TaskRef(id: 1, name: "t"), pid: 1, termination: termination, cancelReason: reason,
                    killed: killed, elapsed: .zero, lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
    }

    @Test(arguments: [0, 1, 2, 100, 124, 255] as [Int32])
    func ownExitCodePassesThrough(code: Int32) {
        #expect(outcome(.exited(code)).exitCode == code)
    }

    @Test func exitCodesFollowGNUTimeout() {
        #expect(outcome(.signaled(.segmentationFault)).exitCode == 139)
        #expect(outcome(.exited(0), reason: .timeout).exitCode == 124)
        #expect(outcome(.signaled(.terminate), reason: .deadline).exitCode == 124)
        #expect(outcome(.exited(3), reason: .revoked).exitCode == 124)
        #expect(outcome(.signaled(.kill), reason: .timeout, killed: true).exitCode == 137)
        #expect(outcome(.exited(3), reason: .user).exitCode == 3)
        #expect(outcome(.signaled(.terminate), reason: .shutdown).exitCode == 143)
        #expect(outcome(.failedToStart(SpawnFailure(errno: 2, message: ""))).exitCode == 127)
        #expect(outcome(.failedToStart(SpawnFailure(errno: 13, message: ""))).exitCode == 126)
        #expect(outcome(.failedToStart(SpawnFailure(errno: 24, message: ""))).exitCode == 125)
    }

    @Test func preservedStatusIsTheChildsOwn() {
        #expect(outcome(.exited(3), reason: .timeout).preservedStatus == 3)
        #expect(outcome(.signaled(.kill), reason: .timeout, killed: true).preservedStatus == 137)
        #expect(outcome(.signaled(.terminate), reason: .timeout).preservedStatus == 143)
    }
}

extension TaskMachineTests {
    // MARK: Reporters and bars (DESIGN §3a)

    @Test func budgetRepliesGoToTheAskerAndCancelsToEveryone() {
        var h = Harness(BudgetPolicy(budget: .seconds(30), grace: .seconds(5)))
        #expect(h.addressed.map(\.1) == [.reporter(.leader)], "the start budget is the leader's")
        _ = h.take()
        let worker = ReporterID(7)
        h.machine.reporterJoined(worker, now: h.now, into: &h.actions)
        #expect(h.addressed.map(\.1) == [.reporter(worker)], "a new reporter is told the budget")
        #expect(h.sent == [.budget(remaining: 30, granted: nil)])
        _ = h.take()
        h.send(.extend(seconds: 60, why: nil), from: worker)
        #expect(h.addressed.map(\.1) == [.reporter(worker)])
        _ = h.take()
        _ = h.machine.operatorExtend(by: .seconds(10), pastMax: false, now: h.now, into: &h.actions)
        #expect(h.addressed.map(\.1) == [.everyReporter], "an operator's change is news to all")
        _ = h.take()
        _ = h.machine.cancel(reason: .user, now: h.now, into: &h.actions)
        #expect(h.addressed.map(\.1) == [.everyReporter])
        _ = h.take()
        // A process that connects during the cancel learns of it, with the grace left.
        h.advance(.seconds(2))
        h.machine.reporterJoined(ReporterID(8), now: h.now, into: &h.actions)
        #expect(h.sent == [.cancel(reason: .user, grace: 3)])
        #expect(h.machine.reporters == [.leader, worker, ReporterID(8)])
        #expect(h.actions.contains(.emit(.reporters(count: 3))), "who reports is news for the display and the journal")
    }

    @Test func progressFromAnyReporterMovesTheDeadline() {
        var h = Harness(BudgetPolicy(budget: .seconds(2)))
        let worker = ReporterID(1)
        h.machine.reporterJoined(worker, now: h.now, into: &h.actions)
        for i in 1...10 {
            h.run(for: .seconds(1))
            h.send(.progress(Progress(completed: i)), from: worker)
        }
        #expect(h.machine.phase == .running)
        #expect(h.machine.lastProgress == Progress(completed: 10, reporter: "reporter 1"))
    }

    @Test func requireAdvanceIsJudgedPerBar() {
        // Nested bars: an outer epoch bar and an inner bar that starts at 0 each epoch.
        var h = Harness(BudgetPolicy(budget: .seconds(2), requireAdvance: true))
        for epoch in 0..<3 {
            h.send(.progress(Progress(completed: epoch, total: 3, bar: "epoch")))
            for step in 0..<4 {
                h.run(for: .milliseconds(900))
                h.send(.progress(Progress(completed: step, total: 4, bar: "batch")))
            }
        }
        #expect(h.machine.phase == .running, "an inner bar that restarts lower neither counts nor harms; its next step up counts")
        // Two reporters with bars of the same name are two bars.
        h.send(.progress(Progress(completed: 9, bar: "batch")), from: ReporterID(2))
        #expect(h.machine.lastProgress?.bar == "batch" && h.machine.lastProgress?.completed == 9)
        // A loop re-sending one number never advances, however many bars it has seen.
        for _ in 0..<5 {
            h.run(for: .milliseconds(700))
            h.send(.progress(Progress(completed: 3, total: 4, bar: "batch")))
        }
        #expect(h.machine.phase == .cancelling(.timeout))
    }

    @Test func aBarKeepsItsOwnTitleAndTheLastBarMovedIsShown() {
        var h = Harness(BudgetPolicy(budget: .seconds(30)))
        h.send(.progress(Progress(completed: 0, total: 10, title: "train", bar: "a")))
        h.send(.progress(Progress(completed: 0, total: 5, title: "eval", bar: "b")))
        h.send(.progress(Progress(completed: 3, bar: "a")))
        #expect(h.machine.lastProgress == Progress(completed: 3, total: 10, title: "train", bar: "a", reporter: "pid 42"))
        h.machine.reporterLeft(.leader, into: &h.actions)
        h.send(.progress(Progress(completed: 1, bar: "a")))
        #expect(h.machine.lastProgress == Progress(completed: 1, bar: "a", reporter: "reporter 0"), "a reporter's bars go with it")
    }

    @Test func barsAreBoundedPerTask() {
        var h = Harness(BudgetPolicy(budget: .seconds(30), requireAdvance: true))
        for i in 0..<(BarTable.limit * 4) {
            h.send(.progress(Progress(completed: 1, bar: "item-\(i)")))
        }
        _ = h.take()
        // The first bars were forgotten: reporting again, each is new and advances once.
        h.run(for: .seconds(29))
        h.send(.progress(Progress(completed: 1, bar: "item-0")))
        h.run(for: .seconds(29))
        #expect(h.machine.phase == .running)
    }
}
