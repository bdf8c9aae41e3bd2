import OvertimeTestSupport
import Testing
@testable import OvertimeCore

/// The queue's rules for sweeps and arrays on a fake clock: each element scheduled as a task
/// of its own, conditions on a whole sweep or on the element with the same index.
@Suite struct QueueMachineSweepTests {
    /// As `QueueMachineTests.Harness`, with elements named as the batch names them.
    struct Harness {
        var machine: QueueMachine
        var now = MonotonicInstant(nanoseconds: 1_000_000_000_000)
        var actions: [QueueMachine.Action] = []

        init(_ job: JobFile, succeeded: Set<String> = []) {
            machine = QueueMachine(job: job, startedAt: now, failFast: false, succeeded: succeeded)
            machine.schedule(now: now, into: &actions)
        }

        func index(_ name: String) -> Int {
            guard let i = machine.index(named: name) else { fatalError("no element \(name)") }
            return i
        }

        /// Names started since the last call.
        mutating func started() -> [String] {
            defer { actions.removeAll() }
            return actions.compactMap { if case let .start(i, _, _, _, _) = $0 { machine.elements.name(i) } else { nil } }
        }

        mutating func end(_ name: String, ok: Bool, condition: RetryCondition? = .exit) {
            machine.attemptEnded(index(name), .init(succeeded: ok, retryCondition: ok ? nil : condition), now: now, into: &actions)
        }

        mutating func advance(_ d: Duration) {
            now = now + d
            machine.schedule(now: now, into: &actions)
        }

        func state(_ name: String) -> QueueMachine.State {
            machine.state(of: index(name))
        }
    }

    static func array(_ name: String, _ text: String, maxRunning: Int? = nil, after: [Dependency] = [],
                      retries: RetryPolicy = .none, minStart: Duration = .seconds(5)) -> JobTask {
        let (indices, cap) = try! ArrayIndices.parse(text)
        return JobTask(name: name, command: ["true"], policy: BudgetPolicy(minStart: minStart), after: after, retry: retries,
                       sweep: Sweep(elements: .array(indices), maxRunning: maxRunning ?? cap))
    }

    static func task(_ name: String, after: [Dependency] = []) -> JobTask {
        JobTask(name: name, command: ["true"], after: after)
    }

    @Test func elementsStartInOrderUpToTheConcurrency() {
        var h = Harness(JobFile(concurrency: 2, tasks: [Self.array("s", "4-7"), Self.task("t")]))
        #expect(h.started() == ["s[4]", "s[5]"])
        h.end("s[5]", ok: true)
        #expect(h.started() == ["s[6]"])
        h.end("s[4]", ok: true)
        h.end("s[6]", ok: true)
        #expect(h.started() == ["s[7]", "t"])
    }

    @Test func maxRunningCapsTheArrayWhileAnotherTaskStillStarts() {
        var h = Harness(JobFile(concurrency: 4, tasks: [Self.array("s", "0-5%2"), Self.task("t")]))
        #expect(h.started() == ["s[0]", "s[1]", "t"], "two of s, and t beside them in a free slot")
        h.end("t", ok: true)
        #expect(h.started().isEmpty, "s is at its cap of 2 with slots free")
        h.end("s[0]", ok: true)
        #expect(h.started() == ["s[2]"])
        var field = Harness(JobFile(concurrency: 4, tasks: [Self.array("m", "0-5", maxRunning: 1), Self.task("t")]))
        #expect(field.started() == ["m[0]", "t"], "max-running caps as %N does")
    }

    @Test func aTaskAfterAWholeSweepWaitsForEveryElement() {
        var h = Harness(JobFile(concurrency: 8, tasks: [
            Self.array("s", "0-2"),
            Self.task("summary", after: [Dependency(task: "s")]),
            Self.task("cleanup", after: [Dependency(task: "s", condition: .done)]),
        ]))
        #expect(h.started() == ["s[0]", "s[1]", "s[2]"])
        h.end("s[0]", ok: true)
        #expect(h.started().isEmpty && h.state("summary") == .waiting)
        h.end("s[1]", ok: false)
        #expect(h.state("summary") == .skipped(.dependency("s[1]")), "skipped as soon as one element failed, s[2] still running")
        #expect(h.state("cleanup") == .waiting)
        #expect(h.started().isEmpty)
        h.end("s[2]", ok: true)
        #expect(h.started() == ["cleanup"], "done: once every element ended")
    }

