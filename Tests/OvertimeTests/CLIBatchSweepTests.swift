// `overtime batch` with sweeps and arrays (docs/jobfile.md): `--check`, elements run and
// logged as tasks of their own, same-index and a whole sweep's dependents, `ctl cancel` of
// one element and of a whole array, `--resume` of the one element that failed, `--follow`
// of an element. Tasks are the recording worker (CLIBatchSupport.swift).

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI batch: sweeps and arrays")
struct CLIBatchSweepTests {
    @Test("--check of a good file says what it would run and runs nothing; of a bad one, exit 125 with every problem")
    func check() async throws {
        let f = try CLIBatchFixture()
        let good = try f.writeJob(["tasks": [
            f.task("train", ["print={lr}"], ["matrix": ["lr": [0.1, 0.2], "seed": [1, 2]]]),
            f.task("shard", ["print={index}"], ["array": "0-2"]),
            f.task("summary", [], ["after": ["train"]]),
        ]])
        let ok = try await cliRun(["batch", "--check", good], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(ok.status == 0, "\(ok)")
        #expect(ok.stdout == "\(good): ok: 3 tasks, 8 to run (train: a matrix of 4; shard: an array of 3)\n", "\(ok)")
        #expect(f.loadRecords().isEmpty, "--check ran a task")
        #expect(!FileManager.default.fileExists(atPath: f.runDirectory) && !FileManager.default.fileExists(atPath: f.path("overtime-runs")),
                "--check made a run directory")

        let bad = try f.writeJob(["tasks": [
            f.task("a", [], ["matrix": ["k": [1]], "array": "0-3"]),
            f.task("b", ["{lrr}"], ["matrix": ["lr": [1]]]),
            f.task("c", [], ["after": ["a[1]"]]),
        ]])
        let refused = try await cliRun(["batch", "--check", bad], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(refused.status == 125, "\(refused)")
        #expect(refused.stdout.isEmpty, "\(refused)")
        for expected in ["a 'matrix' or an 'array', not both", "{lrr} is not a key of the matrix (did you mean {lr}?)", "'a[1]' names one element"] {
            #expect(refused.stderr.contains(expected), "\(expected): \(refused.stderr)")
        }
    }

    /// A matrix, an array whose element 2 fails until `fixed-2` exists, its same-index
    /// follower, and a summary after the whole matrix; every run appends its name to `ran`.
    static func sweepJob(_ f: CLIBatchFixture) throws {
        let ran = f.path("ran")
        try f.writeJob(["concurrency": 4, "tasks": [
            f.task("train", ["touch=\(ran)", "print=training at lr {lr}"], ["matrix": ["lr": [0.1, 0.2]]]),
            f.task("shard", ["touch=\(ran)", "print=shard {index}", "print-env=OVERTIME_SWEEP", "print-env=OVERTIME_INDEX", "exit-if-exists=\(f.path("fixed-{index}"))", "exit=1"], ["array": "0-3"]),
            f.task("merge", ["touch=\(ran)"], ["array": "0-3", "after": [["task": "shard", "same-index": true]]]),
            f.task("summary", ["touch=\(ran)"], ["after": ["train"]]),
        ]])
        for i in [0, 1, 3] { try f.scratch.write("fixed-\(i)", "") }
    }

    @Test("a matrix and an array run each element as a task: its own log and summary row; same-index skips only the failed index; --resume reruns only it")
    func runAndResume() async throws {
        let f = try CLIBatchFixture()
        try Self.sweepJob(f)
        let first = try await f.run()
        #expect(first.status == 1, "shard[2] failed: \(first)")
        #expect(f.log("train[lr=0.1]")?.contains("training at lr 0.1") == true, "\(String(describing: f.log("train[lr=0.1]")))")
        #expect(f.log("train[lr=0.2]")?.contains("training at lr 0.2") == true)
        for i in 0...3 {
            let log = f.log("shard[\(i)]") ?? ""
            #expect(log.contains("shard \(i)") && log.contains("OVERTIME_SWEEP=shard\n") && log.contains("OVERTIME_INDEX=\(i)\n"), "shard[\(i)]: \(log)")
        }
        let tasks = try f.summaryTasks()
        func outcome(_ name: String) -> String { "\(tasks[name]?["outcome"] as? String ?? "?")/\(tasks[name]?["reason"] as? String ?? "-")" }
        let expectedNames: [String] = ["train[lr=0.1]", "train[lr=0.2]", "summary"] + (0...3).flatMap { ["shard[\($0)]", "merge[\($0)]"] }
        #expect(Set(tasks.keys) == Set(expectedNames),
                "\(tasks.keys.sorted())")
        #expect(outcome("shard[2]") == "failed/exit")
        #expect(outcome("merge[2]") == "skipped/dependency")
        for i in [0, 1, 3] { #expect(outcome("merge[\(i)]") == "succeeded/-", "merge[\(i)]") }
        #expect(outcome("summary") == "succeeded/-")
        let ranFirst = f.scratch.read("ran") ?? ""
        #expect(!ranFirst.contains("merge[2]"))

        try f.scratch.write("fixed-2", "")
        try f.scratch.write("ran", "")
        let again = try await cliRun(["batch", f.jobPath, "--resume", f.runDirectory], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(again.status == 0, "\(again)")
        #expect(Set((f.scratch.read("ran") ?? "").split(separator: "\n").map(String.init)) == ["shard[2]", "merge[2]"],
                "only the failed element and what it skipped ran again: \(f.scratch.read("ran") ?? "")")
        let resumed = try f.summaryTasks()
        #expect(resumed["shard[2]"]?["outcome"] as? String == "succeeded" && resumed["merge[2]"]?["outcome"] as? String == "succeeded")
        #expect(CLIJSON.bool(resumed["shard[0]"]?["resumed"]) == true, "\(resumed["shard[0]"] ?? [:])")
    }

    @Test("ctl cancel of one element cancels it alone; ctl cancel of the array cancels what runs and skips what waits")
    func cancelElementAndArray() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["concurrency": 2, "tasks": [f.task("w", ["wait-cancel=30"], ["array": "0-3", "budget": "60s", "grace": "5s"])]])
        let socket = f.path("ctl.sock")
        let batch = try await f.start(["--control", socket])
        defer { f.killLeftovers() }
        #expect(await CLICtl.waitForSocket(socket), "no control socket")
        #expect(await CLICtl.waitUntil { !f.records(of: "w[0]").isEmpty && !f.records(of: "w[1]").isEmpty }, "w[0] and w[1] never started")

