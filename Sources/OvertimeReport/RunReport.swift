import OvertimeCore
import OvertimeProtocol

/// A batch run read back from its run directory: what `overtime report` draws.
///
/// The journal (`events.jsonl`) is the whole input; `summary.json` only says that the run
/// ended (and when), and `job.json` only names the tasks the journal never reached. So a
/// report can be made of a run that still goes on, or of one that was killed: a task with
/// no end is drawn as running up to the journal's last line.
public struct RunReport: Sendable {
    /// How a task, or one attempt of it, came out: the report's colours (docs/report.md).
    public enum Outcome: String, Sendable, CaseIterable {
        case succeeded, failed, cancelled, killed, oom, skipped, running, waiting
    }

    /// Something that happened to an attempt at one instant, drawn where it happened.
    public struct Mark: Sendable, Equatable {
        public enum Kind: String, Sendable {
            case cancel, kill, `operator`, memory
            /// The advice to checkpoint before the hard end, and a straggler flagged.
            case advice, straggler
        }
        /// Milliseconds after the run's start.
        public var time: Int64
        public var kind: Kind
        /// The cancel's reason, the operator's action, what the memory warning said.
        public var text: String
    }

    public struct ProgressPoint: Sendable, Equatable {
        public var time: Int64
        /// 0…1.
        public var fraction: Double
    }

    /// One attempt of a task: one bar on the timeline.
    public struct Attempt: Sendable {
        public var number: Int
        /// Milliseconds after the run's start: when it was launched, and when it exited
        /// (nil: no end in the journal; still running, or the supervisor was killed).
        public var start: Int64
        public var end: Int64?
        public var outcome: Outcome = .running
        /// The `exited` line's own word (`signal`, `failed-to-start`, …), finer than `outcome`.
        public var exitedAs: String?
        public var exitCode: Int?
        public var cancelReason: String?
        /// What the cancel said beyond its reason (for a `timeout`, what went quiet).
        public var cancelWhy: String?
        /// At most `RunReport.markLimit`; `moreMarks` counts the rest.
        public var marks: [Mark] = []
        public var moreMarks = 0
        public var progress: [ProgressPoint] = []
        /// The last progress message's words.
        public var title: String?
        public var detail: String?
        /// Who the last progress shown came from, when several processes reported.
        public var reporter: String?
        public var peakMemory: Int?
        public var memorySource: String?
        /// The `memory-max` it ran under, in bytes (its `attempt` line's `memory_max`).
        public var memoryMax: Int?
        /// The GPU slots it held (`resources.gpu` of its `attempt` line), at most `RunReport.gpuLimit`.
        public var gpus: [String] = []
        /// The timeline lanes it is drawn in (`RunReport.lanes`): one per GPU it held, else one slot.
        public var lanes: [Int] = []
        /// Why another attempt followed it (the `retry` line's `because`).
        public var retryBecause: String?
        /// The phases it named, in order: each rules from its time to the next one's (or
        /// the attempt's end). At most `RunReport.phaseLimit`; `morePhases` counts the rest,
        /// and one more entry, `PhaseStart.leftOut`, says where they begin.
        public var phases: [PhaseStart] = []
        public var morePhases = 0
        /// Its stalls under `--on-stall warn`: from `stalled` to `resumed` (nil: to its end).
        public var stalls: [Stall] = []

        mutating func add(_ mark: Mark) {
            if marks.count < RunReport.markLimit { marks.append(mark) } else { moreMarks += 1 }
        }
    }

