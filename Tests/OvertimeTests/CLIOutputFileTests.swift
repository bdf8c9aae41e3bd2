// `--report FILE` and `--metrics-file FILE` replace only a regular file of the user's own:
// anything else (a symlink, a FIFO, a descriptor's name) is written through, and a path that
// cannot be written is refused before the task starts.

import Foundation
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct CLIOutputFileTests {
    /// A task that notes it ran: a refusal must come before it.
    static func marker(_ scratch: CLIScratch) -> [String] {
        ["/bin/sh", "-c", CLIChild.shNote(scratch.path("ran"), "yes")]
    }

    static func isSymlink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
    }

    @Test("--report through a symlink to /proc/self/fd/1: the report reaches overtime's stdout and the symlink stays")
    func reportThroughSymlinkToStdout() async throws {
        let scratch = try CLIScratch()
        let link = scratch.path("out")
        #expect(symlink("/proc/self/fd/1", link) == 0)
        let r = try await cliRun(["run", "--report", link, "--progress", "none", "--"] + Self.marker(scratch), in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(Self.isSymlink(link), "the symlink was replaced")
        let report = try r.report()
        #expect(report["outcome"] as? String == "succeeded", "\(r.stdout)")
    }

    @Test("--report to a FIFO: its reader gets the report, and the FIFO is still a FIFO")
    func reportToFIFO() async throws {
        let scratch = try CLIScratch()
        let fifo = scratch.path("report")
        let reading = try CLIStalledFileTests.stalledFIFO(fifo)
        defer { close(reading) }
        let r = try await cliRun(["run", "--report", fifo, "--progress", "none", "--"] + Self.marker(scratch), in: scratch)
        #expect(r.status == 0, "\(r)")
        // Read once overtime is gone: the report waits in the FIFO (a reader that started
        // before any writer opened it would meet its end at once).
        let reader = Thread.detachedRead(reading)
        let text = String(decoding: await reader.value, as: UTF8.self)
        let object = try CLIJSON.object(text.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(object["outcome"] as? String == "succeeded", "\(text)")
        var info = stat()
        #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the FIFO was replaced")
    }

    @Test("--report that cannot be written (a descriptor not open, a directory, a missing directory): 125 before the task starts",
          arguments: ["/dev/fd/57", ".", "missing/report.json"])
    func unwritableReportIsRefusedFirst(path: String) async throws {
        let scratch = try CLIScratch()
        let target = path.hasPrefix("/") ? path : scratch.path(path)
        let r = try await cliRun(["run", "--report", target, "--progress", "none", "--"] + Self.marker(scratch), in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("--report: cannot write"), "\(r.stderr)")
        #expect(scratch.read("ran") == nil, "the task ran before the refusal")
    }

    @Test("--report and --metrics-file to a FIFO nobody reads yet: 125 at once, before the task starts, never a wait")
    func fifoWithoutReaderIsRefused() async throws {
        let scratch = try CLIScratch()
        #expect(mkfifo(scratch.path("fifo"), 0o644) == 0)
        for option in ["--report", "--metrics-file"] {
            let r = try await cliRun(["run", option, scratch.path("fifo"), "--progress", "none", "--"] + Self.marker(scratch),
                                     in: scratch, timeout: .seconds(10))
            #expect(!r.timedOut && r.status == 125, "\(option): \(r)")
            #expect(r.stderr.contains("nobody reads yet"), "\(option): \(r.stderr)")
        }
        #expect(scratch.read("ran") == nil, "the task ran before the refusal")
    }

    @Test("--report /dev/fd/N naming a descriptor of overtime's own (here the --events file), not one given to it: 125 before the task starts")
    func ownDescriptorIsRefused() async throws {
        let scratch = try CLIScratch()
        // --events is opened first and takes the lowest free descriptor, 3.
        let r = try await cliRun(["run", "--events", scratch.path("events"), "--report", "/dev/fd/3", "--progress", "none", "--"]
                                 + Self.marker(scratch), in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("none was given to overtime"), "\(r.stderr)")
        #expect(scratch.read("ran") == nil, "the task ran before the refusal")
    }

    @Test("--metrics-file through a symlink: the target holds the page, the symlink stays")
    func metricsFileThroughSymlink() async throws {
        let scratch = try CLIScratch()
        try scratch.write("target.prom", "old\n")
        let link = scratch.path("metrics.prom")
        #expect(symlink(scratch.path("target.prom"), link) == 0)
        let r = try await cliRun(["run", "--metrics-file", link, "--progress", "none", "--"] + Self.marker(scratch), in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(Self.isSymlink(link), "the symlink was replaced")
        let page = scratch.read("target.prom") ?? ""
        #expect(page.contains("overtime_build_info"), "the target was not written: \(page)")
        #expect(!page.hasPrefix("old"), "the old content was not cut: \(page)")
    }

    @Test("--report to a regular file of ours: replaced whole, as before")
    func reportReplacesOwnFile() async throws {
        let scratch = try CLIScratch()
        let path = try scratch.write("report.json", String(repeating: "old ", count: 10_000))
        let r = try await cliRun(["run", "--report", path, "--progress", "none", "--"] + Self.marker(scratch), in: scratch)
        #expect(r.status == 0, "\(r)")
        let object = try CLIJSON.object((scratch.read("report.json") ?? "").trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(object["outcome"] as? String == "succeeded")
    }
}