    @Test func aWholeSweepOfSuccessesLetsTheDependentStart() {
        var h = Harness(JobFile(concurrency: 8, tasks: [Self.array("s", "0-1"), Self.task("summary", after: [Dependency(task: "s")])]))
        _ = h.started()
        h.end("s[1]", ok: true)
        #expect(h.started().isEmpty)
        h.end("s[0]", ok: true)
        #expect(h.started() == ["summary"])
    }

    @Test func sameIndexJoinsElementByElementAndASkipCascades() {
        var h = Harness(JobFile(concurrency: 20, tasks: [
            Self.array("shard", "0-4"),
            Self.array("merge", "0-4", after: [Dependency(task: "shard", sameIndex: true)]),
            Self.array("check", "0-4", after: [Dependency(task: "merge", sameIndex: true)]),
        ]))
        #expect(h.started() == (0...4).map { "shard[\($0)]" })
        h.end("shard[3]", ok: false)
        #expect(h.state("merge[3]") == .skipped(.dependency("shard[3]")))
        #expect(h.state("check[3]") == .skipped(.dependency("merge[3]")), "the skip goes one level further")
        for i in [0, 1, 2, 4] {
            #expect(h.state("merge[\(i)]") == .waiting && h.state("check[\(i)]") == .waiting)
        }
        #expect(h.started().isEmpty)
        h.end("shard[2]", ok: true)
        #expect(h.started() == ["merge[2]"], "merge[2] waits for shard[2] only")
        h.end("merge[2]", ok: true)
        #expect(h.started() == ["check[2]"])
    }

    @Test func sameIndexMatchesIndicesNotPositions() {
        // merge[5] is merge's first element and shard's third.
        var h = Harness(JobFile(concurrency: 20, tasks: [
            Self.array("shard", "3-7"),
            Self.array("merge", "5,7", after: [Dependency(task: "shard", sameIndex: true)]),
        ]))
        _ = h.started()
        h.end("shard[3]", ok: true)
        #expect(h.started().isEmpty)
        h.end("shard[5]", ok: true)
        #expect(h.started() == ["merge[5]"])
    }

    @Test func readyOnAWholeSweepWaitsForEveryElementToBeReady() {
        var h = Harness(JobFile(concurrency: 8, tasks: [
            Self.array("server", "0-1"), Self.task("client", after: [Dependency(task: "server", condition: .ready)]),
        ]))
        _ = h.started()
        h.machine.taskReady(h.index("server[0]"), now: h.now, into: &h.actions)
        #expect(h.started().isEmpty)
        h.machine.taskReady(h.index("server[1]"), now: h.now, into: &h.actions)
        #expect(h.started() == ["client"])
    }

    @Test func cancellingAWholeSweepCancelsWhatRunsAndSkipsWhatWaits() {
        var h = Harness(JobFile(concurrency: 2, tasks: [Self.array("s", "0-3"), Self.task("after", after: [Dependency(task: "s", condition: .done)])]))
        _ = h.started()
        h.end("s[0]", ok: true)
        #expect(h.started() == ["s[2]"])
        let words = h.machine.cancelEntry(0, now: h.now, into: &h.actions)
        #expect(words == "2 cancelling, 1 skipped before it started, 1 already finished")
        #expect(h.actions.contains(.cancel(index: h.index("s[1]"), reason: .user)))
        #expect(h.actions.contains(.cancel(index: h.index("s[2]"), reason: .user)))
        #expect(h.state("s[3]") == .skipped(.cancelled))
        #expect(h.started().isEmpty, "the two cancelled still hold their slots")
        h.end("s[1]", ok: false, condition: nil)
        h.end("s[2]", ok: false, condition: nil)
        #expect(h.started() == ["after"])
        #expect(h.state("s[1]") == .failed)
    }