    public struct Task: Sendable {
        public var name: String
        /// Its last `finished` line's state, else `running` (an attempt is open or a retry
        /// is due) or `waiting` (nothing of it in the journal yet).
        public var state: Outcome = .waiting
        /// The colour it is counted under: a failed task's is its last attempt's
        /// (`cancelled`, `killed`, `oom` or `failed`).
        public var outcome: Outcome = .waiting
        public var reason: String?
        public var detail: String?
        public var exitCode: Int?
        public var attempts: [Attempt] = []
        /// When its `finished` line was written (a skipped task's only instant).
        public var finishedAt: Int64?
        /// Its last `result`, as compact JSON, cut as every text is (`RunReport.shown`).
        public var result: String?
        /// Its last result's fields, when the result is an object (a scalar result is one
        /// field, `result`): the columns a sweep's elements are compared by. At most
        /// `RunReport.fieldLimit`.
        public var resultFields: [ResultField] = []
        /// Succeeded in an earlier run this one resumed; not run again.
        public var resumed = false
        /// Its log's file name in the run directory's `logs/`, made from its whole name.
        public var logFile: String
        /// The journal says a diagnose command ran for it (a `diagnosing` line).
        public var diagnosed = false
        /// What its log holds of its last diagnosis (`RunReport.readDiagnoses`).
        public var diagnosis: String?
        /// An attempt of it was flagged far slower than its peers (a `straggler` line).
        public var straggler = false
        /// The sweep or array it is an element of (an index into `RunReport.groups`).
        public var group: Int?
        /// What tells an element apart, read from its name: a matrix's `key=value` pairs
        /// (`train[lr=0.01,seed=1]`), or an array's index under the key `index` (`shard[7]`).
        public var parameters: [Parameter] = []
        /// The highest peak of its attempts.
        public var peakMemory: Int? { attempts.compactMap(\.peakMemory).max() }

        public init(name: String, logFile: String) {
            self.name = name
            self.logFile = logFile
        }
    }

    /// One of an element's parameters, as its name writes it.
    public struct Parameter: Sendable, Equatable {
        public var key: String
        public var value: String
    }

    /// One field of a task's result: a number, a text (cut as every text is), a bool, or
    /// what else it held written as compact JSON text.
    public struct ResultField: Sendable, Equatable {
        public var key: String
        public var value: JSONValue
    }

    /// The elements of one sweep (`matrix`) or array (`array`) of the job: one row of the
    /// report, which opens to the table that compares them.
    public struct Group: Sendable, Equatable {
        public enum Kind: String, Sendable {
            case matrix, array
        }
        /// The job file's name for it: what its elements' names start with.
        public var name: String
        public var kind: Kind
        /// The keys of its elements' parameters, in the order their names first give them
        /// (a matrix's keys, then those `include` added; `index` for an array).
        public var keys: [String] = []
        /// Its elements, as indices into `RunReport.tasks`, in the journal's order.
        public var elements: [Int] = []
        /// Its row goes before `tasks[position]` among the tasks that are no element: the
        /// job file's place for it, or its first element's.
        public var position: Int
    }

    public struct Lane: Sendable, Equatable {
        public var label: String
        /// The GPU id it stands for; nil for a concurrency slot.
        public var gpu: String?
    }

    /// One run of the journal: a resumed run journals into the same directory under a
    /// new id.
    public struct Run: Sendable, Equatable {
        public var id: String
        /// Its first line, in milliseconds after the report's start.
        public var start: Int64
    }

    /// The runs of the journal, in order.
    public var runs: [Run] = []
    /// The earliest journal line's time, in milliseconds since 1970 (UTC).
    public var startedAt: Int64 = 0
    /// Milliseconds after the start: `summary.json`'s end, else the journal's last line.
    public var endedAt: Int64 = 0
    /// `summary.json` was there: the run ended and wrote its record.
    public var complete = false
    /// The summary's `stopped_by` (SIGINT, SIGTERM).
    public var stoppedBy: String?
    /// The job file's `concurrency`, when `job.json` was read.
    public var concurrency: Int?
    /// Where the page links the tasks' logs from: the run directory's `logs/` as seen from
    /// where the page is written (`RunReport.logLink`); nil: no links.
    public var logDirectory: String?
    public var tasks: [Task] = []
    /// The names of the phases the attempts named, each once, in the order first named
    /// (`Attempt.phases` point into it): at most `phaseNameLimit`, then `otherPhases`.
    public var phaseNames: [String] = []
    /// The sweeps and arrays whose elements are among `tasks`, or which the job file names.
    public var groups: [Group] = []
    public var lanes: [Lane] = []
    /// Journal lines that could not be read (a cut last line, garbage), passed over.
    public var unreadableLines = 0
    /// Journal lines read.
    public var lines = 0