        let one = try await CLICtl.ctl(socket: socket, ["cancel", "w[1]"], in: f.scratch)
        #expect(one.status == 0, "\(one)")
        #expect(await CLICtl.waitUntil(timeout: .seconds(20)) { !f.records(of: "w[2]").isEmpty }, "w[2] never took w[1]'s slot")
        #expect(f.records(of: "w[1]").first?.cancel == .some("user"), "\(f.records(of: "w[1]"))")
        #expect(f.records(of: "w[0]").first?.cancel == nil, "w[0] was not cancelled with w[1]")

        let all = try await CLICtl.ctl(socket: socket, ["cancel", "w"], in: f.scratch)
        #expect(all.status == 0, "\(all)")
        #expect(all.stdout.contains("2 cancelling, 1 skipped before it started, 1 already finished"), "\(all)")
        let r = await batch.finish(timeout: .seconds(30))
        #expect(r.status == 1, "\(r)")
        let tasks = try f.summaryTasks()
        #expect(tasks["w[3]"]?["outcome"] as? String == "skipped" && tasks["w[3]"]?["reason"] as? String == "user", "\(tasks["w[3]"] ?? [:])")
        #expect(f.records(of: "w[3]").isEmpty, "w[3] must never have started")
        for name in ["w[0]", "w[2]"] { #expect(f.records(of: name).first?.cancel == .some("user"), "\(name): \(f.records(of: name))") }
        let operators = try f.events().filter { $0["event"] as? String == "operator" }.compactMap { $0["task"] as? String }
        #expect(operators == ["w[1]", "w"], "\(operators)")
    }

    @Test("--follow 'shard[2]' shows that element's output, not its siblings'")
    func followAnElement() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["concurrency": 1, "tasks": [f.task("shard", ["print=line from {index}"], ["array": "0-3"])]])
        let r = try await f.run(["--progress", "plain", "--follow", "shard[2]"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("shard[2] | line from 2"), "\(r.stderr)")
        #expect(!r.stderr.contains("line from 1") && !r.stderr.contains("line from 3"), "\(r.stderr)")
        let unknown = try await f.run(["--progress", "plain", "--follow", "shard[9]"])
        #expect(unknown.status == 125 && unknown.stderr.contains("shard[9]"), "\(unknown)")
    }
}
