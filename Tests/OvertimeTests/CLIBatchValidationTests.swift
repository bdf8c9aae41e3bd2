// `overtime batch` refuses a bad job file or option before anything runs (issue 4, "Job
// file"; docs/jobfile.md "Checks before anything runs"): exit 125, a message naming the task
// and the field, and no task started (every task here would leave a marker file).

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A bad job file: `MARKER` in its text becomes a command that creates the marker file.
struct CLIBatchBadJob: Sendable, CustomStringConvertible {
    var label: String
    var text: String
    /// Each must appear in stderr.
    var expected: [String]

    var description: String { label }

    init(_ label: String, _ text: String, _ expected: [String]) {
        self.label = label
        self.text = text
        self.expected = expected
    }

    static let touch = #"["sh", "-c", "touch MARKER"]"#

    static let cases: [CLIBatchBadJob] = [
        .init("unknown task field", """
        {"tasks": [{"name": "train", "command": \(touch), "max_runtime": "1h"}]}
        """, ["task 'train'", "field 'max_runtime'", "did you mean 'max-runtime'"]),
        .init("unknown top-level field", """
        {"paralel": 2, "tasks": [{"name": "train", "command": \(touch)}]}
        """, ["field 'paralel'"]),
        .init("wrong type: retries a string", """
        {"tasks": [{"name": "train", "command": \(touch), "retries": "three"}]}
        """, ["task 'train'", "field 'retries'"]),
        .init("wrong type: command a string", """
        {"tasks": [{"name": "evaluate", "command": "touch MARKER"}]}
        """, ["task 'evaluate'", "field 'command'"]),
        .init("wrong type: require-advance a string", """
        {"tasks": [{"name": "train", "command": \(touch), "require-advance": "yes"}]}
        """, ["task 'train'", "field 'require-advance'"]),
        .init("wrong type: env value a number", """
        {"tasks": [{"name": "train", "command": \(touch), "env": {"EPOCHS": 20}}]}
        """, ["task 'train'", "env.EPOCHS"]),
        .init("unknown dependency", """
        {"tasks": [{"name": "train", "command": \(touch)},
                   {"name": "evaluate", "command": \(touch), "after": ["trian"]}]}
        """, ["task 'evaluate'", "field 'after[0]'", "'trian'", "did you mean 'train'"]),
        .init("unknown dependency in an object", """
        {"tasks": [{"name": "train", "command": \(touch)},
                   {"name": "evaluate", "command": \(touch), "after": [{"task": "nope", "when": "done"}]}]}
        """, ["task 'evaluate'", "after[0]", "'nope'"]),
        .init("bad dependency condition", """
        {"tasks": [{"name": "train", "command": \(touch)},
                   {"name": "evaluate", "command": \(touch), "after": [{"task": "train", "when": "whenever"}]}]}
        """, ["task 'evaluate'", "after[0]", "whenever"]),
        .init("cycle", """
        {"tasks": [{"name": "ok", "command": \(touch)},
                   {"name": "a", "command": \(touch), "after": ["b"]},
                   {"name": "b", "command": \(touch), "after": ["c"]},
                   {"name": "c", "command": \(touch), "after": ["a"]}]}
        """, ["task 'a'", "field 'after'", "dependency cycle a → b → c → a"]),
        .init("waits for itself", """
        {"tasks": [{"name": "a", "command": \(touch), "after": ["a"]}]}
        """, ["task 'a'", "after[0]", "itself"]),
        .init("slot request larger than the pool", """
        {"resources": {"gpu": ["0", "1"]}, "tasks": [{"name": "train", "command": \(touch), "resources": {"gpu": 3}}]}
        """, ["task 'train'", "field 'resources.gpu'", "asks for 3", "only 2"]),
        .init("counted request larger than the pool", """
        {"resources": {"mem_gb": 8}, "tasks": [{"name": "train", "command": \(touch), "resources": {"mem_gb": 16}}]}
        """, ["task 'train'", "field 'resources.mem_gb'", "16", "8"]),
        .init("request from an unknown pool", """
        {"resources": {"gpu": ["0"]}, "tasks": [{"name": "train", "command": \(touch), "resources": {"gpus": 1}}]}
        """, ["task 'train'", "resources.gpus", "did you mean 'gpu'"]),
        .init("bad duration", """
        {"tasks": [{"name": "train", "command": \(touch), "budget": "5 parsecs"}]}
        """, ["task 'train'", "field 'budget'"]),
        .init("negative duration", """
        {"tasks": [{"name": "train", "command": \(touch), "grace": "-1s"}]}
        """, ["task 'train'", "field 'grace'"]),
        .init("bad batch deadline", """
        {"deadline": "soon", "tasks": [{"name": "train", "command": \(touch)}]}
        """, ["field 'deadline'"]),
        .init("bad backoff", """
        {"tasks": [{"name": "train", "command": \(touch), "retries": {"max": 2, "backoff": "fast"}}]}
        """, ["task 'train'", "backoff"]),
        .init("not JSON: trailing comma", """
        {"tasks": [{"name": "train", "command": \(touch)},]}
        """, ["not JSON", "line 1", "trailing comma"]),
        .init("not JSON: text", "tasks: train\n", ["not JSON"]),
        .init("empty file", "", ["empty"]),
        .init("concurrency 0", """
        {"concurrency": 0, "tasks": [{"name": "train", "command": \(touch)}]}
        """, ["field 'concurrency'"]),
        .init("duplicate names", """
        {"tasks": [{"name": "train", "command": \(touch)}, {"name": "train", "command": \(touch)}]}
        """, ["task 'train'", "field 'name'", "unique"]),
        .init("every problem at once", """
        {"tasks": [{"name": "train", "command": \(touch), "max_runtime": "1h"},
                   {"name": "evaluate", "command": \(touch), "budget": "later", "after": ["trian"]}]}
        """, ["task 'train'", "field 'max_runtime'", "task 'evaluate'", "field 'budget'", "field 'after[0]'"]),
    ]
}