    /// A text from the journal (a name, a title, a detail, a reason, a result) longer than
    /// this many Unicode scalars is cut (`shown`); the journal keeps it whole. A journal is
    /// anyone's file: ten 10 MB titles must not make a page no browser can open.
    public static let textLimit = 400
    /// Marks kept per attempt (cancels, kills, operator actions, memory warnings); the rest
    /// are counted (`moreMarks`).
    public static let markLimit = 100
    /// Fields kept of a task's result (a wider object is shown whole only as its JSON), of
    /// an element's parameters, and keys of a group's: each may be a column of the page.
    public static let fieldLimit = 32
    /// GPU ids kept per attempt.
    public static let gpuLimit = 64
    /// Progress points kept per attempt: enough for a line a few hundred pixels wide, few
    /// enough that a page of 5,000 long tasks stays small.
    public static let progressPointLimit = 160
    /// Phase changes kept per attempt (the journal keeps at most one a second after the
    /// first ten), and distinct phase names kept per run: each name is a colour and an
    /// entry of the legend, and a journal is anyone's file.
    public static let phaseLimit = 200
    public static let phaseNameLimit = 24
    /// What the phases past `phaseNameLimit` names are shown as.
    public static let otherPhases = "(other phases)"

    public var runID: String? { runs.last?.id }

    /// `text` as the page shows it: whole up to `textLimit` Unicode scalars, else its first
    /// `textLimit` scalars and how long it is in the journal: `… (9.5 MiB in the journal)`.
    /// Counted in scalars, not characters: one character may hold any number of combining
    /// marks, so a limit in characters would bound nothing.
    public static func shown(_ text: String) -> String {
        // Fewer bytes than the limit: no more scalars either, and nothing to count.
        guard text.utf8.count > textLimit else { return text }
        let scalars = text.unicodeScalars
        guard let end = scalars.index(scalars.startIndex, offsetBy: textLimit, limitedBy: scalars.endIndex),
              end < scalars.endIndex else { return text }
        return String(scalars[..<end]) + "… (\(ByteSize.text(UInt64(text.utf8.count))) in the journal)"
    }

    /// The tasks counted by outcome.
    public var counts: [Outcome: Int] {
        var counts: [Outcome: Int] = [:]
        for task in tasks { counts[task.outcome, default: 0] += 1 }
        return counts
    }
}

/// A run directory's files could not be made into a report.
public enum RunReportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The journal holds nothing but blank space: the run has not recorded anything yet.
    case emptyJournal
    /// The journal has lines, but none of them is a journal record.
    case noRecords

    public var message: String {
        switch self {
        case .emptyJournal: "the journal is empty: the run has not recorded anything yet"
        case .noRecords: "no line of the journal is a journal record (JSON objects with time, task and event)"
        }
    }

    public var description: String { message }
}

extension RunReport {
    /// Reads a run from its journal, and from its summary and job file when there.
    /// - Parameters:
    ///   - journal: `events.jsonl`'s bytes. Lines that are not journal records (a cut last
    ///     line, garbage) are counted and passed over; unknown events and fields are ignored.
    ///   - summary: `summary.json`'s bytes; nil for a run still going or killed.
    ///   - jobFile: `job.json`'s bytes, for the order of the tasks and those not reached yet.
    /// - Throws: `RunReportError` when no line of the journal is a record.
    public static func read(journal: [UInt8], summary: [UInt8]? = nil, jobFile: [UInt8]? = nil) throws(RunReportError) -> RunReport {
        var reader = JournalReader()
        if let jobFile, let job = try? JSONValue.parse(jobFile) { reader.declare(job) }
        for line in journal.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            reader.read(line)
        }
        guard reader.report.lines > 0 else {
            if journal.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
                throw .emptyJournal
            }
            throw .noRecords
        }
        if let summary, let value = try? JSONValue.parse(summary) { reader.conclude(value) }
        return reader.finish()
    }
}