    @Test func stopCancelsRunningElementsAndSkipsTheRest() {
        var h = Harness(JobFile(concurrency: 2, tasks: [Self.array("s", "0-9")]))
        _ = h.started()
        h.machine.stop(reason: .shutdown, now: h.now, into: &h.actions)
        #expect(h.actions.contains(.cancel(index: 0, reason: .shutdown)) && h.actions.contains(.cancel(index: 1, reason: .shutdown)))
        #expect((2...9).allSatisfy { h.state("s[\($0)]") == .skipped(.stopped(.shutdown)) })
        h.end("s[0]", ok: false, condition: nil)
        h.end("s[1]", ok: false, condition: nil)
        #expect(h.machine.isDone && h.started().isEmpty)
    }

    @Test func theBatchDeadlineSkipsAnArraysUnstartedElements() {
        var h = Harness(JobFile(concurrency: 1, deadline: .seconds(60), tasks: [Self.array("s", "0-3", minStart: .seconds(10))]))
        #expect(h.started() == ["s[0]"])
        h.advance(.seconds(49))
        #expect(h.started().isEmpty)
        h.advance(.seconds(2))
        #expect((1...3).allSatisfy { h.state("s[\($0)]") == .skipped(.deadline) }, "less than min-start left, before s[0] ends")
        #expect(h.state("s[0]") == .running(attempt: 1))
        h.end("s[0]", ok: true)
        #expect(h.machine.isDone)
    }

    @Test func aResumedSweepRunsOnlyWhatDidNotSucceed() {
        var h = Harness(JobFile(concurrency: 8, tasks: [Self.array("s", "0-3"), Self.task("summary", after: [Dependency(task: "s")])]),
                        succeeded: ["s[0]", "s[2]"])
        #expect(h.started() == ["s[1]", "s[3]"])
        #expect(h.state("s[0]") == .succeeded)
        h.end("s[1]", ok: true)
        #expect(h.started().isEmpty, "the whole sweep's dependent waits for the rest")
        h.end("s[3]", ok: true)
        #expect(h.started() == ["summary"])
    }

    @Test func aResumedElementMeetsItsSameIndexPartner() {
        var h = Harness(JobFile(concurrency: 8, tasks: [
            Self.array("shard", "0-1"), Self.array("merge", "0-1", after: [Dependency(task: "shard", sameIndex: true)]),
        ]), succeeded: ["shard[1]"])
        #expect(h.started() == ["shard[0]", "merge[1]"])
    }

    @Test func oneElementIsRetriedOnItsOwn() {
        let retry = RetryPolicy(maxRetries: 1, backoff: .seconds(1), maxBackoff: .seconds(60), on: [.exit])
        var h = Harness(JobFile(concurrency: 2, tasks: [Self.array("s", "0-1", retries: retry)]))
        _ = h.started()
        h.end("s[1]", ok: false)
        #expect(h.actions.contains(.retry(index: h.index("s[1]"), nextAttempt: 2, at: h.now + .seconds(1))))
        h.advance(.milliseconds(1100))
        #expect(h.started() == ["s[1]"])
        #expect(h.machine.attempts(of: h.index("s[1]")) == 2 && h.machine.attempts(of: h.index("s[0]")) == 1)
        h.end("s[1]", ok: false)
        #expect(h.state("s[1]") == .failed && h.state("s[0]") == .running(attempt: 1))
    }

    // On a thread of its own, as QueueMachineScaleTests' are.
    @Test func aMillionElementArrayRunsThrough() async throws {
        let count = 1_000_000
        let job = JobFile(concurrency: 8, tasks: [Self.array("shard", "0-\(count - 1)"), Self.task("summary", after: [Dependency(task: "shard")])])
        let tally = try await offThePool { QueueMachineScaleTests.drive(job) }
        #expect(tally.finishedActions == count + 1)
        #expect(tally.finished.allSatisfy { $0 == .succeeded })
        #expect(tally.startOrder.last == count, "the summary last, after every element")
        #expect(tally.peakRunning == 8)
        #expect(tally.seconds < 120, "took \(tally.seconds) s")
    }
}
