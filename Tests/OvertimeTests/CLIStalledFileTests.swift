// No file of Overtime's holds the loop: an `--events` FIFO whose reader stops reading, and a
// filesystem that stalls (a real frozen ext4: `fsfreeze` on a loop-mounted image) under the
// events file or a batch's run directory. Deadlines cancel on time and signals are obeyed
// while the writes wait; once the reader or the filesystem is back, nothing kept is lost.

import Foundation
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// An ext4 filesystem on a loop device, mounted at `path`, that the test can freeze
/// (`fsfreeze -f`: every write to it then waits) and thaw. Needs root.
final class CLIFrozenFilesystem {
    let path: String
    private var frozen = false

    init(at path: String) throws {
        self.path = path
        let image = path + ".img"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        for (tool, arguments) in [("/usr/bin/truncate", ["-s", "64M", image]), ("/sbin/mkfs.ext4", ["-q", "-F", image]),
                                  ("/bin/mount", ["-o", "loop", image, path])] {
            let status = try Self.run(tool, arguments)
            guard status == 0 else { throw CLIFailure("\(tool) \(arguments.joined(separator: " ")) exited \(status)") }
        }
    }

    func freeze() throws {
        let status = try Self.run("/sbin/fsfreeze", ["-f", path])
        guard status == 0 else { throw CLIFailure("fsfreeze -f \(path) exited \(status)") }
        frozen = true
    }

    func thaw() {
        guard frozen else { return }
        _ = try? Self.run("/sbin/fsfreeze", ["-u", path])
        frozen = false
    }