/// Builds a `RunReport` line by line.
private struct JournalReader {
    var report = RunReport()
    private var indexByName: [String: Int] = [:]
    private var groupByName: [String: Int] = [:]
    private var phaseByName: [String: Int] = [:]
    /// Absolute times (ms since 1970) until `finish` makes them relative to the start: the
    /// earliest line's, which need not be the first (a line's time is its event's, and a
    /// line may be written a little after one that happened later).
    private var firstTime: Int64?
    private var lastTime: Int64 = .min
    private var summaryEnd: Int64?

    /// The job file's tasks, in its order: the report lists them so, reached or not. A
    /// sweep's or array's name is its group's, never a task's: its elements are the tasks.
    mutating func declare(_ job: JSONValue) {
        if case let .number(n)? = job["concurrency"] { report.concurrency = Int(exactly: n.rounded()) }
        guard case let .array(tasks)? = job["tasks"] else { return }
        for task in tasks {
            guard case let .string(name)? = task["name"] else { continue }
            if task["matrix"] != nil {
                _ = group(named: name, kind: .matrix)
            } else if task["array"] != nil {
                _ = group(named: name, kind: .array)
            } else {
                _ = index(of: name)
            }
        }
    }

    mutating func conclude(_ summary: JSONValue) {
        report.complete = true
        if case let .string(text)? = summary["finished"], let end = journalTimeMilliseconds(text) { summaryEnd = end }
        if let reason = summary["stopped_by"].text { report.stoppedBy = reason }
    }

    /// The task named `name` (the whole name: two that differ past the cut are two tasks).
    private mutating func index(of name: String) -> Int {
        if let index = indexByName[name] { return index }
        var task = RunReport.Task(name: RunReport.shown(name), logFile: JobElements.logFileName(for: name))
        if let element = SweepElementName(name) {
            let group = group(named: element.sweep, kind: element.kind)
            task.group = group
            task.parameters = element.parameters(as: report.groups[group].kind)
            report.groups[group].elements.append(report.tasks.count)
            for parameter in task.parameters where report.groups[group].keys.count < RunReport.fieldLimit
                && !report.groups[group].keys.contains(parameter.key) {
                report.groups[group].keys.append(parameter.key)
            }
        }
        report.tasks.append(task)
        indexByName[name] = report.tasks.count - 1
        return report.tasks.count - 1
    }

    /// `name`'s place in `phaseNames`, added if new; past `phaseNameLimit` names, the place
    /// of `otherPhases`.
    private mutating func phaseIndex(_ name: String) -> Int {
        if let index = phaseByName[name] { return index }
        if report.phaseNames.count >= RunReport.phaseNameLimit {
            if report.phaseNames.count == RunReport.phaseNameLimit { report.phaseNames.append(RunReport.otherPhases) }
            return RunReport.phaseNameLimit
        }
        report.phaseNames.append(RunReport.shown(name))
        phaseByName[name] = report.phaseNames.count - 1
        return report.phaseNames.count - 1
    }

    /// The open attempt entered phase `phase` (a place in `phaseNames`) at `time`.
    private static func enter(_ phase: Int, at time: Int64, in task: inout RunReport.Task) {
        withOpenAttempt(of: &task) { attempt in
            if attempt.phases.count < RunReport.phaseLimit {
                attempt.phases.append(.init(time: time, name: phase))
                return
            }
            // The last kept phase ends where the first one left out begins, not at the end.
            if attempt.morePhases == 0 { attempt.phases.append(.init(time: time, name: RunReport.PhaseStart.leftOut)) }
            attempt.morePhases += 1
        }
    }

    /// The group named `name`, made where the tasks so far end if it is new; `kind` is
    /// the job file's word for it, or what its first element's name looks like.
    private mutating func group(named name: String, kind: RunReport.Group.Kind) -> Int {
        if let index = groupByName[name] { return index }
        report.groups.append(RunReport.Group(name: RunReport.shown(name), kind: kind, position: report.tasks.count))
        groupByName[name] = report.groups.count - 1
        return report.groups.count - 1
    }

