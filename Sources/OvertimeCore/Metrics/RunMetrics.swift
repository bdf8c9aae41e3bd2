import OvertimeProtocol

/// What a supervisor's metrics page shows (docs/metrics.md), rendered from its live state
/// on request: the tasks as the control socket's `status` sees them, and what the
/// `MetricsRecorder` counted. Nothing is kept between renderings.
///
/// Every family a run can have is written even when it has no samples yet (its HELP and
/// TYPE alone), and the aggregate counters have a sample for every reason and outcome from
/// the start, so a query or an alert finds its series at zero rather than absent.
public struct RunMetrics: Sendable {
    /// Overtime's version (`overtime_build_info`).
    public var version: String
    public var runID: String
    /// `run` or `batch`.
    public var command: String
    public var startedAt: MonotonicInstant
    /// The batch's deadline (the job file's `deadline`), when it has one.
    public var deadline: MonotonicInstant?
    /// When the run (every task of it) last ended in success, in Unix seconds: this run's
    /// end, or carried over from the metrics file an earlier run left.
    public var lastSuccess: Double?
    /// Wall clock minus monotonic clock, in nanoseconds (`EventEncoder.wallOffsetNanoseconds`).
    public var wallOffsetNanoseconds: Int64
    /// The sweeps and arrays of more than `largestSweepWithSeries` elements: their elements
    /// have no `overtime_task_` series (one per element is the cardinality of a shard
    /// list); `overtime_sweep_elements` counts them.
    public var sweepsWithoutSeries: Set<String> = []

    /// The most elements a sweep may have for each to have series of its own.
    public static let largestSweepWithSeries = 100

    public init(version: String, runID: String, command: String, startedAt: MonotonicInstant,
                deadline: MonotonicInstant? = nil, lastSuccess: Double? = nil, wallOffsetNanoseconds: Int64) {
        self.version = version
        self.runID = runID
        self.command = command
        self.startedAt = startedAt
        self.deadline = deadline
        self.lastSuccess = lastSuccess
        self.wallOffsetNanoseconds = wallOffsetNanoseconds
    }

    /// Every state `overtime_tasks` counts, in the order written.
    public static let states: [String] = ["waiting", "starting", "running", "cancelling", "exiting", "retrying", "succeeded", "failed", "skipped"]

    /// A monotonic instant as Unix seconds.
    public func unixSeconds(_ instant: MonotonicInstant) -> Double {
        Double(instant.nanoseconds &+ wallOffsetNanoseconds) / 1e9
    }

    /// Reporter series kept per task: one per connected reporter, and never more than this,
    /// so that a task that forks a reporter per item cannot grow the page without bound.
    static let reportersPerTask = 64


    /// One task as a page shows it.
    struct TaskRow {
        var name: String
        var state: String
        var live: TaskStatus.Live?
        var record: MetricsRecorder.TaskRecord?
        var sweep: String?
        /// For a row standing for a sweep's unlisted elements, how many in each state.
        var elements: [String: Int]?
    }

    /// The rows: every task `statuses` lists, then those the recorder saw end that the
    /// supervisor no longer lists (`overtime run` forgets a task once it has exited).
    func rows(_ statuses: [TaskStatus], _ recorder: MetricsRecorder) -> [TaskRow] {
        var rows = statuses.map {
            TaskRow(name: $0.name, state: $0.state.word, live: $0.live, record: recorder.record(named: $0.name), sweep: $0.sweep,
                    elements: $0.elements)
        }
        if recorder.tasks.count > 0 {
            let listed = Set(statuses.map(\.name))
            for record in recorder.tasks where !listed.contains(record.name) && !record.running {
                guard let outcome = record.lastOutcome else { continue }
                rows.append(TaskRow(name: record.name, state: outcome.succeeded ? "succeeded" : "failed", live: nil, record: record))
            }
        }
        return rows
    }

    /// True when every task is known and has succeeded: the run ended in success.
    public func allSucceeded(_ statuses: [TaskStatus], _ recorder: MetricsRecorder) -> Bool {
        let rows = rows(statuses, recorder)
        return !rows.isEmpty && rows.allSatisfy { $0.state == "succeeded" && ($0.elements ?? [:]).allSatisfy { $0.key == "succeeded" || $0.value == 0 } }
    }

