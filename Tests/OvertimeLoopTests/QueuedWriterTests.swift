import Foundation
import OvertimeLoop
import OvertimeTestSupport
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct QueuedWriterTests {
    @Test("blocked output: writes never wait; a task's latest progress and every end are kept; the drop is said once")
    func blockedOutputKeepsWhatMatters() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let notes = Mutex<[(Int, Int)]>([])
        let channel = QueuedWriter(fd: ends[1]) { lines, bytes in notes.withLock { $0.append((lines, bytes)) } }
        let line = { (task: Int, i: Int) in Array("progress \(task) \(i) \(String(repeating: "x", count: 10_000))\n".utf8) }
        // 2,000 progress lines of 10 KB each for 4 tasks (20 MB): 300 times what the pipe
        // holds, written while nothing reads it. Were a write to wait, this would hang here.
        for i in 0..<2000 {
            channel.write(line(i % 4, i), .latest(key: i % 4))
            if i % 500 == 0 { channel.write(Array("event \(i)\n".utf8), .event) }
        }
        for task in 0..<4 { channel.write(Array("exited \(task)\n".utf8), .kept) }
        // Now read it all.
        let reader = Thread.detachedRead(ends[0])
        channel.flush()
        close(ends[1])
        let text = String(decoding: await reader.value, as: UTF8.self)
        let lines = text.split(separator: "\n")
        for task in 0..<4 {
            #expect(lines.contains("exited \(task)"), "task \(task)'s end was dropped")
            let last = 1996 + task
            #expect(lines.contains { $0.hasPrefix("progress \(task) \(last) ") }, "task \(task)'s latest progress was dropped")
        }
        #expect(text.utf8.count < 2 * QueuedWriter.Limits.standard.soft + 2 * 65536 + 4 * 10_100,
                "what waited was not bounded: \(text.utf8.count) bytes")
        let said = notes.withLock { $0 }
        #expect(said.count == 1, "the drop is said once for one stall: \(said)")
        #expect((said.first?.0 ?? 0) > 1000, "\(said)")
        #expect(lines.filter { $0.hasPrefix("event ") }.count == 4, "event lines under the hard limit are kept")
    }

    @Test("closeWhenWritten: what is queued is written, then the descriptor is closed, without waiting in the caller")
    func closeWhenWritten() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = QueuedWriter(fd: ends[1], closesDescriptor: true) { _, _ in }
        // More than the pipe holds: the writing thread is blocked when the close is asked for.
        let line = Array((String(repeating: "x", count: 999) + "\n").utf8)
        for _ in 0..<200 { writer.write(line) }
        writer.closeWhenWritten()
        writer.write(Array("after the close\n".utf8))
        // EOF comes only once the writer closed its end: reading to the end proves the close.
        let text = String(decoding: await Thread.detachedRead(ends[0]).value, as: UTF8.self)
        #expect(text.utf8.count == 200 * 1000, "\(text.utf8.count) bytes")
        #expect(!text.contains("after the close"))
    }

    @Test("flush(waitingAtMost:) gives up on an output that does not take what waits, and reports done once it has")
    func boundedFlush() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = QueuedWriter(fd: ends[1], closesDescriptor: true) { _, _ in }
        // More than the pipe holds, and nobody reads.
        writer.write([UInt8](repeating: 0x78, count: 1 << 20))
        let clock = ContinuousClock()
        let started = clock.now
        #expect(!writer.flush(waitingAtMost: .milliseconds(100)))
        #expect(clock.now - started < .seconds(5), "the bounded flush waited \(clock.now - started)")
        writer.closeWhenWritten()
        let read = await Thread.detachedRead(ends[0]).value
        #expect(read.count == 1 << 20)
        #expect(writer.flush(waitingAtMost: .milliseconds(100)))
    }

    @Test("an output that fails ends the writing: flush returns, and later writes are let go")
    func failedOutputEndsTheWriting() {
        let calls = Mutex(0)
        let writer = QueuedWriter(output: { _ in calls.withLock { $0 += 1 }; return false }) { _, _ in }
        writer.write(Array("one\n".utf8))
        writer.flush()
        writer.write(Array("two\n".utf8))
        writer.flush()
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("perform: work runs on the writing thread between the lines queued before and after it, and still runs once the output has failed")
    func performRunsInOrder() {
        let seen = Mutex<[String]>([])
        let failing = Mutex(false)
        let writer = QueuedWriter(output: { bytes in
            seen.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
            return !failing.withLock { $0 }
        }) { _, _ in }
        writer.write(Array("one\n".utf8))
        writer.perform { seen.withLock { $0.append("work") } }
        writer.write(Array("two\n".utf8))
        writer.flush()
        #expect(seen.withLock { $0 } == ["one\n", "work", "two\n"])
        failing.withLock { $0 = true }
        writer.write(Array("three\n".utf8))
        writer.flush()
        // Whoever queued work waits for it: a broken output does not let it go (flush no
        // longer waits once the output is gone, so this waits for the work itself).
        let ran = Mutex(false)
        writer.perform { ran.withLock { $0 = true } }
        let until = ContinuousClock.now + .seconds(5)
        while !ran.withLock({ $0 }), ContinuousClock.now < until { usleep(1000) }
        #expect(ran.withLock { $0 }, "the work queued after the output failed never ran")
    }
}