    mutating func read(_ line: ArraySlice<UInt8>) {
        let record = try? JSONValue.parse(Array(line))
        // The journal's own note that progress lines were held back while its disk stalled:
        // about no task, and not unreadable.
        if case .string("held-back")? = record?["event"] { return }
        guard let record,
              case let .string(timeText)? = record["time"], let time = journalTimeMilliseconds(timeText),
              case let .string(task)? = record["task"],
              case let .string(event)? = record["event"]
        else {
            report.unreadableLines += 1
            return
        }
        report.lines += 1
        firstTime = min(firstTime ?? time, time)
        lastTime = max(lastTime, time)
        if let run = record["run"].text, report.runs.last?.id != run, !report.runs.contains(where: { $0.id == run }) {
            report.runs.append(RunReport.Run(id: run, start: time))
        }
        let index = index(of: task)
        if event == "phase" {
            let phase = phaseIndex(record["name"].text ?? "?")
            Self.enter(phase, at: time, in: &report.tasks[index])
            return
        }
        // Static: a method of self here would copy the report for every line.
        Self.apply(event, record, at: time, to: &report.tasks[index])
    }

    private static func apply(_ event: String, _ record: JSONValue, at time: Int64, to task: inout RunReport.Task) {
        switch event {
        case "attempt":
            closeOpenAttempt(of: &task, at: time)
            var attempt = RunReport.Attempt(number: record["attempt"].int ?? task.attempts.count + 1, start: time)
            attempt.memoryMax = record["memory_max"].int
            if case let .array(ids)? = record["resources"]?["gpu"] {
                attempt.gpus = ids.prefix(RunReport.gpuLimit).compactMap { if case let .string(id) = $0 { RunReport.shown(id) } else { nil } }
            }
            task.attempts.append(attempt)
            task.state = .running
        case "started":
            // A journal without `attempt` lines still has a bar for each start.
            if task.attempts.last.map({ $0.end != nil }) ?? true {
                task.attempts.append(RunReport.Attempt(number: task.attempts.count + 1, start: time))
                task.state = .running
            }
        case "progress":
            withOpenAttempt(of: &task) { attempt in
                if let fraction = Self.fraction(record) { attempt.progress.append(.init(time: time, fraction: fraction)) }
                if let title = record["title"].text { attempt.title = title }
                if let detail = record["detail"].text { attempt.detail = detail }
                attempt.reporter = record["reporting"].int != nil ? record["reporter"].text : nil
            }
        case "cancel":
            withOpenAttempt(of: &task) { attempt in
                let reason = record["reason"].text ?? "cancel"
                attempt.cancelReason = reason
                attempt.cancelWhy = record["why"].text
                attempt.add(.init(time: time, kind: .cancel, text: reason))
            }
        case "kill":
            withOpenAttempt(of: &task) { $0.add(.init(time: time, kind: .kill, text: record["signal"].text ?? "SIGKILL")) }
        case "operator":
            withOpenAttempt(of: &task) { $0.add(.init(time: time, kind: .operator, text: record["action"].text ?? "operator")) }
        case "memory-warning":
            withOpenAttempt(of: &task) { attempt in
                let used = record["used"].int.map { " at \(ByteSize.text(UInt64(max(0, $0))))" } ?? ""
                attempt.add(.init(time: time, kind: .memory, text: "memory warning" + used))
            }
        case "diagnosing":
            task.diagnosed = true
        case "stalled":
            withOpenAttempt(of: &task) { attempt in
                if attempt.stalls.count < RunReport.markLimit { attempt.stalls.append(.init(start: time)) }
            }
        case "resumed":
            withOpenAttempt(of: &task) { attempt in
                if let last = attempt.stalls.indices.last, attempt.stalls[last].end == nil { attempt.stalls[last].end = time }
            }
        case "advice":
            withOpenAttempt(of: &task) { $0.add(.init(time: time, kind: .advice, text: "advised to " + (record["do"].text ?? "checkpoint"))) }
        case "straggler":
            task.straggler = true
            withOpenAttempt(of: &task) { attempt in
                let restarted = record["action"].text == "restart" ? ", restarted" : ""
                var share = ""
                if let rate = record["rate"].number, let median = record["median"].number, median > 0, rate / median < 10 {
                    share = " at \(Int((rate / median * 100).rounded())) % of its peers' pace"
                }
                attempt.add(.init(time: time, kind: .straggler, text: "straggler" + share + restarted))
            }
        case "result":
            if let value = record["value"] {
                task.result = RunReport.shown(value.jsonText)
                task.resultFields = RunReport.ResultField.fields(of: value)
            }
        case "exited":
            withOpenAttempt(of: &task) { attempt in
                attempt.end = time
                let word = record["outcome"].text
                attempt.exitedAs = word
                attempt.outcome = Self.outcome(exited: word)
                attempt.exitCode = record["exit_code"].int
                if let reason = record["cancel_reason"].text { attempt.cancelReason = reason }
                attempt.peakMemory = record["peak_memory"].int
                attempt.memorySource = record["memory_source"].text
                if let last = record["progress"], let fraction = Self.fraction(last) {
                    attempt.progress.append(.init(time: time, fraction: fraction))
                    if let title = last["title"].text { attempt.title = title }
                    if let detail = last["detail"].text { attempt.detail = detail }
                }
            }
        case "retry":
            if let last = task.attempts.indices.last { task.attempts[last].retryBecause = record["because"].text ?? "retry" }
        case "finished":
            closeOpenAttempt(of: &task, at: time)
            if case .bool(true)? = record["resumed"] {
                // Succeeded in the run this one resumed: what that run said of it stands.
                task.state = .succeeded
                task.resumed = true
                if task.finishedAt == nil { task.finishedAt = time }
                return
            }
            task.finishedAt = time
            switch record["state"].text {
            case "succeeded": task.state = .succeeded
            case "skipped": task.state = .skipped
            default: task.state = .failed
            }
            task.reason = record["reason"].text
            task.detail = record["detail"].text
            task.exitCode = record["exit_code"].int
        default:
            // Budget changes, heartbeats, thinned counts, events of later versions: not drawn.
            break
        }
    }

