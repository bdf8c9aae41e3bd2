import Foundation
import OvertimeLoop
import Testing

@Suite struct ByteStreamTests {
    /// What a stream under test has reported so far.
    struct Received: Sendable {
        var bytes: [UInt8] = []
        var ends: [Int32?] = []
        var dataAfterEnd = false
    }

    /// Opens a ByteStream on `fd` and records everything it delivers.
    static func record(_ loop: EventLoop, fd: Int32, into received: Shared<Received>) async throws -> LoopBound<ByteStream> {
        let opened = await onLoop(loop) { () -> Result<LoopBound<ByteStream>, SystemError> in
            do throws(SystemError) {
                let stream = try ByteStream(loop: loop, fd: fd)
                stream.startReading(onData: { chunk in
                    let bytes = Array(chunk)
                    received.update {
                        if !$0.ends.isEmpty { $0.dataAfterEnd = true }
                        $0.bytes += bytes
                    }
                }, onEnd: { end in
                    received.update { $0.ends.append(end) }
                })
                return .success(LoopBound(stream, loop: loop))
            } catch {
                return .failure(error)
            }
        }
        return try opened.get()
    }

    @Test func bytesArriveInOrderAndTheEndIsReportedOnce() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (mine, peer) = try Descriptors.socketPair()
        let received = Shared(Received())
        let stream = try await Self.record(loop, fd: mine, into: received)

        // Several writes with pauses between them, so they arrive as separate reads.
        let sent = pattern(count: 300_000, seed: 1)
        for start in stride(from: 0, to: sent.count, by: 100_000) {
            writeAll(peer, Array(sent[start..<start + 100_000]))
            try await Task.sleep(for: .milliseconds(20))
        }
        Descriptors.close(peer)

        #expect(await eventually { !received.value.ends.isEmpty })
        // Room for a second, wrong, end report to show up.
        try await Task.sleep(for: .milliseconds(200))
        let result = received.value
        #expect(result.bytes == sent)
        #expect(result.ends.count == 1)
        #expect(result.ends.first == .some(nil), "end of stream is nil, not an errno")
        #expect(!result.dataAfterEnd)
        await onLoop(loop) { stream.value.close() }
    }

    @Test func pausedReadingHoldsDataBackUntilResumed() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (mine, peer) = try Descriptors.socketPair()
        defer { Descriptors.close(peer) }
        let received = Shared(Received())
        let stream = try await Self.record(loop, fd: mine, into: received)

        let first = pattern(count: 1_000, seed: 2)
        writeAll(peer, first)
        #expect(await eventually { received.value.bytes.count == first.count })

        await onLoop(loop) { stream.value.pauseReading() }
        // Less than a socket buffer, so the peer's write does not block while paused.
        let second = pattern(count: 50_000, seed: 3)
        writeAll(peer, second)
        try await Task.sleep(for: .milliseconds(200))
        #expect(received.value.bytes.count == first.count, "nothing arrives while paused")
        #expect(await onLoop(loop) { stream.value.isPaused })

        await onLoop(loop) { stream.value.resumeReading() }
        #expect(await eventually { received.value.bytes.count >= first.count + second.count })
        #expect(received.value.bytes == first + second)
        #expect(received.value.ends.isEmpty)
        await onLoop(loop) { stream.value.close() }
    }
}
