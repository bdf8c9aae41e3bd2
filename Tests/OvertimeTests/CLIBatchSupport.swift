// Support for the end-to-end tests of `overtime batch`: a job file written into a scratch
// directory, one recording worker that every task runs, and readers for what a batch leaves
// behind (the worker's records, events.jsonl, summary.json, logs/<task>.log).
//
// Builds on CLISupport.swift (CLIScratch, CLIProcess, cliRun, CLIJSON). Every helper type
// here is prefixed `CLIBatch`.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - The worker

enum CLIBatchWorker {
    /// A Python interpreter to run workers with. A version manager's shim (pyenv) costs most
    /// of a second a start, which dozens of tasks cannot afford: prefer a real binary.
    static let python: String = {
        for candidate in ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "python3"
    }()

    /// Runs its arguments after the record directory as steps, in order, and records what it
    /// saw in `RECDIR/<task>.<attempt>.{start,ready,cancel,end}` (JSON, written atomically,
    /// times from CLOCK_MONOTONIC, the clock the test reads too):
    ///
    /// - `sleep=S`; `exit=N`; `print=TEXT` (stdout), `eprint=TEXT` (stderr), `print-env=NAME`
    ///   (`NAME=value` on stdout);
    /// - `ready`: note the time, then send `{"type":"ready"}`;
    /// - `wait-file=PATH`: wait (at most 20 s) until PATH exists;
    /// - `fail-until=K` (or `K:N`): exit 1 (or N) while OVERTIME_ATTEMPT ≤ K;
    /// - `wait-cancel=S`: wait at most S seconds for a cancel message on fd 3, note its
    ///   reason (SIGTERM is caught, and awaited once a cancel came);
    /// - `result=JSON`, `progress=N` (N progress messages, quickly);
    /// - `touch=PATH`: append the task's name to PATH; `exit-if-exists=PATH`: exit 0 if it exists.
    static let body = #"""
    recdir = sys.argv[1]
    steps = sys.argv[2:]
    task = os.environ.get("OVERTIME_TASK", "?")
    attempt = int(os.environ.get("OVERTIME_ATTEMPT", "0"))
    base = os.path.join(recdir, "%s.%d" % (task, attempt))
    if any(s.startswith("wait-cancel") for s in steps):
        catch_term()
    note(base + ".start", json.dumps({
        "task": task, "attempt": attempt, "pid": os.getpid(), "start": time.monotonic(),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu": os.environ.get("OVERTIME_RESOURCE_GPU"),
        "mem": os.environ.get("OVERTIME_RESOURCE_MEM_GB"),
        "cwd": os.getcwd(),
        "marker": os.environ.get("CLI_BATCH_MARKER"),
    }))

    def end(code):
        sys.stdout.flush()
        sys.stderr.flush()
        note(base + ".end", json.dumps({"end": time.monotonic(), "code": code}))
        os._exit(code)

