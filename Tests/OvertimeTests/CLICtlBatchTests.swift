// `overtime ctl` against a real `overtime batch` (issue 5, "Control socket"; docs/control.md):
// status under a 50-task batch, cancelling a task that has not started (and its dependents),
// extend and revoke of running tasks, the operator events in events.jsonl, and `watch` of
// the journal until the batch ends. Tasks are the recording worker (CLIBatchSupport.swift).

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI ctl: overtime batch")
struct CLICtlBatchTests {
    /// States a task that holds a concurrency slot may be in.
    static let activeStates: Set<String> = ["starting", "running", "cancelling", "exiting"]
    static let allStates: Set<String> = activeStates.union(["waiting", "retrying", "succeeded", "failed", "skipped"])

    @Test("status under a 50-task batch at concurrency 10: every task listed, states consistent, pids real")
    func statusUnderLoad() async throws {
        let f = try CLIBatchFixture()
        let names = (0..<50).map { String(format: "t%02d", $0) }
        // Five waves of 2 s: long enough that even a loaded machine samples a waiting task
        // (waves of 1.2 s gave one or two samples under the full parallel suite).
        try f.writeJob(["concurrency": 10, "tasks": names.map { f.task($0, ["sleep=2"]) }])
        let socket = f.path("ctl.sock")
        let batch = try await f.start(["--control", socket])
        #expect(await CLICtl.waitForSocket(socket), "no control socket")

        var samples = 0
        var maxActive = 0
        var sawWaiting = false
        var lastSucceeded = 0
        var humanChecked = false
        var problems: [String] = []
        while CLICtlFS.probe(socket) == .live {
            let startedBefore = Set(f.loadRecords().map(\.task))
            let tasks: [[String: Any]]
            do { tasks = try await CLICtl.status(socket, in: f.scratch) } catch {
                if CLICtlFS.probe(socket) != .live { break }  // the batch ended between the probe and the request
                throw error
            }
            samples += 1
            let recordsAfter = Dictionary(grouping: f.loadRecords(), by: \.task)
            let listed = tasks.compactMap { $0["name"] as? String }
            if listed != names { problems.append("sample \(samples): tasks listed \(listed)") }
            var active = 0
            var succeeded = 0
            for task in tasks {
                let name = task["name"] as? String ?? "?"
                let state = task["state"] as? String ?? "?"
                if !Self.allStates.contains(state) { problems.append("\(name): unknown state \(state)") }
                if CLIJSON.int(task["attempts"]) == nil { problems.append("\(name): no attempts in \(task)") }
                let pid = CLIJSON.int(task["pid"])
                switch state {
                case "running":
                    active += 1
                    guard let pid, pid > 0 else { problems.append("\(name): running without a pid: \(task)"); continue }
                    // The pid is the task's own process: alive, or already at its end.
                    let record = recordsAfter[name]?.first
                    if let record, record.pid != Int32(pid) { problems.append("\(name): status pid \(pid), the task's pid \(record.pid)") }
                    if !CLICtlFS.isAlive(Int32(pid)), record?.end == nil {
                        // It may have ended since; give its end record a moment to land.
                        try await Task.sleep(for: .milliseconds(300))
                        if f.records(of: name).first?.end == nil { problems.append("\(name): running with pid \(pid), which is not alive") }
                    }
                case "waiting":
                    sawWaiting = true
                    if task["pid"] != nil, !CLIJSON.isNull(task["pid"]) { problems.append("\(name): waiting with a pid: \(task)") }
                    if startedBefore.contains(name) { problems.append("\(name): waiting, yet it had started before the request") }
                case "succeeded":
                    succeeded += 1
                    if task["pid"] != nil, !CLIJSON.isNull(task["pid"]) { problems.append("\(name): succeeded with a pid: \(task)") }
                default:
                    if Self.activeStates.contains(state) { active += 1 }
                    if state == "failed" || state == "skipped" { problems.append("\(name): \(state): \(task)") }
                }
            }
            if active > 10 { problems.append("sample \(samples): \(active) tasks active at concurrency 10") }
            if succeeded < lastSucceeded { problems.append("sample \(samples): succeeded went from \(lastSucceeded) to \(succeeded)") }
            lastSucceeded = succeeded
            maxActive = max(maxActive, active)

            if !humanChecked {
                let table = try await CLICtl.ctl(socket: socket, ["status"], in: f.scratch)
                if table.status == 0 {
                    humanChecked = true
                    #expect(table.stdoutLines.count == 51, "a header and 50 rows: \(table.stdout)")
                    #expect(table.stdoutLines.first?.hasPrefix("TASK") == true, "\(table.stdout)")
                    #expect(Set(table.stdoutLines.dropFirst().compactMap { $0.split(separator: " ").first.map(String.init) }) == Set(names),
                            "\(table.stdout)")
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }

        let r = await batch.finish(timeout: .seconds(40))
        #expect(r.status == 0, "\(r)")
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
        #expect(samples >= 3, "only \(samples) status samples during the batch")
        #expect(maxActive >= 1 && maxActive <= 10, "most active at once: \(maxActive)")
        #expect(sawWaiting, "no sample showed a waiting task")
        #expect(humanChecked, "the status table was never shown")
        let summary = try f.summaryTasks()
        #expect(summary.count == 50 && summary.values.allSatisfy { $0["outcome"] as? String == "succeeded" }, "\(summary)")
    }

    @Test("batch: cancel a task not yet started (skipped, user; dependents skipped), extend and revoke running ones; every request in events.jsonl with the uid; watch ends with the batch")
    func cancelWaitingAndJournal() async throws {
        let f = try CLIBatchFixture()
        let go = f.path("go")
        try f.writeJob(["concurrency": 2, "tasks": [
            f.task("holder", ["wait-file=\(go)"], ["budget": "60s"]),
            f.task("revokee", ["wait-cancel=30"], ["budget": "60s", "grace": "5s"]),
            f.task("victim", []),
            f.task("child", [], ["after": ["victim"]]),
            f.task("grandchild", [], ["after": ["child"]]),
            f.task("other", []),
        ]])
        let socket = f.path("ctl.sock")
        let batch = try await f.start(["--control", socket])
        #expect(await CLICtl.waitForSocket(socket), "no control socket")
        #expect(await CLICtl.waitUntil { !f.records(of: "holder").isEmpty && !f.records(of: "revokee").isEmpty },
                "holder and revokee never started")

        let watcher = CLICtlSpawn(["ctl", "--socket", socket, "watch"], in: f.scratch)
        try watcher.start()
        defer { watcher.killIfRunning() }
        try await Task.sleep(for: .milliseconds(300))  // let it subscribe; the assertions below do not depend on it

        let uid = Int(geteuid())
        let cancel = try await CLICtl.ctl(socket: socket, ["cancel", "victim"], in: f.scratch)
        #expect(cancel.status == 0, "\(cancel)")
        #expect(cancel.stdout.contains("skipped before it started"), "\(cancel)")

        let tasks = try await CLICtl.status(socket, in: f.scratch)
        let byName = Dictionary(tasks.map { ($0["name"] as? String ?? "?", $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byName["victim"]?["state"] as? String == "skipped" && byName["victim"]?["reason"] as? String == "user", "\(byName["victim"] ?? [:])")
        #expect(byName["holder"]?["state"] as? String == "running", "\(byName["holder"] ?? [:])")

        let again = try await CLICtl.ctl(socket: socket, ["cancel", "victim"], in: f.scratch)
        #expect(again.status == 0 && again.stdout.contains("already"), "cancelling twice is harmless and says so: \(again)")
        let notRunning = try await CLICtl.ctl(socket: socket, ["extend", "victim", "1m"], in: f.scratch)
        #expect(notRunning.status == 1 && notRunning.stderr.contains("victim"), "\(notRunning)")
        let unknown = try await CLICtl.ctl(socket: socket, ["revoke", "nope"], in: f.scratch)
        #expect(unknown.status == 1 && unknown.stderr.contains("no task named 'nope'"), "\(unknown)")
        let misspelt = try await CLICtl.ctl(socket: socket, ["extend", "holdr", "1m"], in: f.scratch)
        #expect(misspelt.status == 1 && misspelt.stderr.contains("did you mean 'holder'?"), "\(misspelt)")

        let extend = try await CLICtl.ctl(socket: socket, ["extend", "holder", "5m"], in: f.scratch)
        #expect(extend.status == 0 && extend.stdout.hasSuffix("left\n"), "\(extend)")
        let revoke = try await CLICtl.ctl(socket: socket, ["revoke", "revokee"], in: f.scratch)
        #expect(revoke.status == 0, "\(revoke)")
        #expect(await CLICtl.waitUntil { f.records(of: "revokee").first?.cancel != nil }, "revokee never read a cancel")
        #expect(f.records(of: "revokee").first?.cancel == .some("revoked"), "\(f.records(of: "revokee"))")

        try Data("go".utf8).write(to: URL(fileURLWithPath: go))
        let r = await batch.finish(timeout: .seconds(30))
        #expect(r.status == 1, "a task was revoked and others skipped: \(r)")
        #expect(CLICtlFS.info(socket) == nil, "the socket outlived the batch")

        let summary = try f.summaryTasks()
        func outcome(_ name: String) -> String { "\(summary[name]?["outcome"] as? String ?? "?")/\(summary[name]?["reason"] as? String ?? "-")" }
        #expect(outcome("victim") == "skipped/user", "\(summary["victim"] ?? [:])")
        // Nothing stopped the batch: the words must not say it was.
        #expect(summary["victim"]?["detail"] as? String == "cancelled by an operator before it started", "\(summary["victim"] ?? [:])")
        #expect(outcome("child") == "skipped/dependency", "\(summary["child"] ?? [:])")
        #expect(outcome("grandchild") == "skipped/dependency", "\(summary["grandchild"] ?? [:])")
        #expect(outcome("holder") == "succeeded/-", "\(summary["holder"] ?? [:])")
        #expect(outcome("revokee") == "failed/revoked", "\(summary["revokee"] ?? [:])")
        #expect(outcome("other") == "succeeded/-", "\(summary["other"] ?? [:])")
        for name in ["victim", "child", "grandchild"] {
            #expect(f.records(of: name).isEmpty, "\(name) must never have started")
        }

        // Every operator request that was carried out is in the journal, with the uid.
        let operators = try f.events().filter { $0["event"] as? String == "operator" }
        let actions = operators.map { "\($0["task"] as? String ?? "?"): \($0["action"] as? String ?? "?") uid \(CLIJSON.int($0["uid"]) ?? -1)" }
        #expect(actions.contains("victim: cancel uid \(uid)"), "\(actions)")
        #expect(actions.contains { $0.hasPrefix("holder: extend 5m") && $0.hasSuffix("uid \(uid)") }, "\(actions)")
        #expect(actions.contains { $0.hasPrefix("revokee: revoke") && $0.hasSuffix("uid \(uid)") }, "\(actions)")
        #expect(operators.allSatisfy { $0["time"] is String && $0["run"] is String }, "\(operators)")

        // The watcher saw journal lines, the operator events among them, and ended with the batch.
        let w = await watcher.finish(timeout: .seconds(10))
        #expect(!w.timedOut && w.status == 0, "watch must end when the batch ends: \(w)")
        var watched: [[String: Any]] = []
        for line in w.stdoutLines {
            do { watched.append(try CLIJSON.object(line)) } catch { Issue.record("watch printed a line that is not JSON: \(line)") }
        }
        #expect(watched.filter { $0["event"] as? String == "operator" }.count == operators.count, "\(w.stdout)")
        #expect(watched.contains { $0["task"] as? String == "other" && $0["event"] as? String == "finished" },
                "the last task's end is in the stream: \(w.stdout)")
    }

    @Test("status of a 1,500-task batch (a reply of about 80 KB) comes back whole")
    func statusOfLargeBatch() async throws {
        let f = try CLIBatchFixture()
        let go = f.path("go")
        let gate: [String: Any] = ["name": "gate", "command": ["/bin/sh", "-c", "while [ ! -e '\(go)' ]; do sleep 0.05; done"]]
        let rest: [[String: Any]] = (1..<1500).map { ["name": String(format: "shard-%04d", $0), "command": ["/bin/true"]] }
        try f.writeJob(["concurrency": 1, "tasks": [gate] + rest])
        let socket = f.path("ctl.sock")
        let batch = try await f.start(["--control", socket])
        #expect(await CLICtl.waitForSocket(socket), "no control socket")

        let r = try await CLICtl.ctl(["--socket", socket, "status", "--json"], in: f.scratch, timeout: .seconds(5))
        #expect(!r.timedOut, "ctl status got no reply in 5 s (and would have waited forever): \(r)")
        #expect(r.status == 0, "\(r)")
        if r.status == 0 {
            let reply = try CLIJSON.object(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect((reply["tasks"] as? [Any])?.count == 1500, "\(r.stdout.prefix(300))")
        }
        // A raw client sees the same: no reply line at all.
        let client = try CLICtlClient(path: socket)
        #expect(await client.send("{\"op\":\"status\",\"id\":\"big\"}\n"))
        let line = await client.readLine(timeout: .seconds(3))
        #expect(line != nil, "no reply to a status request on a 1,500-task batch")
        #expect(line.map { $0.hasPrefix("{\"id\":\"big\",\"ok\":true") } == true, "\(line?.prefix(200) ?? "nothing")")

        batch.signal(SIGINT)  // stop: cancels the gate, skips the rest
        let end = await batch.finish(timeout: .seconds(30))
        #expect(end.status == 130, "\(end)")
    }
}