    /// Thaws (a frozen filesystem left behind would hang whatever touches it next) and
    /// unmounts, lazily if something still holds it.
    func close() {
        thaw()
        if (try? Self.run("/bin/umount", [path])) != 0 { _ = try? Self.run("/bin/umount", ["-l", path]) }
        unlink(path + ".img")
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

@Suite("CLI with a stalled file", .serialized)
struct CLIStalledFileTests {
    /// A FIFO at `path` with its reading end open (so overtime's open does not wait) and not
    /// read: returns that end, blocking, for the test to read once it chooses.
    static func stalledFIFO(_ path: String) throws -> Int32 {
        guard mkfifo(path, 0o644) == 0 else { throw CLIFailure("mkfifo \(path): errno \(errno)") }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw CLIFailure("open \(path): errno \(errno)") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    /// Polls until the file at `path` holds a line with each of `texts` (or 15 s pass).
    static func waitForLine(containing texts: String..., in path: String) async -> Bool {
        let end = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < end {
            if let content = try? String(contentsOfFile: path, encoding: .utf8),
               content.split(separator: "\n").contains(where: { line in texts.allSatisfy { line.contains($0) } }) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Polls `ctl status` until task `name` is in `state` (or 15 s pass).
    static func waitForState(_ state: String, of name: String, socket: String, in scratch: CLIScratch) async -> Bool {
        let end = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < end {
            if let r = try? await CLICtl.ctl(["--socket", socket, "status", "--json"], in: scratch, timeout: .seconds(5)), r.status == 0,
               let reply = try? CLIJSON.object(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)),
               let tasks = reply["tasks"] as? [[String: Any]],
               tasks.contains(where: { $0["name"] as? String == name && $0["state"] as? String == state }) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// `overtime run` of the chatty task with its events to a FIFO that is open and not read.
    static func chattyTaskWithEventsFIFO(budget: String) async throws -> (CLIScratch, Int32, CLIProcess) {
        let scratch = try CLIScratch()
        let child = try scratch.python("chatty.py", CLIStalledOutputTests.chattyThenSilent)
        let fifo = try stalledFIFO(scratch.path("events"))
        let overtime = CLIProcess(["run", "--progress", "none", "--events", scratch.path("events"), "--budget", budget, "--grace", "5s",
                                   "--", "python3", child, scratch.path("cancel"), "2"], in: scratch)
        try await overtime.start()
        return (scratch, fifo, overtime)
    }

    @Test("--events to a FIFO nobody reads: the deadline cancels on time, and every kept line arrives once read")
    func eventsFIFOStalls() async throws {
        let (scratch, fifo, overtime) = try await Self.chattyTaskWithEventsFIFO(budget: "2s")
        defer { close(fifo) }
        // 60 KB titles, five a second: the FIFO is full at once. Silent from 2 s, the deadline
        // falls near 4 s; with the loop stuck in a write it would come only once this test reads.
        let seen = await CLIStalledOutputTests.cancelSeen(scratch)
        let reader = Thread.detachedRead(fifo)
        let r = await overtime.finish(timeout: .seconds(30))
        let lines = String(decoding: await reader.value, as: UTF8.self).split(separator: "\n")
        #expect(seen?.reason == "timeout", "the task saw no timeout cancel while the FIFO was stalled: \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? -1) s, not near 4 s: \(r)")
        #expect(r.status == 124, "\(r)")
        #expect(lines.allSatisfy { (try? CLIJSON.object(String($0))) != nil }, "a cut or garbled line in the events")
        #expect(lines.contains { $0.contains(#""event":"exited""#) }, "the exited event was dropped: \(lines.count) lines")
    }

    @Test("--events to a FIFO nobody reads: a SIGTERM is obeyed at once, as a shutdown")
    func signalWhileEventsFIFOStalls() async throws {
        let (scratch, fifo, overtime) = try await Self.chattyTaskWithEventsFIFO(budget: "30s")
        defer { close(fifo) }
        #expect(await scratch.waitForFile("cancel.silent", timeout: .seconds(15)) != nil, "the task never went silent")
        overtime.signal(SIGTERM)
        let seen = await CLIStalledOutputTests.cancelSeen(scratch)
        let reader = Thread.detachedRead(fifo)
        let r = await overtime.finish(timeout: .seconds(30))
        _ = await reader.value
        #expect(seen?.reason == "shutdown", "the task saw: \(String(describing: seen)); \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? -1) s: \(r)")
    }

    @Test("--events on a frozen filesystem: the deadline cancels on time; once thawed, the file has the task's end",
          .enabled(if: getuid() == 0, "mounting and freezing a filesystem needs root"))
    func eventsOnFrozenFilesystem() async throws {
        let scratch = try CLIScratch()
        let disk = try CLIFrozenFilesystem(at: scratch.path("disk"))
        defer { disk.close() }
        let child = try scratch.python("chatty.py", CLIStalledOutputTests.chattyThenSilent)
        let events = disk.path + "/events.jsonl"
        let overtime = CLIProcess(["run", "--progress", "none", "--events", events, "--budget", "2s", "--grace", "5s",
                                   "--", "python3", child, scratch.path("cancel"), "2"], in: scratch)
        try await overtime.start()
        // Frozen once the task runs and while it still reports: every write to the events
        // file waits from here. (Frozen before overtime made the file, its start would wait.)
        #expect(await Self.waitForLine(containing: #""event":"started""#, in: events), "the task never started: \(overtime.stderrSoFar)")
        try disk.freeze()
        let seen = await CLIStalledOutputTests.cancelSeen(scratch)
        disk.thaw()
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(seen?.reason == "timeout", "the task saw no timeout cancel while the filesystem was frozen: \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? -1) s, not near 4 s: \(r)")
        #expect(r.status == 124, "\(r)")
        let lines = (try? String(contentsOfFile: events, encoding: .utf8))?.split(separator: "\n") ?? []
        #expect(lines.contains { $0.contains(#""event":"exited""#) }, "the exited event was lost: \(lines.count) lines")
    }

    @Test("a batch whose run directory is on a frozen filesystem: deadlines and cancels on time; once thawed, the journal and summary are whole",
          .enabled(if: getuid() == 0, "mounting and freezing a filesystem needs root"))
    func journalOnFrozenFilesystem() async throws {
        let batch = try CLIBatchFixture()
        let disk = try CLIFrozenFilesystem(at: batch.path("disk"))
        defer { disk.close() }
        let child = try batch.scratch.python("chatty.py", CLIStalledOutputTests.chattyThenSilent)
        let run = disk.path + "/run"
        try batch.writeJob(["tasks": [["name": "chatty", "budget": "2s", "grace": "5s",
                                       "command": ["python3", child, batch.path("cancel"), "2"]]]])
        let overtime = CLIProcess(["batch", batch.jobPath, "--run-dir", run, "--progress", "none"], in: batch.scratch)
        try await overtime.start()
        #expect(await Self.waitForLine(containing: #""event":"started""#, in: run + "/events.jsonl"), "the task never started: \(overtime.stderrSoFar)")
        try disk.freeze()
        let seen = await CLIStalledOutputTests.cancelSeen(batch.scratch)
        disk.thaw()
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(seen?.reason == "timeout", "the task saw no timeout cancel while the run directory was frozen: \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? -1) s, not near 4 s: \(r)")
        #expect(r.status == 1, "\(r)")
        let journal = (try? String(contentsOfFile: run + "/events.jsonl", encoding: .utf8)) ?? ""
        let lines = journal.split(separator: "\n")
        #expect(lines.allSatisfy { (try? CLIJSON.object(String($0))) != nil }, "a cut or garbled journal line")
        #expect(lines.contains { $0.contains(#""event":"finished""#) && $0.contains("chatty") }, "the task's end was lost:\n\(journal)")
        #expect(FileManager.default.fileExists(atPath: run + "/summary.json"), "no summary: \(r)")
    }

    /// A batch on a frozen filesystem (`disk`, thawed by the caller) with a task, `late`,
    /// that starts once the run directory is frozen: its log file is new and cannot be made
    /// until the thaw. Beside it `chatty` (2 s budget, silent from 2 s) runs on. Returned
    /// once `late` waits for its log; the batch's control socket is `ctl.sock`.
    static func batchStartingTaskWhileFrozen(late: [String]) async throws -> (CLIBatchFixture, CLIFrozenFilesystem, String, CLIProcess) {
        let batch = try CLIBatchFixture()
        let disk = try CLIFrozenFilesystem(at: batch.path("disk"))
        do {
            let child = try batch.scratch.python("chatty.py", CLIStalledOutputTests.chattyThenSilent)
            let run = disk.path + "/run"
            let go = batch.path("go")
            // `late` starts once `gate` ends, which it does once the test says go.
            try batch.writeJob(["concurrency": 2, "tasks": [
                ["name": "chatty", "budget": "2s", "grace": "5s", "command": ["python3", child, batch.path("cancel"), "2"]],
                ["name": "gate", "command": ["sh", "-c", "while [ ! -e \(go) ]; do sleep 0.05; done"]],
                ["name": "late", "after": ["gate"], "command": late],
            ]])
            let socket = batch.path("ctl.sock")
            let overtime = CLIProcess(["batch", batch.jobPath, "--run-dir", run, "--progress", "none", "--control", socket], in: batch.scratch)
            try await overtime.start()
            // Frozen once both run (frozen before overtime made its directory, overtime itself
            // would wait) and chatty has its SIGTERM handler (its first progress comes after
            // it); then `gate` ends and `late` starts.
            #expect(await waitForLine(containing: #""task":"gate""#, #""event":"started""#, in: run + "/events.jsonl"),
                    "gate never started: \(overtime.stderrSoFar)")
            #expect(await waitForLine(containing: #""task":"chatty""#, #""event":"progress""#, in: run + "/events.jsonl"),
                    "chatty never reported: \(overtime.stderrSoFar)")
            try disk.freeze()
            _ = try batch.scratch.write("go", "")
            #expect(await waitForState("starting", of: "late", socket: socket, in: batch.scratch), "late never came to wait for its log")
            return (batch, disk, run, overtime)
        } catch {
            disk.close()
            throw error
        }
    }

    /// The run's journal and its lines, each checked to be a whole JSON object.
    static func journalLines(_ run: String) -> (String, [Substring]) {
        let journal = (try? String(contentsOfFile: run + "/events.jsonl", encoding: .utf8)) ?? ""
        let lines = journal.split(separator: "\n")
        #expect(lines.allSatisfy { (try? CLIJSON.object(String($0))) != nil }, "a cut or garbled journal line")
        return (journal, lines)
    }

    @Test("a batch task that starts while its run directory is frozen: the other task's deadline cancels on time; once thawed, it runs and its log is whole",
          .enabled(if: getuid() == 0, "mounting and freezing a filesystem needs root"))
    func taskStartsOnFrozenFilesystem() async throws {
        let (batch, disk, run, overtime) = try await Self.batchStartingTaskWhileFrozen(late: ["sh", "-c", "echo late ran"])
        defer { disk.close() }
        let seen = await CLIStalledOutputTests.cancelSeen(batch.scratch)
        disk.thaw()
        let late = seen == nil ? await CLIStalledOutputTests.cancelSeen(batch.scratch) : nil
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(seen?.reason == "timeout", "chatty saw no timeout cancel while 'late' waited for its log (after the thaw: \(String(describing: late))): \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? late?.at ?? -1) s, not near 4 s: \(r)")
        #expect(r.status == 1, "\(r)")
        let (journal, lines) = Self.journalLines(run)
        for (task, state) in [("chatty", "failed"), ("gate", "succeeded"), ("late", "succeeded")] {
            #expect(lines.contains { $0.contains(#""event":"finished""#) && $0.contains(#""task":"\#(task)""#) && $0.contains(#""state":"\#(state)""#) },
                    "\(task) did not finish \(state):\n\(journal)")
        }
        #expect((try? String(contentsOfFile: run + "/logs/late.log", encoding: .utf8)) == "late ran\n", "late's log: \(r)")
        #expect(FileManager.default.fileExists(atPath: run + "/logs/chatty.log"), "no log for chatty")
        #expect(FileManager.default.fileExists(atPath: run + "/summary.json"), "no summary: \(r)")
    }

    @Test("a SIGTERM while a batch task waits for its log on a frozen filesystem: obeyed at once; the waiting task is cancelled as it starts",
          .enabled(if: getuid() == 0, "mounting and freezing a filesystem needs root"))
    func stopWhileTaskStartsOnFrozenFilesystem() async throws {
        let (batch, disk, run, overtime) = try await Self.batchStartingTaskWhileFrozen(late: ["sleep", "30"])
        defer { disk.close() }
        overtime.signal(SIGTERM)
        let seen = await CLIStalledOutputTests.cancelSeen(batch.scratch)
        disk.thaw()
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(seen?.reason == "shutdown", "chatty saw no shutdown cancel while 'late' waited for its log: \(String(describing: seen)); \(r)")
        #expect((seen?.at ?? 99) < 9, "cancelled at \(seen?.at ?? -1) s: \(r)")
        let (journal, lines) = Self.journalLines(run)
        // An ordinary attempt, cancelled: `--resume` runs it again.
        #expect(lines.contains { $0.contains(#""event":"attempt""#) && $0.contains(#""task":"late""#) }, "no attempt of late:\n\(journal)")
        #expect(lines.contains { $0.contains(#""event":"finished""#) && $0.contains(#""task":"late""#) && $0.contains(#""reason":"shutdown""#) },
                "late did not end as cancelled by the shutdown:\n\(journal)")
        #expect(FileManager.default.fileExists(atPath: run + "/summary.json"), "no summary: \(r)")
    }

    @Test("ctl extend and cancel of a batch task waiting for its log on a frozen filesystem: answered at once, done once it has started",
          .enabled(if: getuid() == 0, "mounting and freezing a filesystem needs root"))
    func controlWhileTaskStartsOnFrozenFilesystem() async throws {
        let (batch, disk, run, overtime) = try await Self.batchStartingTaskWhileFrozen(late: ["sleep", "30"])
        defer { disk.close() }
        let socket = batch.path("ctl.sock")
        let extend = try await CLICtl.ctl(socket: socket, ["extend", "late", "10s"], in: batch.scratch)
        let cancel = try await CLICtl.ctl(socket: socket, ["cancel", "late"], in: batch.scratch)
        disk.thaw()
        let r = await overtime.finish(timeout: .seconds(30))
        #expect(extend.status == 0 && extend.stdout.contains("starting"), "extend of a starting task: \(extend)")
        #expect(cancel.status == 0, "cancel of a starting task: \(cancel)")
        let (journal, lines) = Self.journalLines(run)
        #expect(lines.contains { $0.contains(#""event":"finished""#) && $0.contains(#""task":"late""#) && $0.contains(#""reason":"user""#) },
                "late did not end as cancelled by the operator:\n\(journal)")
        #expect(r.status == 1, "\(r)")
    }
}