@Suite("CLI batch validation")
struct CLIBatchValidationTests {
    @Test("a bad job file exits 125, names the task and field, starts nothing", arguments: CLIBatchBadJob.cases)
    func badJobFile(_ bad: CLIBatchBadJob) async throws {
        let f = try CLIBatchFixture()
        let marker = f.path("marker")
        let path = try f.writeJobText(bad.text.replacingOccurrences(of: "MARKER", with: marker))
        let r = try await f.run()
        #expect(r.status == 125, "\(bad.label): \(r)")
        for piece in bad.expected {
            #expect(r.stderr.contains(piece), "\(bad.label): stderr lacks \"\(piece)\": \(r.stderr)")
        }
        #expect(r.stderr.contains(path), "\(bad.label): the message names the file: \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker), "\(bad.label): a task ran")
        #expect(!FileManager.default.fileExists(atPath: f.eventsPath), "\(bad.label): a run began")
        #expect(!r.stdout.contains("TASK"), "\(bad.label): no table for a refused file: \(r.stdout)")
    }

    @Test("each problem is on a line of its own, starting with the file's path")
    func oneLinePerProblem() async throws {
        let f = try CLIBatchFixture()
        let path = try f.writeJobText("""
        {"tasks": [{"name": "a", "command": ["true"], "budget": "x"},
                   {"name": "b", "command": ["true"], "grace": "y"},
                   {"name": "c", "command": ["true"], "after": ["zzz"]}]}
        """)
        let r = try await f.run()
        #expect(r.status == 125, "\(r)")
        let lines = r.stderrLines.filter { $0.hasPrefix(path + ": ") }
        #expect(lines.count >= 3, "\(r.stderr)")
        #expect(lines.contains { $0.contains("task 'a'") && $0.contains("'budget'") })
        #expect(lines.contains { $0.contains("task 'b'") && $0.contains("'grace'") })
        #expect(lines.contains { $0.contains("task 'c'") && $0.contains("'zzz'") })
    }

