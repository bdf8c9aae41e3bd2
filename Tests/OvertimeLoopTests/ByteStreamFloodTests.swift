import Foundation
import OvertimeLoop
import Testing

@Suite struct ByteStreamFloodTests {
    static let pipeCapacity = 1 << 20  // Linux's default fs.pipe-max-size for unprivileged users
    static let floodSize = 4 << 20
    /// F_SETPIPE_SZ (F_LINUX_SPECIFIC_BASE + 7), which Glibc's Swift import does not carry.
    static let setPipeSize: Int32 = 1031

    /// Fills a pipe to its (raised) capacity without blocking and returns how much went in.
    static func prefill(_ fd: Int32, _ bytes: [UInt8]) -> Int {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            offset += n
        }
        return offset
    }

    @Test func twoFloodedStreamsAreReadInTurns() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // Pipes raised to 1 MiB and filled before reading starts: each stream has 16 full
        // 64 KiB reads waiting, so a loop that drained one stream per wake-up (libuv reads
        // up to 32 times) would show a run of 16 chunks from one stream before the other.
        var writers: [Int32] = []
        var readers: [Int32] = []
        var floods: [[UInt8]] = []
        var prefilled: [Int] = []
        for seed in 0..<2 {
            let (r, w) = try Descriptors.pipe()
            #expect(fcntl(w, Self.setPipeSize, Int32(Self.pipeCapacity)) >= Self.pipeCapacity)
            let flood = pattern(count: Self.floodSize, seed: 10 + seed)
            prefilled.append(Self.prefill(w, flood))
            readers.append(r)
            writers.append(w)
            floods.append(flood)
        }
        #expect(prefilled.allSatisfy { $0 >= Self.pipeCapacity })

        // Chunk arrivals in order (which stream), and each stream's bytes.
        let arrivals = Shared<[Int]>([])
        let bytes = Shared<[[UInt8]]>([[], []])
        let ended = Shared<[Int]>([])
        let readerFDs = readers
        let streams = await onLoop(loop) { () -> Result<LoopBound<[ByteStream]>, SystemError> in
            do throws(SystemError) {
                var streams: [ByteStream] = []
                for fd in readerFDs {
                    let stream = try ByteStream(loop: loop, fd: fd)
                    streams.append(stream)
                }
                // Both start in the same loop turn, so both are readable at the first poll.
                for (which, stream) in streams.enumerated() {
                    stream.startReading(onData: { chunk in
                        let data = Array(chunk)
                        arrivals.update { $0.append(which) }
                        bytes.update { $0[which] += data }
                    }, onEnd: { _ in ended.update { $0.append(which) } })
                }
                return .success(LoopBound(streams, loop: loop))
            } catch {
                return .failure(error)
            }
        }
        let opened = try streams.get()

        // The rest of each flood from a thread of its own, as a task writing flat out would.
        for which in 0..<2 {
            let fd = writers[which], rest = Array(floods[which][prefilled[which]...])
            Thread.detachNewThread {
                writeAll(fd, rest)
                Descriptors.close(fd)
            }
        }

        #expect(await eventually { ended.value.count == 2 })
        let order = arrivals.value
        #expect(bytes.value[0] == floods[0])
        #expect(bytes.value[1] == floods[1])

        // While both had prefilled data waiting (the first 16 chunks of each), neither was
        // read more than a couple of times in a row.
        let prefix = Array(order.prefix(24))
        var longestRun = 0, run = 0
        for (i, which) in prefix.enumerated() {
            run = i > 0 && prefix[i - 1] == which ? run + 1 : 1
            longestRun = max(longestRun, run)
        }
        #expect(longestRun <= 3, "chunk order began \(prefix)")
        // Neither stream was read to its end before the other had its first chunk.
        for which in 0..<2 {
            let firstOfOther = order.firstIndex(of: 1 - which)
            let lastOfThis = order.lastIndex(of: which)
            #expect(firstOfOther != nil && lastOfThis != nil && firstOfOther! < lastOfThis!)
        }
        await onLoop(loop) { for stream in opened.value { stream.close() } }
    }

    /// A 1 KiB message that says which it is in every byte, so a torn one is visible.
    static func message(_ index: Int) -> [UInt8] {
        var bytes = withUnsafeBytes(of: UInt32(index).littleEndian, Array.init)
        bytes += [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 1024 - 4)
        return bytes
    }

    @Test func writesToAPeerThatNeverReadsReturnAtOnceAndDropWholeMessages() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (mine, peer) = try Descriptors.socketPair()
        defer { Descriptors.close(peer) }
        let streamBox = await onLoop(loop) { () -> Result<LoopBound<ByteStream>, SystemError> in
            do throws(SystemError) {
                return .success(LoopBound(try ByteStream(loop: loop, fd: mine), loop: loop))
            } catch {
                return .failure(error)
            }
        }
        let stream = try streamBox.get()

        // 1 MiB of 1 KiB messages while the peer reads nothing: far more than the socket
        // buffer plus the 64 KiB queue can hold.
        let count = 1024
        let (accepted, elapsed) = await onLoop(loop) { () -> ([Int], Duration) in
            let start = ContinuousClock.now
            var accepted: [Int] = []
            for i in 0..<count where stream.value.write(Self.message(i)) { accepted.append(i) }
            return (accepted, ContinuousClock.now - start)
        }
        // A write that blocked would never return here (the peer does not read); the
        // bound is only a generous ceiling.
        #expect(elapsed < .seconds(5))
        #expect(accepted.count < count, "some messages must have been dropped")
        #expect(!accepted.isEmpty)
        // Once the queue has refused a message, it holds what fits: the accepted ones are
        // the first ones, in one run.
        #expect(accepted == Array(0..<accepted.count))

        // Now the peer reads: everything accepted arrives (the queue is retried), whole.
        var read: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let expected = accepted.count * 1024
        let deadline = ContinuousClock.now + .seconds(20)
        _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK)
        while read.count < expected, ContinuousClock.now < deadline {
            let n = buffer.withUnsafeMutableBytes { recv(peer, $0.baseAddress, $0.count, 0) }
            if n > 0 { read += buffer[0..<n] } else { try await Task.sleep(for: .milliseconds(5)) }
        }
        // Room for anything beyond what was accepted to show up.
        try await Task.sleep(for: .milliseconds(100))
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(peer, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            read += buffer[0..<n]
        }
        #expect(read.count == expected)
        let messages = stride(from: 0, to: read.count, by: 1024).map { Array(read[$0..<min($0 + 1024, read.count)]) }
        #expect(messages == accepted.map(Self.message))
        await onLoop(loop) { stream.value.close() }
    }
}