    /// An attempt left open by a lost `exited` line ends where the next record of its
    /// task begins: drawn as unfinished, never stretched over what followed.
    private static func closeOpenAttempt(of task: inout RunReport.Task, at time: Int64) {
        guard let last = task.attempts.indices.last, task.attempts[last].end == nil else { return }
        task.attempts[last].end = time
    }

    private static func withOpenAttempt(of task: inout RunReport.Task, _ body: (inout RunReport.Attempt) -> Void) {
        guard let last = task.attempts.indices.last, task.attempts[last].end == nil else { return }
        body(&task.attempts[last])
    }

    static func fraction(_ progress: JSONValue) -> Double? {
        if case let .number(f)? = progress["fraction"], f.isFinite { return min(1, max(0, f)) }
        if case let .number(done)? = progress["completed"], case let .number(total)? = progress["total"], total > 0 {
            return min(1, max(0, done / total))
        }
        return nil
    }

    static func outcome(exited word: String?) -> RunReport.Outcome {
        switch word {
        case "succeeded": .succeeded
        case "cancelled": .cancelled
        case "killed": .killed
        case "oom": .oom
        case nil: .running
        default: .failed  // failed, signal, failed-to-start, and words of later versions
        }
    }

    mutating func finish() -> RunReport {
        let start = firstTime ?? 0
        report.startedAt = start
        report.endedAt = max(0, max(lastTime, summaryEnd ?? lastTime) - start)
        report.runs = report.runs.map { RunReport.Run(id: $0.id, start: $0.start - start) }
        for i in report.tasks.indices {
            report.tasks[i].finishedAt = report.tasks[i].finishedAt.map { $0 - start }
            for j in report.tasks[i].attempts.indices {
                var attempt = report.tasks[i].attempts[j]
                attempt.start -= start
                attempt.end = attempt.end.map { $0 - start }
                attempt.marks = attempt.marks.map { var m = $0; m.time -= start; return m }
                attempt.phases = attempt.phases.map { var p = $0; p.time -= start; return p }
                attempt.stalls = attempt.stalls.map { RunReport.Stall(start: $0.start - start, end: $0.end.map { $0 - start }) }
                attempt.progress = Self.thin(attempt.progress.map { var p = $0; p.time -= start; return p })
                report.tasks[i].attempts[j] = attempt
            }
            report.tasks[i].outcome = Self.countedOutcome(report.tasks[i])
        }
        report.lanes = LanePacker.assign(&report.tasks, runEnd: report.endedAt)
        return report
    }