    for step in steps:
        key, _, value = step.partition("=")
        if key == "sleep":
            time.sleep(float(value))
        elif key == "exit":
            end(int(value))
        elif key == "print":
            print(value, flush=True)
        elif key == "eprint":
            print(value, file=sys.stderr, flush=True)
        elif key == "print-env":
            print("%s=%s" % (value, os.environ.get(value, "")), flush=True)
        elif key == "ready":
            note(base + ".ready", json.dumps({"ready": time.monotonic()}))
            send({"type": "ready"})
        elif key == "wait-file":
            limit = time.monotonic() + 20
            while not os.path.exists(value) and time.monotonic() < limit:
                time.sleep(0.02)
        elif key == "fail-until":
            until, _, status = value.partition(":")
            if attempt <= int(until):
                end(int(status or "1"))
        elif key == "wait-cancel":
            limit = time.monotonic() + float(value)
            reason = None
            while True:
                m = recv(limit - time.monotonic())
                if m is None:
                    break
                if m.get("type") == "cancel":
                    reason = m.get("reason")
                    break
            note(base + ".cancel", json.dumps({"reason": reason, "time": time.monotonic()}))
            if reason is not None:
                await_term()
        elif key == "result":
            send({"type": "result", "value": json.loads(value)})
        elif key == "progress":
            n = int(value)
            for i in range(n):
                send({"type": "progress", "completed": i + 1, "total": n})
        elif key == "touch":
            with open(value, "a") as f:
                f.write(task + "\n")
        elif key == "exit-if-exists":
            if os.path.exists(value):
                end(0)
        else:
            print("worker: unknown step " + step, file=sys.stderr, flush=True)
            end(99)
    end(0)
    """#
}

// MARK: - What the worker recorded

/// One attempt of one task, as the worker saw it.
struct CLIBatchRecord: Sendable, CustomStringConvertible {
    var task: String
    var attempt: Int
    var pid: Int32
    /// CLOCK_MONOTONIC seconds.
    var start: Double
    /// nil when it never got to its end (killed).
    var end: Double?
    var exitCode: Int?
    var ready: Double?
    /// The cancel reason it read on fd 3; `.some(nil)` when it waited and none came.
    var cancel: String??
    var cuda: String?
    var gpu: String?
    var mem: String?
    var cwd: String?
    var marker: String?

    var description: String {
        "\(task)#\(attempt) [\(String(format: "%.3f", start)) … \(end.map { String(format: "%.3f", $0) } ?? "?")]"
            + (cuda.map { " cuda=\($0)" } ?? "") + (mem.map { " mem=\($0)" } ?? "")
    }

    /// The end, or `open` for an attempt that never recorded one.
    func end(or open: Double) -> Double { end ?? open }
}

enum CLIBatchClock {
    /// CLOCK_MONOTONIC now, in seconds (what Python's time.monotonic() reads).
    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}

enum CLIBatchIntervals {
    /// The most intervals open at one instant (an end meets a start without overlapping).
    static func maxOverlap(_ intervals: [(start: Double, end: Double)]) -> Int {
        // Ends sort before starts at the same instant.
        var points: [(time: Double, delta: Int)] = []
        for interval in intervals {
            points.append((interval.start, 1))
            points.append((interval.end, -1))
        }
        points.sort { a, b in a.time == b.time ? a.delta < b.delta : a.time < b.time }
        var open = 0
        var most = 0
        for (_, delta) in points {
            open += delta
            most = max(most, open)
        }
        return most
    }

    static func overlap(_ a: (start: Double, end: Double), _ b: (start: Double, end: Double)) -> Bool {
        a.start < b.end && b.start < a.end
    }
}

// MARK: - A batch under test

/// A scratch directory holding a job file, the worker, the worker's records and the run
/// directory; runs `overtime batch` on them and reads the results.
final class CLIBatchFixture: @unchecked Sendable {
    let scratch: CLIScratch
    let worker: String
    let records: String
    let runDirectory: String
    private(set) var jobPath: String = ""

    init() throws {
        scratch = try CLIScratch()
        worker = try scratch.python("worker.py", CLIBatchWorker.body)
        records = scratch.path("rec")
        try FileManager.default.createDirectory(atPath: records, withIntermediateDirectories: true)
        runDirectory = scratch.path("run")
    }

    func path(_ name: String) -> String { scratch.path(name) }

    /// The argv of a task that runs the worker with `steps`.
    func command(_ steps: [String]) -> [String] {
        [CLIBatchWorker.python, worker, records] + steps
    }

    /// A task object: the worker with `steps`, plus any other fields.
    func task(_ name: String, _ steps: [String] = [], _ fields: [String: Any] = [:]) -> [String: Any] {
        var object = fields
        object["name"] = name
        object["command"] = command(steps)
        return object
    }

    /// Writes the job file (`job` serialized as JSON) and returns its path.
    @discardableResult
    func writeJob(_ job: [String: Any]) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: job, options: [.prettyPrinted, .sortedKeys])
        jobPath = try scratch.write("job.json", String(decoding: data, as: UTF8.self))
        return jobPath
    }

    /// Writes a job file as given, byte for byte.
    @discardableResult
    func writeJobText(_ text: String) throws -> String {
        jobPath = try scratch.write("job.json", text)
        return jobPath
    }

    /// The test's environment without the variables a batch sets for its tasks, so a task
    /// that sees one was given it by the batch.
    static let environment: [String: String] = {
        var env = ProcessInfo.processInfo.environment
        for key in env.keys where key == "CUDA_VISIBLE_DEVICES" || key.hasPrefix("OVERTIME_") {
            env.removeValue(forKey: key)
        }
        return env
    }()

    /// `overtime batch JOB --run-dir RUN ARGS...`, run to the end.
    func run(_ extra: [String] = [], output: CLIOutputMode = .files, timeout: Duration = .seconds(40)) async throws -> CLIResult {
        try await cliRun(["batch", jobPath, "--run-dir", runDirectory] + extra, in: scratch,
                         environment: Self.environment, output: output, timeout: timeout)
    }

    /// The same, started but not waited for (to signal it).
    func start(_ extra: [String] = [], output: CLIOutputMode = .files) async throws -> CLIProcess {
        let process = CLIProcess(["batch", jobPath, "--run-dir", runDirectory] + extra,
                                 environment: Self.environment, output: output, in: scratch)
        try await process.start()
        return process
    }

    // MARK: Records

    func loadRecords() -> [CLIBatchRecord] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: records)) ?? []
        var result: [CLIBatchRecord] = []
        for name in names where name.hasSuffix(".start") {
            let stem = String(name.dropLast(".start".count))
            guard let start = readObject(records + "/" + name) else { continue }
            var record = CLIBatchRecord(
                task: start["task"] as? String ?? "?", attempt: CLIJSON.int(start["attempt"]) ?? 0,
                pid: Int32(CLIJSON.int(start["pid"]) ?? 0), start: CLIJSON.double(start["start"]) ?? 0,
                cuda: start["cuda"] as? String, gpu: start["gpu"] as? String, mem: start["mem"] as? String,
                cwd: start["cwd"] as? String, marker: start["marker"] as? String)
            if let end = readObject(records + "/" + stem + ".end") {
                record.end = CLIJSON.double(end["end"])
                record.exitCode = CLIJSON.int(end["code"])
            }
            if let ready = readObject(records + "/" + stem + ".ready") {
                record.ready = CLIJSON.double(ready["ready"])
            }
            if let cancel = readObject(records + "/" + stem + ".cancel") {
                record.cancel = .some(cancel["reason"] as? String)
            }
            result.append(record)
        }
        return result.sorted { ($0.start, $0.task) < ($1.start, $1.task) }
    }

    /// The attempts of `task`, first to last.
    func records(of task: String) -> [CLIBatchRecord] {
        loadRecords().filter { $0.task == task }.sorted { $0.attempt < $1.attempt }
    }

    private func readObject(_ path: String) -> [String: Any]? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return try? CLIJSON.object(text)
    }

    /// Kills (SIGKILL, whole process group: each task leads its own session) every task
    /// process the worker recorded that still runs. For batches whose supervisor was killed.
    func killLeftovers() {
        for record in loadRecords() where record.pid > 0 && !CLIProcessTable.isDead(record.pid) {
            _ = kill(-record.pid, SIGKILL)
            _ = kill(record.pid, SIGKILL)
        }
    }

    // MARK: The run directory

    var eventsPath: String { runDirectory + "/events.jsonl" }

    /// events.jsonl as lines (empty lines dropped).
    func eventLines() -> [String] {
        guard let text = try? String(contentsOfFile: eventsPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    /// The journal's lines parsed; throws on the first line that is not a JSON object.
    func events() throws -> [[String: Any]] {
        try eventLines().enumerated().map { i, line in
            do { return try CLIJSON.object(line) } catch { throw CLIFailure("events.jsonl line \(i + 1) is not a JSON object: \(line)") }
        }
    }

    func events(of task: String, _ kind: String? = nil) throws -> [[String: Any]] {
        try events().filter { $0["task"] as? String == task && (kind == nil || $0["event"] as? String == kind) }
    }

    /// The `finished` line of `task` (the last one).
    func finished(_ task: String) throws -> [String: Any]? {
        try events(of: task, "finished").last
    }

    func summary() throws -> [String: Any] {
        guard let data = FileManager.default.contents(atPath: runDirectory + "/summary.json") else {
            throw CLIFailure("no summary.json in \(runDirectory)")
        }
        return try CLIJSON.object(String(decoding: data, as: UTF8.self))
    }

    /// summary.json's entries by task name.
    func summaryTasks() throws -> [String: [String: Any]] {
        let tasks = try summary()["tasks"] as? [[String: Any]] ?? []
        var byName: [String: [String: Any]] = [:]
        for task in tasks { byName[task["name"] as? String ?? "?"] = task }
        return byName
    }

    func log(_ task: String) -> String? {
        try? String(contentsOfFile: runDirectory + "/logs/\(task).log", encoding: .utf8)
    }
}
