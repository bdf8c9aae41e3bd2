import Foundation

/// Runs blocking work (a read to end of file, a wait for a process) on a thread of its own
/// and awaits it: the test process's shared threads are as few as its cores, and every
/// test stalls while they are all blocked.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