    /// The page in the text exposition format.
    public func render(_ statuses: [TaskStatus], _ recorder: MetricsRecorder) -> [UInt8] {
        let rows = rows(statuses, recorder)
        var text = ExpositionText(capacity: 2048 + rows.count * 600)

        text.family("overtime_build_info", .gauge, help: "Always 1; the version of Overtime that serves these metrics.")
        text.sample("overtime_build_info", ["version": version], 1)
        text.family("overtime_run_info", .gauge, help: "Always 1; the run's id and whether it is a single task (run) or a queue (batch).")
        text.sample("overtime_run_info", ["run": runID, "command": command], 1)
        text.family("overtime_run_start_timestamp_seconds", .gauge, help: "When the supervisor started, in Unix seconds.")
        text.sample("overtime_run_start_timestamp_seconds", unixSeconds(startedAt))
        text.family("overtime_batch_deadline_timestamp_seconds", .gauge, help: "When the batch's deadline (its job file's deadline) falls, in Unix seconds; absent without one.")
        if let deadline { text.sample("overtime_batch_deadline_timestamp_seconds", unixSeconds(deadline)) }
        text.family("overtime_last_success_timestamp_seconds", .gauge, help: "When a run last ended with every task succeeded, in Unix seconds (kept across runs in a --metrics-file); absent before the first.")
        if let lastSuccess { text.sample("overtime_last_success_timestamp_seconds", lastSuccess) }

        var byState: [String: Int] = [:]
        var bySweep: [String: [String: Int]] = [:]
        for row in rows {
            let counts = row.elements ?? [row.state: 1]
            for (state, n) in counts {
                byState[state, default: 0] += n
                if let sweep = row.sweep ?? (row.elements != nil ? row.name : nil) { bySweep[sweep, default: [:]][state, default: 0] += n }
            }
        }
        text.family("overtime_tasks", .gauge, help: "Tasks in each state.")
        for state in Self.states { text.sample("overtime_tasks", ["state": state], Double(byState[state] ?? 0)) }
        text.family("overtime_cancels_total", .counter, help: "Cancels sent to tasks, by reason.")
        for reason in CancelReason.allCases {
            text.sample("overtime_cancels_total", ["reason": reason.rawValue], Double(recorder.cancels[reason] ?? 0))
        }
        text.family("overtime_attempts_ended_total", .counter, help: "Task attempts that ended, by how they ended.")
        for kind in OutcomeKind.allCases {
            text.sample("overtime_attempts_ended_total", ["outcome": kind.rawValue], Double(recorder.outcomes[kind] ?? 0))
        }
        text.family("overtime_protocol_errors_total", .counter, help: "Bad lines tasks wrote on their channels (dropped; the tasks go on).")
        text.sample("overtime_protocol_errors_total", Double(recorder.protocolErrors))
        text.family("overtime_stalls_total", .counter, help: "Times a task under --on-stall warn passed its soft deadline and was marked stalled.")
        text.sample("overtime_stalls_total", Double(recorder.stalls))
        text.family("overtime_checkpoint_advice_total", .counter, help: "Advice to checkpoint sent to tasks whose pace would not finish before their hard end.")
        text.sample("overtime_checkpoint_advice_total", Double(recorder.checkpointAdvice))

        text.family("overtime_stragglers_total", .counter, help: "Tasks flagged far slower than their running peers (stragglers), by the group they were compared in: a sweep's or array's name, or a peer-group.")
        for group in recorder.stragglers.keys.sorted() {
            text.sample("overtime_stragglers_total", ["group": group], Double(recorder.stragglers[group]!))
        }

        text.family("overtime_sweep_elements", .gauge, help: "The elements of each sweep or array in each state.")
        for sweep in bySweep.keys.sorted() {
            for state in Self.states { text.sample("overtime_sweep_elements", ["sweep": sweep, "state": state], Double(bySweep[sweep]![state] ?? 0)) }
        }

        writeTaskFamilies(rows.filter { $0.elements == nil && !($0.sweep.map(sweepsWithoutSeries.contains) ?? false) }, into: &text)
        return text.bytes
    }