    @Test("a bad option exits 125 and starts nothing",
          arguments: [
            (["--concurrency", "0"], "--concurrency"),
            (["--concurrency", "many"], "--concurrency"),
            (["--progress", "loud"], "--progress"),
            (["--fail-fats"], "--fail-fats"),
            (["--resume", "/nonexistent/run"], "--run-dir"),  // --resume with --run-dir
            (["other.json"], "one job file"),
          ])
    func badOption(_ extra: [String], mention: String) async throws {
        let f = try CLIBatchFixture()
        let marker = f.path("marker")
        try f.writeJob(["tasks": [["name": "t", "command": ["sh", "-c", "touch '\(marker)'"]]]])
        let r = try await f.run(extra)
        #expect(r.status == 125, "\(extra): \(r)")
        #expect(r.stderr.contains(mention), "\(extra): stderr lacks \(mention): \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker), "\(extra): the task ran")
    }

    @Test("a misspelt command in a later task is refused before anything runs, with the file's other problems and a suggestion")
    func commandsFoundUpFront() async throws {
        let f = try CLIBatchFixture()
        let marker = f.path("marker")
        let bin = f.path("bin")
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let tool = bin + "/resize-images"
        try Data("#!/bin/sh\nexit 0\n".utf8).write(to: URL(fileURLWithPath: tool))
        chmod(tool, 0o755)
        try f.writeJob(["tasks": [
            ["name": "first", "command": ["sh", "-c", "touch '\(marker)'"]],
            ["name": "later", "command": ["pyhton3", "train.py"], "after": ["first"]],
            ["name": "own-path", "command": ["resize-imgaes"], "env": ["PATH": bin]],
            ["name": "relative", "command": ["./no-such-script.sh"]],
            ["name": "made", "command": ["./built-by-first"], "command-made-by": "first"],
            ["name": "typo", "command": ["true"], "command-made-by": "frist"],
            ["name": "bad", "command": ["true"], "grace": "-1s"],
        ]])
        let r = try await f.run()
        #expect(r.status == 125, "\(r)")
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.contains("task 'later'") && $0.contains("field 'command'") && $0.contains("\"pyhton3\" is not found")
                && $0.contains("did you mean \"python3\"") }, "\(r.stderr)")
        #expect(lines.contains { $0.contains("task 'own-path'") && $0.contains("did you mean \"resize-images\"") && $0.contains(bin) }, "\(r.stderr)")
        #expect(lines.contains { $0.contains("task 'relative'") && $0.contains("does not exist") }, "\(r.stderr)")
        #expect(!lines.contains { $0.contains("task 'made'") }, "a command an earlier task makes is not looked up: \(r.stderr)")
        #expect(lines.contains { $0.contains("task 'typo'") && $0.contains("command-made-by") && $0.contains("did you mean") && $0.contains("first") }, "\(r.stderr)")
        #expect(lines.contains { $0.contains("task 'bad'") && $0.contains("'grace'") }, "the other problems come too: \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker), "a task ran")
    }

    @Test("a missing job file, a directory, a missing resume directory: 125")
    func missingInputs() async throws {
        let f = try CLIBatchFixture()
        let missing = try await cliRun(["batch", f.path("nope.json")], in: f.scratch)
        #expect(missing.status == 125, "\(missing)")
        #expect(missing.stderr.contains("nope.json"), "\(missing)")
        let directory = try await cliRun(["batch", f.scratch.url.path], in: f.scratch)
        #expect(directory.status == 125, "\(directory)")
        let noRun = try await cliRun(["batch", "--resume", f.path("no-such-run")], in: f.scratch)
        #expect(noRun.status == 125, "\(noRun)")
        let noArgs = try await cliRun(["batch"], in: f.scratch)
        #expect(noArgs.status == 125, "\(noArgs)")
    }
}
