import Testing
@testable import OvertimeCore
import OvertimeProtocol

/// The metrics page (docs/metrics.md) without a process: the exposition format, the
/// address parsing, and what the recorder makes of events.
@Suite struct MetricsTests {
    @Test func valuesAsTheFormatSpellsThem() {
        #expect(ExpositionText.format(.nan) == "NaN")
        #expect(ExpositionText.format(.infinity) == "+Inf")
        #expect(ExpositionText.format(-.infinity) == "-Inf")
        #expect(ExpositionText.format(0) == "0")
        #expect(ExpositionText.format(-0.0) == "0")
        #expect(ExpositionText.format(1_073_741_824) == "1073741824")
        #expect(ExpositionText.format(0.25) == "0.25")
        #expect(ExpositionText.format(1e-5) == "1e-05")
        #expect(ExpositionText.format(1_796_147_358.1765635) == "1796147358.1765635")
        #expect(ExpositionText.format(1e300) == "1e+300")
    }

    @Test func labelValuesAndHelpAreEscaped() {
        var text = ExpositionText()
        text.family("overtime_x", .gauge, help: "a \\ b\nc \"quoted\"")
        text.sample("overtime_x", ["task": "a\\b\"c\nd", "state": "running"], 1)
        text.sample("overtime_x", 2)
        #expect(String(decoding: text.bytes, as: UTF8.self) == """
        # HELP overtime_x a \\\\ b\\nc "quoted"
        # TYPE overtime_x gauge
        overtime_x{task="a\\\\b\\"c\\nd",state="running"} 1
        overtime_x 2

        """)
    }

    @Test func addresses() throws {
        #expect(try MetricsAddress.parse("9464") == MetricsAddress(host: "127.0.0.1", port: 9464))
        #expect(try MetricsAddress.parse(":0") == MetricsAddress(host: "127.0.0.1", port: 0))
        #expect(try MetricsAddress.parse("localhost:80") == MetricsAddress(host: "127.0.0.1", port: 80))
        #expect(try MetricsAddress.parse("0.0.0.0:9464") == MetricsAddress(host: "0.0.0.0", port: 9464))
        #expect(try MetricsAddress.parse("[::]:9464") == MetricsAddress(host: "::", port: 9464))
        #expect(MetricsAddress(host: "::1", port: 1).description == "[::1]:1")
        for bad in ["", "abc", "70000", "-1", ":", "1.2.3.4:", "::1:80", "[::1", "[::1]80", "١٢"] {
            #expect(throws: MetricsAddressError.self, "\(bad)") { try MetricsAddress.parse(bad) }
        }
    }

    private func event(_ ref: TaskRef, _ seconds: Int64, _ kind: TaskEvent.Kind) -> EncodedEvent {
        EncodedEvent(TaskEvent(task: ref, time: MonotonicInstant(nanoseconds: seconds * 1_000_000_000), kind: kind),
                     encoder: EventEncoder(runID: "r", wallOffsetNanoseconds: 0))
    }

    private func outcome(_ ref: TaskRef, _ termination: Termination, cancel: CancelReason? = nil) -> TaskOutcome {
        TaskOutcome(task: ref, pid: 1, termination: termination, cancelReason: cancel, killed: false, elapsed: .seconds(1),
                    lastProgress: nil, result: nil, protocolErrors: 0, wasReady: false)
    }

    private func feed(_ recorder: MetricsRecorder, _ events: [EncodedEvent]) {
        for var event in events { recorder.receive(&event) }
    }

    @Test func recorderCountsAttemptsCancelsAndOutcomesByTaskName() {
        let recorder = MetricsRecorder()
        let first = TaskRef(id: 1, name: "train"), retry = TaskRef(id: 2, name: "train"), other = TaskRef(id: 3, name: "eval")
        feed(recorder, [
            event(first, 1, .started(pid: 10)),
            event(first, 2, .progress(Progress(completed: 1, total: 4), remaining: nil)),
            event(first, 3, .cancelSent(reason: .timeout, grace: .seconds(1))),
            event(first, 4, .exited(outcome(first, .signaled(.terminate), cancel: .timeout))),
            event(retry, 5, .started(pid: 11)),
            event(retry, 6, .progress(Progress(completed: 4, total: 4), remaining: nil)),
            event(retry, 7, .exited(outcome(retry, .exited(0)))),
            event(other, 8, .exited(outcome(other, .failedToStart(SpawnFailure(errno: 2, message: "no such file", beforeExec: false))))),
        ])
        let train = recorder.record(named: "train")
        #expect(train?.attempts == 2 && train?.cancels == [.timeout: 1] && train?.lastSuccess?.nanoseconds == 7_000_000_000)
        #expect(train?.progress?.fractionCompleted == 1 && train?.lastProgress?.nanoseconds == 6_000_000_000)
        #expect(recorder.record(named: "eval")?.attempts == 1)
        #expect(recorder.cancels == [.timeout: 1])
        #expect(recorder.outcomes == [.cancelled: 1, .succeeded: 1, .failedToStart: 1])
    }

    @Test func aLargeSweepIsCountedNotGivenASeriesPerElement() {
        let recorder = MetricsRecorder()
        recorder.sweepsWithoutSeries = ["shard"]
        let element = TaskRef(id: 1, name: "shard[7]"), small = TaskRef(id: 2, name: "train[lr=0.01]")
        feed(recorder, [
            event(element, 1, .started(pid: 10)),
            event(element, 2, .cancelSent(reason: .timeout, grace: .seconds(1))),
            event(element, 3, .exited(outcome(element, .signaled(.terminate), cancel: .timeout))),
            event(small, 4, .started(pid: 11)),
        ])
        #expect(recorder.record(named: "shard[7]") == nil, "no record per element of a large sweep")
        #expect(recorder.cancels == [.timeout: 1] && recorder.outcomes == [.cancelled: 1], "but the run-wide counters count it")
        #expect(recorder.record(named: "train[lr=0.01]")?.attempts == 1)

        var info = RunMetrics(version: "9.9", runID: "r1", command: "batch", startedAt: MonotonicInstant(nanoseconds: 0),
                              wallOffsetNanoseconds: 0)
        info.sweepsWithoutSeries = ["shard"]
        var running = TaskStatus(name: "shard[8]", attempts: 1, state: .running,
                                 live: .init(pid: 12, elapsed: 1, remaining: 5, progress: nil))
        running.sweep = "shard"
        var rest = TaskStatus(name: "shard", state: .waiting)
        rest.elements = ["waiting": 990, "succeeded": 9]
        var smallElement = TaskStatus(name: "train[lr=0.01]", attempts: 1, state: .succeeded)
        smallElement.sweep = "train"
        let page = String(decoding: info.render([running, rest, smallElement], recorder), as: UTF8.self)
        #expect(page.contains("overtime_tasks{state=\"waiting\"} 990\n") && page.contains("overtime_tasks{state=\"succeeded\"} 10\n")
            && page.contains("overtime_tasks{state=\"running\"} 1\n"))
        #expect(page.contains("overtime_sweep_elements{sweep=\"shard\",state=\"waiting\"} 990\n")
            && page.contains("overtime_sweep_elements{sweep=\"shard\",state=\"running\"} 1\n")
            && page.contains("overtime_sweep_elements{sweep=\"train\",state=\"succeeded\"} 1\n"))
        #expect(!page.contains("task=\"shard"), "neither the large sweep's elements nor its row have task series")
        #expect(page.contains("overtime_task_state{task=\"train[lr=0.01]\",state=\"succeeded\"} 1\n"), "a small sweep's elements do")
        #expect(!info.allSucceeded([rest], recorder), "elements still waiting")
    }

    @Test func stragglersAreCountedByGroupAndPerTaskOnlyWithSeries() {
        let recorder = MetricsRecorder()
        recorder.sweepsWithoutSeries = ["shard"]
        recorder.stragglerGroups = ["shard": "shard", "train": "train", "eval-a": "evals", "eval-b": "evals"]
        let flag = TaskEvent.Kind.straggler(rate: 0.01, median: 0.04, below: 0.5, restart: false)
        let shard = TaskRef(id: 1, name: "shard[7]"), train = TaskRef(id: 2, name: "train[lr=0.1]"), eval = TaskRef(id: 3, name: "eval-b")
        feed(recorder, [
            event(shard, 1, .started(pid: 10)), event(shard, 2, flag),
            event(train, 1, .started(pid: 11)), event(train, 2, flag),
            event(eval, 1, .started(pid: 12)), event(eval, 2, flag),
        ])
        #expect(recorder.stragglers == ["shard": 1, "train": 1, "evals": 1])
        var info = RunMetrics(version: "9.9", runID: "r1", command: "batch", startedAt: MonotonicInstant(nanoseconds: 0),
                              wallOffsetNanoseconds: 0)
        info.sweepsWithoutSeries = ["shard"]
        var element = TaskStatus(name: "train[lr=0.1]", attempts: 1, state: .succeeded)
        element.sweep = "train"
        let page = String(decoding: info.render([element, TaskStatus(name: "eval-b", attempts: 1, state: .succeeded)], recorder), as: UTF8.self)
        for group in ["shard", "train", "evals"] { #expect(page.contains("overtime_stragglers_total{group=\"\(group)\"} 1\n"), "\(group)") }
        #expect(page.contains("overtime_task_stragglers_total{task=\"train[lr=0.1]\"} 1\n") && page.contains("overtime_task_stragglers_total{task=\"eval-b\"} 1\n"))
        #expect(!page.contains("overtime_task_stragglers_total{task=\"shard"), "a large sweep's elements have no series")
    }

    @Test func phaseWindowAndStallPerTaskButNotPerElementOfALargeSweep() {
        let recorder = MetricsRecorder()
        recorder.sweepsWithoutSeries = ["shard"]
        let fit = TaskRef(id: 1, name: "fit"), element = TaskRef(id: 2, name: "shard[3]")
        feed(recorder, [
            event(fit, 1, .started(pid: 10)),
            event(fit, 2, .stalled(quiet: .seconds(5), why: "quiet")),
            event(fit, 3, .advice(action: "checkpoint", remaining: .seconds(60), why: "late")),
            event(element, 4, .started(pid: 11)),
            event(element, 5, .stalled(quiet: .seconds(5), why: "quiet")),
            event(element, 6, .straggler(rate: 1, median: 4, below: 0.5, restart: false)),
        ])
        #expect(recorder.stalls == 2 && recorder.checkpointAdvice == 1 && recorder.stragglers == ["shard": 1], "a large sweep's elements count too")

        var info = RunMetrics(version: "9.9", runID: "r1", command: "batch", startedAt: MonotonicInstant(nanoseconds: 0),
                              wallOffsetNanoseconds: 0)
        info.sweepsWithoutSeries = ["shard"]
        var live = TaskStatus.Live(pid: 10, elapsed: 3, remaining: 40, progress: nil)
        (live.phase, live.window, live.stalled) = ("eval", 45, 2)
        var shard = TaskStatus(name: "shard[3]", attempts: 1, state: .running, live: live)
        shard.sweep = "shard"
        let quiet = TaskStatus(name: "plain", attempts: 1, state: .running, live: .init(pid: 12, elapsed: 1, remaining: nil, progress: nil))
        let page = String(decoding: info.render([TaskStatus(name: "fit", attempts: 1, state: .running, live: live), shard, quiet], recorder),
                          as: UTF8.self)
        #expect(page.contains("overtime_task_phase{task=\"fit\",phase=\"eval\"} 1\n"))
        #expect(page.contains("overtime_task_window_seconds{task=\"fit\"} 45\n"))
        #expect(page.contains("overtime_task_stalled{task=\"fit\"} 1\n") && page.contains("overtime_task_stalled{task=\"plain\"} 0\n"))
        #expect(!page.contains("overtime_task_phase{task=\"plain\"") && !page.contains("overtime_task_window_seconds{task=\"plain\""),
                "no phase named, no window: no series")
        #expect(!page.contains("task=\"shard"), "no series per element of a large sweep")
        #expect(page.contains("overtime_stalls_total 2\n") && page.contains("overtime_checkpoint_advice_total 1\n")
            && page.contains("overtime_stragglers_total{group=\"shard\"} 1\n"))
    }

    @Test func pageOfARunWhoseTaskEnded() {
        let recorder = MetricsRecorder()
        let ref = TaskRef(id: 1, name: "job \"1\"")
        feed(recorder, [
            event(ref, 1, .started(pid: 10)),
            event(ref, 2, .progress(Progress(fraction: 0.5), remaining: .seconds(3))),
            event(ref, 3, .exited(outcome(ref, .exited(0)))),
        ])
        let info = RunMetrics(version: "9.9", runID: "r1", command: "run", startedAt: MonotonicInstant(nanoseconds: 0),
                              wallOffsetNanoseconds: 1_000_000_000_000)
        // `overtime run` no longer lists a task that ended: the recorder's row stands in.
        let page = String(decoding: info.render([], recorder), as: UTF8.self)
        #expect(page.contains("overtime_build_info{version=\"9.9\"} 1\n"))
        #expect(page.contains("overtime_run_start_timestamp_seconds 1000\n"))
        #expect(page.contains("overtime_tasks{state=\"succeeded\"} 1\n") && page.contains("overtime_tasks{state=\"running\"} 0\n"))
        #expect(page.contains("overtime_task_state{task=\"job \\\"1\\\"\",state=\"succeeded\"} 1\n"))
        #expect(page.contains("overtime_task_progress_ratio{task=\"job \\\"1\\\"\"} 0.5\n"))
        #expect(page.contains("overtime_task_last_progress_timestamp_seconds{task=\"job \\\"1\\\"\"} 1002\n"))
        #expect(page.contains("overtime_attempts_ended_total{outcome=\"succeeded\"} 1\n"))
        #expect(!page.contains("overtime_task_budget_remaining_seconds{"), "an ended task has no budget")
        #expect(info.allSucceeded([], recorder))
        // Every family once, with HELP and TYPE before its samples.
        let types = page.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(Set(types).count == types.count && types.count == 29)
    }

    @Test func aSeriesPerConnectedReporterBounded() {
        let ranks = (0..<100).map { (i: Int) in TaskStatus.ReporterStatus(name: "rank \(i)", progress: Progress(completed: i, total: 100),
                                                              sinceReport: 1, closed: false) }
        // A reporter that is no rank (a pool worker, named by its pid) gets no series of its own.
        let pid = TaskStatus.ReporterStatus(name: "pid 4242", progress: Progress(completed: 1, total: 2), sinceReport: 1, closed: false)
        let many = [pid] + ranks
        let live = TaskStatus.Live(pid: 5, elapsed: 2, remaining: nil, progress: nil, reporters: 101, byReporter: many)
        let info = RunMetrics(version: "1", runID: "r", command: "run", startedAt: MonotonicInstant(nanoseconds: 0), wallOffsetNanoseconds: 0)
        let page = String(decoding: info.render([TaskStatus(name: "t", state: .running, live: live)], MetricsRecorder()), as: UTF8.self)
        #expect(page.contains("overtime_task_rank_progress_ratio{task=\"t\",rank=\"40\"} 0.4\n"))
        #expect(!page.contains("4242"), "no pid label")
        let series = page.split(separator: "\n").filter { $0.hasPrefix("overtime_task_rank_progress_ratio{") }
        #expect(series.count == RunMetrics.reportersPerTask - 1)
        // Once the task has one reporter left, status lists none and the series are gone.
        let one = TaskStatus.Live(pid: 5, elapsed: 2, remaining: nil, progress: nil, reporters: 1)
        let after = String(decoding: info.render([TaskStatus(name: "t", state: .running, live: one)], MetricsRecorder()), as: UTF8.self)
        #expect(!after.contains("overtime_task_rank_progress_ratio{"))
    }

    @Test func pageOfABatchFromItsStatuses() {
        let recorder = MetricsRecorder()
        let live = TaskStatus.Live(pid: 5, elapsed: 2, remaining: nil, progress: Progress(completed: 1, total: 4), memory: 4096, peakMemory: 8192,
                                   cpuUser: 0.5, cpuSystem: 0.25)
        let statuses = [TaskStatus(name: "a", attempts: 1, state: .running, live: live),
                        TaskStatus(name: "b", attempts: 0, state: .waiting)]
        let info = RunMetrics(version: "1", runID: "r", command: "batch", startedAt: MonotonicInstant(nanoseconds: 0),
                              deadline: MonotonicInstant(nanoseconds: 60_000_000_000), wallOffsetNanoseconds: 0)
        let page = String(decoding: info.render(statuses, recorder), as: UTF8.self)
        #expect(page.contains("overtime_batch_deadline_timestamp_seconds 60\n"))
        #expect(page.contains("overtime_tasks{state=\"running\"} 1\n") && page.contains("overtime_tasks{state=\"waiting\"} 1\n"))
        #expect(page.contains("overtime_task_progress_ratio{task=\"a\"} 0.25\n") && !page.contains("overtime_task_progress_ratio{task=\"b\"}"))
        #expect(page.contains("overtime_task_budget_remaining_seconds{task=\"a\"} +Inf\n"))
        #expect(page.contains("overtime_task_memory_bytes{task=\"a\"} 4096\n") && page.contains("overtime_task_memory_peak_bytes{task=\"a\"} 8192\n"))
        #expect(page.contains("overtime_task_cpu_seconds_total{task=\"a\",mode=\"system\"} 0.25\n"))
        #expect(!info.allSucceeded(statuses, recorder))
    }

    @Test func everyStateOfAStatusIsCounted() {
        let states: [TaskStatus.State] = [.running, .cancelling(.user), .exiting, .starting, .waiting, .retrying, .succeeded, .failed, .skipped]
        #expect(Set(states.map(\.word)) == Set(RunMetrics.states) && RunMetrics.states.count == states.count)
    }

    @Test func lastSuccessIsReadBackFromAnEarlierPage() {
        let info = RunMetrics(version: "1", runID: "r", command: "run", startedAt: MonotonicInstant(nanoseconds: 0),
                              lastSuccess: 1_796_000_000.5, wallOffsetNanoseconds: 0)
        let page = info.render([], MetricsRecorder())
        #expect(RunMetrics.lastSuccess(inPage: page) == 1_796_000_000.5)
        #expect(RunMetrics.lastSuccess(inPage: Array("# HELP overtime_last_success_timestamp_seconds x\n".utf8)) == nil)
    }
}
