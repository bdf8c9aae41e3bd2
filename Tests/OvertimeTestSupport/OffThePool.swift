import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking work (a read to end of file, a wait for a process) on a thread of its own
/// and awaits it: the test process's shared threads are as few as its cores, and every
/// test stalls while they are all blocked.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

extension Thread {
    /// Reads `fd` to its end on a thread of its own, started at once: the reading goes on
    /// while the test blocks (the task returned only collects what was read, once awaited).
    public static func detachedRead(_ fd: Int32) -> Task<[UInt8], Never> {
        let read = ReadToEnd()
        Thread.detachNewThread { read.run(fd) }
        return Task.detached { (try? await offThePool { read.wait() }) ?? [] }
    }
}

/// What a reading thread read, handed over once it reached the end.
private final class ReadToEnd: @unchecked Sendable {
    // `bytes` is written by the reading thread before `done` is signalled, read after.
    private var bytes: [UInt8] = []
    private let done = DispatchSemaphore(value: 0)

    func run(_ fd: Int32) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n > 0 { bytes += chunk[0..<n] } else if n < 0, errno == EINTR { continue } else { break }
        }
        done.signal()
    }

    func wait() -> [UInt8] {
        done.wait()
        return bytes
    }
}
