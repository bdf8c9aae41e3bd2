import Foundation
import OvertimeLoop
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The loop's TCP listener alone (the metrics' HTTP endpoint rides on it): a port the kernel
/// chooses, bytes both ways, the sending side ended after an answer, and the refusals.
@Suite struct TCPListenerTests {
    /// A blocking client socket connected to 127.0.0.1:`port`.
    private func connectClient(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(rc == 0, "connect: \(String(cString: strerror(errno)))")
        return fd
    }

    private func readToEnd(_ fd: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return received }
            received.append(contentsOf: buffer[0..<n])
        }
    }

    @Test func echoesAnswerThenEndsTheSendingSide() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let sent = Shared(false)
        let listener = try await onLoop(loop) { () -> Result<LoopBound<TCPListener>, SystemError> in
            Result { () throws(SystemError) in
                LoopBound(try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                    var request: [UInt8] = []
                    connection.startReading(onData: { bytes in
                        request.append(contentsOf: bytes)
                        guard request.last == UInt8(ascii: "\n") else { return }
                        // A large answer: more than the socket takes at once, so libuv queues it.
                        connection.sendAndFinish(request + pattern(count: 4 << 20)) { sent.update { $0 = true } }
                    }, onEnd: { connection.close() })
                }, loop: loop)
            }
        }.get()
        let port = await onLoop(loop) { listener.value.port }
        #expect(port > 0)
        let client = connectClient(port)
        defer { close(client) }
        writeAll(client, Array("hello\n".utf8))
        // Read slowly at first: the loop must carry on meanwhile (the timer below fires).
        let ticked = Shared(false)
        await onLoop(loop) {
            let timer = LoopTimer(loop: loop)
            timer.schedule(inNanoseconds: 10_000_000) { ticked.update { $0 = true }; timer.close() }
        }
        #expect(await eventually { ticked.value })
        let received = try await offThePool { [self] in readToEnd(client) }
        #expect(received.count == 6 + (4 << 20) && received.prefix(6) == ArraySlice("hello\n".utf8) && Array(received.dropFirst(6)) == pattern(count: 4 << 20))
        #expect(await eventually { sent.value })
        await onLoop(loop) { listener.value.close() }
    }

    @Test func refusesAPortInUseAndWhatIsNoAddress() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let results = await onLoop(loop) { () -> [Int32?] in
            var errors: [Int32?] = []
            let first = try? TCPListener(loop: loop, host: "127.0.0.1", port: 0) { $0.close() }
            for (host, port) in [("127.0.0.1", first?.port ?? 0), ("not-an-address", 0), ("127.0.0.1", 70000)] {
                do throws(SystemError) {
                    let listener = try TCPListener(loop: loop, host: host, port: port) { $0.close() }
                    listener.close()
                    errors.append(nil)
                } catch {
                    errors.append(error.errno)
                }
            }
            first?.close()
            return errors
        }
        #expect(results == [EADDRINUSE, EINVAL, EINVAL])
    }
}