    static func countedOutcome(_ task: RunReport.Task) -> RunReport.Outcome {
        switch task.state {
        case .failed:
            let last = task.attempts.last?.outcome
            return [.cancelled, .killed, .oom].contains(last) ? last! : .failed
        case .running where task.attempts.isEmpty:
            return .waiting
        default:
            return task.state
        }
    }

    /// At most `progressPointLimit` points: the last of each equal slice of the attempt's
    /// time, and the first point, so the line keeps its shape and its ends.
    static func thin(_ points: [RunReport.ProgressPoint]) -> [RunReport.ProgressPoint] {
        let limit = RunReport.progressPointLimit
        guard points.count > limit, let first = points.first, let last = points.last else { return points }
        let span = max(1, last.time - first.time)
        var kept = [first]
        var lastBucket = 0
        for point in points.dropFirst() {
            // limit - 1 slices (the last point falls in the last one), plus the first point.
            let bucket = Int((point.time - first.time) * Int64(limit - 2) / span)
            if bucket == lastBucket, kept.count > 1 { kept[kept.count - 1] = point } else { kept.append(point) }
            lastBucket = bucket
        }
        return kept
    }
}

/// The journal holds no slot numbers: the timeline's lanes are computed from the attempts'
/// times. An attempt that held GPUs is drawn in the lane of each GPU id it held (so a lane
/// shows what one GPU did); every other attempt goes into the lowest-numbered slot free at
/// its start, packing them, by start time, into the fewest lanes that let no two overlap:
/// what the batch's concurrency slots were, if not which one was which.
enum LanePacker {
    static func assign(_ tasks: inout [RunReport.Task], runEnd: Int64) -> [RunReport.Lane] {
        var gpuIDs: [String] = []
        var refs: [(task: Int, attempt: Int, start: Int64, end: Int64)] = []
        for (i, task) in tasks.enumerated() {
            for (j, attempt) in task.attempts.enumerated() {
                for gpu in attempt.gpus where !gpuIDs.contains(gpu) { gpuIDs.append(gpu) }
                refs.append((i, j, attempt.start, attempt.end ?? runEnd))
            }
        }
        // GPU ids as numbers where they are (`2` before `10`).
        gpuIDs.sort { a, b in
            if let x = Int(a), let y = Int(b) { return x < y }
            return a < b
        }
        var lanes = gpuIDs.map { RunReport.Lane(label: "GPU \($0)", gpu: $0) }
        let gpuLane = Dictionary(uniqueKeysWithValues: gpuIDs.enumerated().map { ($1, $0) })
        refs.sort { ($0.start, $0.end) < ($1.start, $1.end) }
        var slotFreeAt: [Int64] = []
        for ref in refs {
            let gpus = tasks[ref.task].attempts[ref.attempt].gpus
            if !gpus.isEmpty {
                tasks[ref.task].attempts[ref.attempt].lanes = gpus.compactMap { gpuLane[$0] }
                continue
            }
            let slot = slotFreeAt.firstIndex(where: { $0 <= ref.start }) ?? slotFreeAt.count
            if slot == slotFreeAt.count { slotFreeAt.append(ref.end) } else { slotFreeAt[slot] = ref.end }
            tasks[ref.task].attempts[ref.attempt].lanes = [gpuIDs.count + slot]
        }
        lanes += slotFreeAt.indices.map { RunReport.Lane(label: "slot \($0 + 1)", gpu: nil) }
        return lanes
    }
}

private extension Optional where Wrapped == JSONValue {
    /// A string field as the page shows it: cut to `RunReport.textLimit` Unicode scalars.
    var text: String? {
        if case let .string(s)? = self { return RunReport.shown(s) }
        return nil
    }

    var int: Int? {
        if case let .number(n)? = self, n.isFinite, abs(n) < 9.0e15 { return Int(n.rounded()) }
        return nil
    }

    var number: Double? {
        if case let .number(n)? = self, n.isFinite { return n }
        return nil
    }
}
