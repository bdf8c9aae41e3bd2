import Foundation
import Overtime
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct RunJournalTests {
    /// Prepares `name`'s log for `attempt` and waits for the journal's thread to be done.
    static func prepare(_ journal: RunJournal, _ name: String, attempt: Int) async -> String? {
        await withCheckedContinuation { done in journal.prepareLog(name, attempt: attempt) { done.resume(returning: $0) } }
    }

    @Test("prepareLog: the log is created for a first attempt, marked before a retry; a log that cannot be made is left to the start to report, a marker is the record's")
    func prepareLogCreatesAndMarks() async throws {
        let directory = NSTemporaryDirectory() + "overtime-journal-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let journal = try RunJournal(directory: directory, runID: "r1")
        #expect(await Self.prepare(journal, "a", attempt: 1) == nil)
        #expect(try String(contentsOfFile: journal.logPath(for: "a"), encoding: .utf8) == "")
        #expect(await Self.prepare(journal, "a", attempt: 2) == nil)
        #expect(try String(contentsOfFile: journal.logPath(for: "a"), encoding: .utf8) == "--- overtime: attempt 2 ---\n")
        // A name whose log cannot be made (a directory stands where it goes).
        try FileManager.default.createDirectory(atPath: journal.logPath(for: "b"), withIntermediateDirectories: false)
        #expect(await Self.prepare(journal, "b", attempt: 1) == nil)
        let failure = await Self.prepare(journal, "b", attempt: 2)
        #expect(failure?.contains("cannot write \(journal.logPath(for: "b"))") == true, "\(String(describing: failure))")
        #expect(journal.failures.count == 1, "\(journal.failures)")
    }

    @Test("a journal nobody can write to for a while: appends never wait; kept lines all arrive, in order; progress past the limit is held back and said so")
    func stalledJournalHoldsBackProgressOnly() async throws {
        let directory = NSTemporaryDirectory() + "overtime-journal-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // events.jsonl as a FIFO that is open and not read: every write waits, as on a frozen
        // filesystem, until the test reads.
        #expect(mkfifo(directory + "/events.jsonl", 0o644) == 0)
        let reading = open(directory + "/events.jsonl", O_RDONLY | O_NONBLOCK)
        #expect(reading >= 0)
        defer { close(reading) }
        _ = fcntl(reading, F_SETFL, fcntl(reading, F_GETFL) & ~O_NONBLOCK)
        var journal: RunJournal? = try RunJournal(directory: directory, runID: "r1")
        let progress = Array((#"{"event":"progress","title":""# + String(repeating: "x", count: 10_000) + "\"}\n").utf8)
        for i in 0..<1000 {
            // 10 MB of progress while nothing reads: more than the 4 MiB limit. Were an append
            // to wait, this would hang here.
            journal!.append(progress, .event)
            if i % 100 == 0 { journal!.append(Array(#"{"event":"finished","n":\#(i)}"#.utf8) + [0x0A]) }
        }
        let reader = Thread.detachedRead(reading)
        journal!.drain()
        #expect(journal!.lostLines == 0 && journal!.failures.isEmpty)
        journal = nil
        let lines = String(decoding: await reader.value, as: UTF8.self).split(separator: "\n")
        let kept = lines.filter { $0.contains(#""finished""#) }
        #expect(kept.map { String($0) } == (0..<10).map { #"{"event":"finished","n":\#($0 * 100)}"# }, "kept lines lost or reordered")
        let written = lines.filter { $0.contains(#""progress""#) }.count
        #expect(written < 1000 && written > 300, "\(written) progress lines written")
        let note = try #require(lines.last { $0.contains(#""event":"held-back""#) }, "no held-back line")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(note.utf8)) as? [String: Any])
        #expect(object["lines"] as? Int == 1000 - written, "\(note)")
        #expect(object["run"] as? String == "r1")
    }
}
