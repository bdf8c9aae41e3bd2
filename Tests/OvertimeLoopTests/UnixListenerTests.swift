import Foundation
import OvertimeLoop
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The loop's Unix listener: a second listener at a path that is taken fails, and leaves the
/// first one's socket where it is (it once removed it on the way out).
@Suite struct UnixListenerTests {
    @Test func aListenerRefusedAtATakenPathLeavesTheOtherSocketAlone() async throws {
        let path = NSTemporaryDirectory() + "overtime-listener-\(getpid()).sock"
        unlink(path)
        defer { unlink(path) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let second = await onLoop(loop) { () -> Int32? in
            guard let first = try? UnixListener(loop: loop, path: path, onConnection: { stream, _ in stream.close() }) else { return -1 }
            defer { first.close() }
            do throws(SystemError) {
                let listener = try UnixListener(loop: loop, path: path) { stream, _ in stream.close() }
                listener.close()
                return nil
            } catch {
                // Asked while the first still listens.
                return UnixListener.probe(path) == .live ? error.errno : -2
            }
        }
        #expect(second == EADDRINUSE, "the second bind fails, and the first's socket still listens (-2: it was removed)")
    }
}
