// What `overtime batch` leaves for its user (issue 4, "Run directory and journal",
// "Output"): logs/<task>.log with all of a task's stdout and stderr, even when it was
// killed; events.jsonl; summary.json; job.json; the final table; --progress json and none;
// the environment and working directory tasks get; --resume of a finished run.

import Foundation
import Testing

@Suite("CLI batch output")
struct CLIBatchOutputTests {
    @Test("logs/<task>.log holds a task's stdout and stderr")
    func logs() async throws {
        let f = try CLIBatchFixture()
        // 3000 numbered lines, alternating stdout and stderr, and no newline at the end.
        let script = "i=0; while [ $i -lt 3000 ]; do if [ $((i % 2)) -eq 0 ]; then echo \"out $i\"; else echo \"err $i\" >&2; fi; i=$((i+1)); done; printf tail"
        try f.writeJob(["tasks": [
            ["name": "talker", "command": ["sh", "-c", script]],
            f.task("quiet", []),
        ]])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let log = try #require(f.log("talker"), "no logs/talker.log")
        let lines = log.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 3001, "\(lines.count) lines")
        var missing: [Int] = []
        let present = Set(lines)
        for i in 0..<3000 where !present.contains(i % 2 == 0 ? "out \(i)" : "err \(i)") { missing.append(i) }
        #expect(missing.isEmpty, "lines missing from the log: \(missing.prefix(10))")
        #expect(lines.last == "tail")
        #expect(f.log("quiet") == "", "a silent task has an empty log: \(f.log("quiet") ?? "nil")")
        #expect(!r.stdout.contains("out 0") && !r.stderr.contains("err 1"), "task output goes to its log, not the terminal")
    }

    @Test("the log is complete for a task killed after grace")
    func logOfKilledTask() async throws {
        let f = try CLIBatchFixture()
        let ready = f.path("talker.ready")
        // Writes, ignores SIGTERM (noting it in its log), and must be SIGKILLed.
        let script = """
        trap 'echo got-term; echo got-term-err >&2' TERM
        echo out-1; echo err-1 >&2
        head -c 200000 /dev/zero | tr '\\0' x; echo
        \(CLIChild.shNote(ready, "up"))
        while :; do sleep 0.05; done
        """
        try f.writeJob(["tasks": [
            ["name": "stubborn", "command": ["sh", "-c", script], "budget": "700ms", "grace": "700ms"],
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        let log = try #require(f.log("stubborn"))
        for piece in ["out-1\n", "err-1\n", "got-term\n", "got-term-err\n"] {
            #expect(log.contains(piece), "the log lacks \(piece): \(log.suffix(300))")
        }
        #expect(log.filter { $0 == "x" }.count == 200_000, "the 200000-byte write is not whole in the log")
        let summary = try f.summaryTasks()["stubborn"]
        #expect(summary?["outcome"] as? String == "failed")
        #expect(summary?["reason"] as? String == "timeout", "\(summary ?? [:])")
        #expect(CLIJSON.int(summary?["exit_code"]) == 137, "\(summary ?? [:])")
        #expect(try f.events(of: "stubborn", "kill").count == 1, "the journal records the SIGKILL")
    }

    @Test("events.jsonl: every line JSON; each task's life in order; progress throttled; job.json kept")
    func journal() async throws {
        let f = try CLIBatchFixture()
        let path = try f.writeJob(["tasks": [
            f.task("chatty", ["progress=300", "sleep=0.3", "result={\"rows\": 3}"]),
            f.task("next", [], ["after": ["chatty"]]),
            ["name": "garbled", "command": ["sh", "-c", "echo 'this is not json' >&3; sleep 0.1"]],
        ]])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        let events = try f.events()
        let garbled = try f.events(of: "garbled", "protocol-error")
        #expect(garbled.count == 1, "a bad line on fd 3 is journaled: \(garbled)")
        #expect((garbled.first?["excerpt"] as? String)?.contains("not json") == true, "\(garbled)")
        #expect(try f.summaryTasks()["garbled"]?["outcome"] as? String == "succeeded", "a bad line never harms the task")
        #expect(try f.events(of: "chatty", "budget").first?["cause"] as? String == "start", "budget changes are journaled")
        let runID = events.first?["run"] as? String
        #expect(runID != nil)
        for event in events {
            #expect(event["run"] as? String == runID && event["task"] is String && event["event"] is String
                    && event["time"] is String, "\(event)")
        }
        for name in ["chatty", "next", "garbled"] {
            let kinds = events.filter { $0["task"] as? String == name }.compactMap { $0["event"] as? String }
            let order = ["attempt", "started", "exited", "finished"].map { kinds.firstIndex(of: $0) }
            #expect(order.allSatisfy { $0 != nil }, "\(name): \(kinds)")
            let indices = order.compactMap { $0 }
            #expect(indices == indices.sorted(), "\(name): out of order: \(kinds)")
            #expect(kinds.last == "finished", "\(name): \(kinds)")
        }
        let progress = try f.events(of: "chatty", "progress")
        #expect(!progress.isEmpty, "progress is journaled")
        #expect(progress.count <= 3, "300 progress messages in well under a second made \(progress.count) journal lines")
        let exited = try f.events(of: "chatty", "exited").first
        #expect(CLIJSON.int((exited?["result"] as? [String: Any])?["rows"]) == 3, "\(String(describing: exited))")
        let summary = try f.summary()
        #expect(summary["run"] as? String == runID)
        #expect(CLIJSON.bool(summary["succeeded"]) == true)
        #expect(summary["stopped_by"] is NSNull)
        let chatty = try f.summaryTasks()["chatty"]
        #expect(CLIJSON.int((chatty?["result"] as? [String: Any])?["rows"]) == 3, "\(chatty ?? [:])")
        #expect(CLIJSON.double(chatty?["duration"]).map { $0 >= 0.3 } == true, "\(chatty ?? [:])")
        let copied = FileManager.default.contents(atPath: f.runDirectory + "/job.json")
        #expect(copied == FileManager.default.contents(atPath: path), "job.json is the job file")
    }

    @Test("plain output: a line per state change on stderr, the final table on stdout listing each task")
    func finalTable() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("good", ["result={\"acc\": 0.9}"]),
            f.task("bad", ["exit=3"]),
            f.task("blocked", [], ["after": ["bad"]]),
        ]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        let lines = r.stdoutLines
        let header = try #require(lines.first, "no table: \(r)")
        for column in ["TASK", "OUTCOME", "REASON", "EXIT", "ATTEMPTS", "DURATION", "RESULT"] {
            #expect(header.contains(column), "header: \(header)")
        }
        func row(_ name: String) -> [String]? {
            lines.first { $0.hasPrefix(name + " ") }?.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
        let good = try #require(row("good"), "no row for good: \(r.stdout)")
        #expect(good[1] == "succeeded" && good.joined().contains("acc"), "\(good)")
        let bad = try #require(row("bad"), "no row for bad: \(r.stdout)")
        #expect(bad[1] == "failed" && bad[2] == "exit" && bad[3] == "3" && bad[4] == "1", "\(bad)")
        let blocked = try #require(row("blocked"), "no row for blocked: \(r.stdout)")
        #expect(blocked[1] == "skipped" && blocked[2] == "dependency" && blocked[4] == "0", "\(blocked)")
        #expect(lines.last?.hasPrefix("1 of 3 succeeded") == true, "\(r.stdout)")

        let err = r.stderr
        #expect(err.contains("good: started"), "\(err)")
        #expect(err.contains("good: succeeded"), "\(err)")
        #expect(err.contains("bad: failed"), "\(err)")
        #expect(err.contains("blocked: skipped (dependency"), "\(err)")
    }

    @Test("--progress json: stdout is JSON lines only, with each task's events")
    func progressJSON() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("one", ["progress=3", "print=not on stdout"]),
            f.task("two", ["exit=2"]),
        ]])
        let r = try await f.run(["--progress", "json"])
        #expect(r.status == 1, "\(r)")
        #expect(!r.stdoutLines.isEmpty)
        var seen: [String: [String]] = [:]
        for line in r.stdoutLines {
            let object = try CLIJSON.object(line)
            let task = try #require(object["task"] as? String, "\(line)")
            seen[task, default: []].append(object["event"] as? String ?? "?")
        }
        for name in ["one", "two"] {
            #expect(seen[name]?.contains("started") == true, "\(name): \(seen[name] ?? [])")
            #expect(seen[name]?.contains("exited") == true, "\(name): \(seen[name] ?? [])")
        }
    }

    @Test("--progress json streams every event the journal has (progress aside), a skipped task's end too")
    func progressJSONShowsEveryEvent() async throws {
        // `overtime batch --help`: "json (every event as a JSON line on stdout)".
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [
            f.task("flaky", ["fail-until=1"], ["retries": ["max": 1, "backoff": "50ms"]]),
            f.task("two", ["exit=2"]),
            f.task("blocked", [], ["after": ["two"]]),
        ]])
        let r = try await f.run(["--progress", "json"])
        #expect(r.status == 1, "\(r)")
        let streamed = Set(try r.stdoutLines.map(CLIJSON.object).map { "\($0["task"] as? String ?? "?") \($0["event"] as? String ?? "?")" })
        let journaled = Set(try f.events().filter { $0["event"] as? String != "progress" }
            .map { "\($0["task"] as? String ?? "?") \($0["event"] as? String ?? "?")" })
        let missing = journaled.subtracting(streamed).sorted()
        #expect(missing.isEmpty, "journal events never streamed by --progress json: \(missing)")
        #expect(streamed.contains("blocked finished"), "a skipped task never appears in the --progress json stream: \(r.stdout)")
    }

    @Test("--progress none: nothing on stdout or stderr; the exit code and run directory as usual")
    func progressNone() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [f.task("one", ["print=hello"])]])
        let r = try await f.run(["--progress", "none"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.isEmpty && r.stderr.isEmpty, "\(r)")
        #expect(try f.summaryTasks()["one"]?["outcome"] as? String == "succeeded")
    }

    @Test("tasks get defaults.env merged with their own env, and cwd relative to the job file")
    func environmentAndDirectory() async throws {
        let f = try CLIBatchFixture()
        try FileManager.default.createDirectory(atPath: f.path("sub"), withIntermediateDirectories: true)
        try f.writeJob([
            "defaults": ["env": ["CLI_BATCH_MARKER": "default"]],
            "tasks": [
                f.task("inherits", []),
                f.task("overrides", [], ["env": ["CLI_BATCH_MARKER": "own"]]),
                f.task("moves", [], ["cwd": "sub"]),
            ],
        ])
        let r = try await f.run()
        #expect(r.status == 0, "\(r)")
        #expect(f.records(of: "inherits").first?.marker == "default")
        #expect(f.records(of: "overrides").first?.marker == "own")
        let cwd = f.records(of: "moves").first?.cwd.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }
        #expect(cwd == URL(fileURLWithPath: f.path("sub")).resolvingSymlinksInPath().path, "\(cwd ?? "nil")")
    }

    @Test("a cwd that does not exist fails the task with a message about the directory, not the command")
    func missingDirectory() async throws {
        let f = try CLIBatchFixture()
        let missing = f.path("no-such-dir")
        try f.writeJob(["tasks": [f.task("lost", [], ["cwd": missing])]])
        let r = try await f.run()
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "lost").isEmpty)
        let summary = try f.summaryTasks()["lost"]
        #expect(summary?["outcome"] as? String == "failed")
        let detail = summary?["detail"] as? String ?? ""
        #expect(detail.contains("no-such-dir"), "the detail does not name the missing directory: \(detail)")
        #expect(!detail.contains("command not found"), "the command exists; its directory does not: \(detail)")
    }

    @Test("--resume of a finished run runs again only what did not succeed")
    func resumeFinishedRun() async throws {
        let f = try CLIBatchFixture()
        let okCount = f.path("ok.count")
        let flag = f.path("fixed")
        try f.writeJob(["tasks": [
            f.task("ok", ["touch=\(okCount)"]),
            // Fails until the flag exists (the test creates it between the runs).
            f.task("broken", ["exit-if-exists=\(flag)", "exit=1"]),
            f.task("downstream", [], ["after": ["broken"]]),
        ]])
        let first = try await f.run()
        #expect(first.status == 1, "\(first)")
        #expect(try f.summaryTasks()["downstream"]?["outcome"] as? String == "skipped")
        try f.scratch.write("fixed", "")
        let again = try await cliRun(["batch", f.jobPath, "--resume", f.runDirectory], in: f.scratch,
                                     environment: CLIBatchFixture.environment)
        #expect(again.status == 0, "\(again)")
        #expect(f.scratch.read("ok.count") == "ok\n", "ok ran twice")
        let tasks = try f.summaryTasks()
        #expect(CLIJSON.bool(tasks["ok"]?["resumed"]) == true)
        #expect(tasks["broken"]?["outcome"] as? String == "succeeded")
        #expect(tasks["downstream"]?["outcome"] as? String == "succeeded")
    }

    @Test("a job file read from a pipe is kept as job.json, so --resume works from the run directory")
    func jobFileFromPipe() async throws {
        // docs/jobfile.md: `overtime batch <(generate-jobs)`; /dev/stdin is the same kind of file.
        let f = try CLIBatchFixture()
        let flag = f.path("fixed")
        let path = try f.writeJob(["tasks": [
            f.task("ok", ["touch=\(f.path("ok.count"))"]),
            f.task("broken", ["exit-if-exists=\(flag)", "exit=1"]),
        ]])
        let script = "cat '\(path)' | exec '\(CLIBinary.path)' batch /dev/stdin --run-dir '\(f.runDirectory)'"
        let process = CLIProcess(["-c", script], executable: "/bin/sh", environment: CLIBatchFixture.environment, in: f.scratch)
        try await process.start()
        let first = await process.finish(timeout: .seconds(30))
        #expect(first.status == 1, "\(first)")
        #expect(try f.summaryTasks()["ok"]?["outcome"] as? String == "succeeded", "\(first)")
        let kept = FileManager.default.contents(atPath: f.runDirectory + "/job.json")
        #expect(kept == FileManager.default.contents(atPath: path),
                "job.json holds \(kept?.count ?? -1) bytes, the job file \(FileManager.default.contents(atPath: path)?.count ?? -1)")

        try f.scratch.write("fixed", "")
        let again = try await cliRun(["batch", "--resume", f.runDirectory], in: f.scratch,
                                     environment: CLIBatchFixture.environment)
        #expect(again.status == 0, "--resume from the run directory alone: \(again)")
        #expect(f.scratch.read("ok.count") == "ok\n", "ok ran again")
    }

    @Test("--resume from the run directory alone resolves a relative cwd as the first run did, against the job file's directory")
    func resumeKeepsRelativeDirectories() async throws {
        let f = try CLIBatchFixture()
        let work = f.path("work")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let flag = f.path("fixed")
        try f.writeJob(["tasks": [
            ["name": "here", "cwd": "work", "command": ["sh", "-c", "pwd -P > \(f.path("where")); test -e \(flag)"]],
        ]])
        let first = try await f.run()
        #expect(first.status == 1, "\(first)")
        let expected = URL(fileURLWithPath: work).resolvingSymlinksInPath().path + "\n"
        #expect(f.scratch.read("where") == expected, "first run")
        try FileManager.default.removeItem(atPath: f.path("where"))
        try f.scratch.write("fixed", "")
        let again = try await cliRun(["batch", "--resume", f.runDirectory], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(again.status == 0, "\(again)")
        #expect(f.scratch.read("where") == expected, "the resumed task ran in \(f.scratch.read("where") ?? "nothing")")
    }
}
