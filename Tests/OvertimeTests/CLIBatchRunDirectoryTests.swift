// The run directory is the record of one run (issue 10, "Hardening"): a second run is
// never appended to it, and a record that could not be written is never silent.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A small tmpfs of its own, for a filesystem that really fills up; unmounted by `close`.
/// Mounting needs root (CAP_SYS_ADMIN).
final class CLIFullFilesystem {
    let path: String

    init(at path: String, size: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let mount = try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", path])
        guard mount == 0 else { throw CLIFailure("mount -t tmpfs on \(path) exited \(mount)") }
    }

    /// Unmounts (lazily if something still holds it, so the test never leaves it behind).
    func close() {
        if (try? Self.run("/bin/umount", [path])) != 0 { _ = try? Self.run("/bin/umount", ["-l", path]) }
    }

    private static func run(_ tool: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

@Suite struct CLIBatchRunDirectoryTests {
    @Test("--run-dir naming an earlier run, without --resume: refused with 125, naming --resume; the first run's record untouched")
    func reusedRunDirectoryIsRefused() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [f.task("once", ["print=first"])]])
        let first = try await f.run()
        #expect(first.status == 0, "\(first)")
        let journal = try String(contentsOfFile: f.eventsPath, encoding: .utf8)
        let summary = try String(contentsOfFile: f.runDirectory + "/summary.json", encoding: .utf8)

        let second = try await f.run()
        #expect(second.status == 125, "\(second)")
        #expect(second.stderr.contains("--resume \(f.runDirectory)"), "the refusal names the way out: \(second.stderr)")
        #expect(second.stderr.contains("already holds a run"), "\(second.stderr)")
        #expect(f.records(of: "once").count == 1, "the task ran again: \(f.records(of: "once"))")
        #expect(try String(contentsOfFile: f.eventsPath, encoding: .utf8) == journal, "the journal was appended to")
        #expect(try String(contentsOfFile: f.runDirectory + "/summary.json", encoding: .utf8) == summary, "the summary was overwritten")

        // --resume is the way to go on in it.
        let resumed = try await cliRun(["batch", "--resume", f.runDirectory], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(resumed.status == 0, "\(resumed)")
    }

    @Test("--run-dir naming a directory with other files: refused; an empty one is used")
    func nonEmptyDirectoryIsRefused() async throws {
        let f = try CLIBatchFixture()
        try f.writeJob(["tasks": [f.task("t")]])
        try FileManager.default.createDirectory(atPath: f.runDirectory, withIntermediateDirectories: true)
        let r0 = try await f.run()
        #expect(r0.status == 0, "an empty directory is fine: \(r0)")

        let other = f.path("busy")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: other + "/notes.txt"))
        let r = try await cliRun(["batch", f.jobPath, "--run-dir", other], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("is not empty") && r.stderr.contains("notes.txt"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: other + "/events.jsonl"), "it wrote into the directory anyway")
    }

    @Test("a run directory on a filesystem that fills up: said on stderr at once and once, exit 125 though every task succeeded; no cut summary",
          .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
    func fullFilesystem() async throws {
        let f = try CLIBatchFixture()
        let disk = try CLIFullFilesystem(at: f.path("small"), size: "64k")
        defer { disk.close() }
        let run = disk.path + "/run"
        // The first task's output (its log, in the run directory) fills the filesystem; the
        // others then run with a journal that cannot be written once its first page (which
        // tmpfs gave it before) is full.
        var tasks: [[String: Any]] = [["name": "fill", "command": ["sh", "-c", "head -c 200000 /dev/zero 2>/dev/null; exit 0"]]]
        for i in 1...11 { tasks.append(["name": "t\(i)", "command": ["true"], "after": [i == 1 ? "fill" : "t\(i - 1)"]]) }
        try f.writeJob(["concurrency": 1, "tasks": tasks])
        let r = try await cliRun(["batch", f.jobPath, "--run-dir", run, "--progress", "plain"], in: f.scratch,
                                 environment: CLIBatchFixture.environment)
        #expect(r.status == 125, "the record is lost: not a success: \(r)")
        #expect(r.stdout.contains("12 of 12 succeeded"), "the tasks themselves did succeed: \(r.stdout)")
        let failures = r.stderr.split(separator: "\n").filter { $0.contains("cannot write \(run)/events.jsonl: No space left on device") }
        #expect(failures.count == 2, "said once as it happened, once at the end: \(r.stderr)")
        // At once: before the later tasks' lines, not only at the end.
        if let said = r.stderr.range(of: "record is incomplete: cannot write"), let last = r.stderr.range(of: "t11: succeeded") {
            #expect(said.lowerBound < last.lowerBound, "\(r.stderr)")
        } else {
            Issue.record("no early word of the failure, or no line for t11: \(r.stderr)")
        }
        #expect(r.stderr.contains("is incomplete") && r.stderr.contains("exit 125"), "\(r.stderr)")
        // Whatever the summary is, it is never a cut file: whole JSON, or not there.
        if let data = FileManager.default.contents(atPath: run + "/summary.json") {
            let summary = try CLIJSON.object(String(decoding: data, as: UTF8.self))
            #expect(summary["record_errors"] != nil, "\(summary)")
        }
        #expect(!FileManager.default.fileExists(atPath: run + "/summary.json.tmp"), "a cut temporary was left behind")
    }
}