    private func writeTaskFamilies(_ rows: [TaskRow], into text: inout ExpositionText) {
        text.family("overtime_task_state", .gauge, help: "Always 1, for each task in its current state.")
        for row in rows { text.sample("overtime_task_state", ["task": row.name, "state": row.state], 1) }

        text.family("overtime_task_attempts_total", .counter, help: "Times the task was started (a batch retries).")
        for row in rows { text.sample("overtime_task_attempts_total", ["task": row.name], Double(row.record?.attempts ?? 0)) }

        text.family("overtime_task_cancels_total", .counter, help: "Cancels sent to the task, by reason; only reasons that happened.")
        for row in rows {
            guard let cancels = row.record?.cancels, !cancels.isEmpty else { continue }
            for reason in CancelReason.allCases {
                if let count = cancels[reason] { text.sample("overtime_task_cancels_total", ["task": row.name, "reason": reason.rawValue], Double(count)) }
            }
        }

        text.family("overtime_task_stragglers_total", .counter, help: "Times an attempt of the task was flagged far slower than its running peers; only tasks flagged.")
        for row in rows {
            if let count = row.record?.stragglers, count > 0 { text.sample("overtime_task_stragglers_total", ["task": row.name], Double(count)) }
        }

        text.family("overtime_task_progress_ratio", .gauge, help: "The share of its work the task reported done, 0 to 1; absent before its first progress with a fraction or a total.")
        for row in rows {
            if let ratio = (row.live?.progress ?? row.record?.progress)?.fractionCompleted {
                text.sample("overtime_task_progress_ratio", ["task": row.name], ratio)
            }
        }

        text.family("overtime_task_rank_progress_ratio", .gauge, help: "The share done of each connected rank's own latest bar, 0 to 1, while the task has more than one reporter; a rank's series goes when it disconnects.")
        for row in rows {
            for reporter in (row.live?.byReporter ?? []).prefix(Self.reportersPerTask) {
                // Only ranks are labels: a rank is stable for the job and bounded by its
                // world size, where a pid label would be a new series for every process.
                if let rank = ReporterName.rank(reporter.name), let ratio = reporter.progress?.fractionCompleted {
                    text.sample("overtime_task_rank_progress_ratio", ["task": row.name, "rank": rank], ratio)
                }
            }
        }

        text.family("overtime_task_last_progress_timestamp_seconds", .gauge, help: "When the task last reported progress, in Unix seconds.")
        for row in rows {
            if let last = row.record?.lastProgress { text.sample("overtime_task_last_progress_timestamp_seconds", ["task": row.name], unixSeconds(last)) }
        }

        text.family("overtime_task_budget_remaining_seconds", .gauge, help: "Time left before the running task's deadline; +Inf when it has no limit.")
        for row in rows {
            if let live = row.live { text.sample("overtime_task_budget_remaining_seconds", ["task": row.name], live.remaining ?? .infinity) }
        }

        text.family("overtime_task_phase", .gauge, help: "Always 1, for each running task that named a phase, in the phase it named last.")
        for row in rows {
            if let phase = row.live?.phase { text.sample("overtime_task_phase", ["task": row.name, "phase": phase], 1) }
        }

        text.family("overtime_task_window_seconds", .gauge, help: "How far a report of the running task moves its deadline ahead now: its phase's window, learned or set, or its own; absent when it has none.")
        for row in rows {
            if let window = row.live?.window { text.sample("overtime_task_window_seconds", ["task": row.name], window) }
        }

        text.family("overtime_task_stalled", .gauge, help: "1 while the running task is stalled under --on-stall warn, else 0.")
        for row in rows {
            if let live = row.live { text.sample("overtime_task_stalled", ["task": row.name], live.stalled == nil ? 0 : 1) }
        }

        text.family("overtime_task_elapsed_seconds", .gauge, help: "Time since the running task's attempt started.")
        for row in rows {
            if let live = row.live { text.sample("overtime_task_elapsed_seconds", ["task": row.name], live.elapsed) }
        }

        text.family("overtime_task_memory_bytes", .gauge, help: "The running task's memory (all its processes), where something measures it.")
        for row in rows {
            if let memory = row.live?.memory { text.sample("overtime_task_memory_bytes", ["task": row.name], Double(memory)) }
        }

        text.family("overtime_task_memory_peak_bytes", .gauge, help: "The task's highest memory in its current or last attempt, where something measures it.")
        for row in rows {
            if let peak = row.live?.peakMemory ?? (row.live == nil ? row.record?.lastOutcome?.usage.peakMemory : nil) {
                text.sample("overtime_task_memory_peak_bytes", ["task": row.name], Double(peak))
            }
        }

        text.family("overtime_task_cpu_seconds_total", .counter, help: "CPU time of the task's current or last attempt, by mode (user, system), where something measures it.")
        for row in rows {
            let usage = row.record?.lastOutcome?.usage
            let user = row.live.map { $0.cpuUser } ?? usage?.cpuUser?.seconds
            let system = row.live.map { $0.cpuSystem } ?? usage?.cpuSystem?.seconds
            if let user { text.sample("overtime_task_cpu_seconds_total", ["task": row.name, "mode": "user"], user) }
            if let system { text.sample("overtime_task_cpu_seconds_total", ["task": row.name, "mode": "system"], system) }
        }

        text.family("overtime_task_last_success_timestamp_seconds", .gauge, help: "When an attempt of the task last ended in success, in Unix seconds.")
        for row in rows {
            if let success = row.record?.lastSuccess { text.sample("overtime_task_last_success_timestamp_seconds", ["task": row.name], unixSeconds(success)) }
        }
    }

    /// The value of `overtime_last_success_timestamp_seconds` in a page an earlier run
    /// wrote (a `--metrics-file`), so that the file keeps it across a failed run; nil when
    /// the page has none.
    public static func lastSuccess(inPage page: [UInt8]) -> Double? {
        let prefix = Array("overtime_last_success_timestamp_seconds ".utf8)
        for line in page.split(separator: UInt8(ascii: "\n")) where line.starts(with: prefix) {
            return Double(String(decoding: line.dropFirst(prefix.count), as: UTF8.self))
        }
        return nil
    }
}
