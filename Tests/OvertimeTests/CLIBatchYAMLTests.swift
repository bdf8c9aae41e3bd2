// `overtime batch` with a YAML job file (docs/jobfile.md, "YAML"): run as a JSON one is, refused
// with the place of what is wrong, and resumed from the run directory's copy of the job.

import Foundation
import Testing

@Suite struct CLIBatchYAMLTests {
    @Test("a YAML job file with comments runs to success, and its run resumes from the run directory's copy")
    func runsAndResumes() async throws {
        let f = try CLIBatchFixture()
        let fixed = f.path("fixed")
        let argv = { (steps: [String]) in "[" + f.command(steps).map { "'\($0)'" }.joined(separator: ", ") + "]" }
        let path = try f.scratch.write("jobs.yaml", """
        # Two tasks; the second fails until the file 'fixed' exists.
        concurrency: 2   # both may run at once
        tasks:
          - name: first
            command: \(argv(["print=hello"]))
          - name: second
            command: \(argv(["exit-if-exists=\(fixed)", "exit=1"]))
            after: [first]   # a flow sequence
        """)
        let r = try await cliRun(["batch", path, "--run-dir", f.runDirectory], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(r.status == 1, "\(r)")
        #expect(f.records(of: "first").count == 1)
        #expect(f.records(of: "second").first?.exitCode == 1, "\(f.loadRecords())")

        try Data().write(to: URL(fileURLWithPath: fixed))
        let resumed = try await cliRun(["batch", "--resume", f.runDirectory], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(resumed.status == 0, "\(resumed)")
        #expect(f.records(of: "first").count == 1, "a task that succeeded ran again")
        // Its attempt 1 again (the records are kept by attempt), which succeeded this time.
        #expect(f.records(of: "second").first?.exitCode == 0, "\(f.loadRecords())")
    }

    @Test("a duplicate key in a YAML job file exits 125, naming its line and column, and starts nothing")
    func duplicateKeyIsRefused() async throws {
        let f = try CLIBatchFixture()
        let marker = f.path("marker")
        let path = try f.scratch.write("jobs.yml", """
        tasks:
          - name: train
            command: [sh, -c, "touch \(marker)"]
            budget: 5m
            budget: 10m
        """)
        let r = try await cliRun(["batch", path, "--run-dir", f.runDirectory], in: f.scratch, environment: CLIBatchFixture.environment)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("\(path): the key 'budget' is given a second time at line 5, column 5; it is first at line 4"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker), "a task ran")
        #expect(!FileManager.default.fileExists(atPath: f.eventsPath), "a run began")
    }
}
