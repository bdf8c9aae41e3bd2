// The run directory is the record of one run (issue 10, "Hardening"): a second run is
// never appended to it, and a record that could not be written is never silent.

import Foundation
import Testing

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
}
