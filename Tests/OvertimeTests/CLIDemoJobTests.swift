// The README's `overtime batch workers/demo.json` runs as written from a checkout after
// `swift build`: the job file finds the Swift workers itself (workers/bin), no PATH set up.

import Foundation
import OvertimeTestSupport
import Testing

@Suite struct CLIDemoJobTests {
    @Test("workers/demo.json with an ordinary PATH: every command found, no task fails with 126 or 127")
    func demoRunsAsWritten() async throws {
        let scratch = try CLIScratch()
        var environment = CLIBatchFixture.environment
        environment["PATH"] = "/usr/local/bin:/usr/bin:/bin"  // nothing of the build on it
        let process = CLIProcess(["batch", Checkout.path("workers/demo.json"), "--run-dir", scratch.path("run"), "--progress", "none"],
                                 environment: environment, in: scratch)
        try await process.start()
        let r = await process.finish(timeout: .seconds(90))
        #expect(r.status == 0 || r.status == 1, "\(r)")
        let data = try #require(FileManager.default.contents(atPath: scratch.path("run") + "/summary.json"), "\(r)")
        let tasks = try CLIJSON.object(String(decoding: data, as: UTF8.self))["tasks"] as? [[String: Any]] ?? []
        #expect(tasks.count == 6, "\(tasks)")
        for task in tasks {
            let code = CLIJSON.int(task["exit_code"])
            #expect(code != 127 && code != 126, "\(task["name"] ?? "?"): \(task)")
        }
        let upload = tasks.first { $0["name"] as? String == "upload-report" }
        let charge = tasks.first { $0["name"] as? String == "charge-customer" }
        #expect(charge?["outcome"] as? String == "succeeded", "\(charge ?? [:])")
        // upload-report waits for the Python tasks; where they cannot run it is skipped, never 127.
        #expect(upload?["outcome"] as? String != "failed", "\(upload ?? [:])")
    }
}
