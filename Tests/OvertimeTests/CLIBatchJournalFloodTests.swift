// A task flooding its channel cannot fill the disk through the journal (issue 10): bad
// lines and extend requests are thinned in events.jsonl like progress, and counted.

import Foundation
import Testing

@Suite struct CLIBatchJournalFloodTests {
    @Test("300,000 bad lines and 200,000 extends: events.jsonl stays under 64 KiB and accounts for every one")
    // Sizes that would have made a journal of tens of megabytes before it was bounded, and
    // that a loaded CI machine gets through in seconds (a channel sending more than 20,000
    // bad lines a second is read at that pace).
    func floodStaysBounded() async throws {
        let f = try CLIBatchFixture()
        let extend = f.path("extend.py")
        try Data(#"""
        import os
        out = os.fdopen(3, "wb", buffering=1 << 20)
        line = b'{"type":"extend","seconds":30}\n'
        for _ in range(200000):
            out.write(line)
        out.flush()
        """#.utf8).write(to: URL(fileURLWithPath: extend))
        try f.writeJob(["concurrency": 2, "defaults": ["budget": "2m"], "tasks": [
            ["name": "garbage", "command": ["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' '\\n' >&3"]],
            ["name": "extends", "command": [CLIBatchWorker.python, extend]],
        ]])
        let r = try await f.run(["--progress", "plain"], timeout: .seconds(120))
        #expect(r.status == 0, "\(r)")
        let size = (try FileManager.default.attributesOfItem(atPath: f.eventsPath)[.size] as? Int) ?? -1
        #expect(size > 0 && size < 64 << 10, "events.jsonl is \(size) bytes")
        #expect(r.stderr.split(separator: "\n").count < 100, "plain output flooded: \(r.stderr.split(separator: "\n").count) lines")

        func accounted(_ task: String, event: String, kind: String) throws -> (written: Int, thinned: Int, total: Int) {
            let written = try f.events(of: task, event).filter { event != "budget" || $0["cause"] as? String == "extend" }.count
            let thinned = try f.events(of: task, "thinned").filter { $0["kind"] as? String == kind }
                .compactMap { CLIJSON.int($0["count"]) }.reduce(0, +)
            let exited = try f.events(of: task, "exited").last
            let total = CLIJSON.int((exited?["thinned"] as? [String: Any])?[kind]) ?? -1
            return (written, thinned, total)
        }
        let bad = try accounted("garbage", event: "protocol-error", kind: "protocol-error")
        #expect(bad.written + bad.thinned == 300_000, "\(bad)")
        #expect(bad.thinned == bad.total, "the exited record's total matches the thinned lines: \(bad)")
        #expect(bad.written >= 10, "the first ten are written: \(bad)")
        #expect(CLIJSON.int(try f.events(of: "garbage", "exited").last?["protocol_errors"]) == 300_000)
        #expect(CLIJSON.int(try f.summaryTasks()["garbage"]?["protocol_errors"]) == 300_000)

        let replies = try accounted("extends", event: "budget", kind: "extend")
        #expect(replies.written + replies.thinned == 200_000, "\(replies)")
        #expect(replies.thinned == replies.total, "\(replies)")
    }
}
