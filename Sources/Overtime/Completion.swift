import Dispatch
import Synchronization

/// A value that arrives once (a task's outcome, a batch's summary), for async and blocking
/// waiters alike. The first `complete` wins; later ones are ignored.
final class Completion<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var continuations: [CheckedContinuation<Value, Never>] = []
        var blockedThreads: [DispatchSemaphore] = []
    }

    private let state = Mutex(State())

    /// The value, if it has arrived.
    var value: Value? { state.withLock { $0.value } }

    func complete(_ value: Value) {
        let (continuations, blocked) = state.withLock { s -> ([CheckedContinuation<Value, Never>], [DispatchSemaphore]) in
            guard s.value == nil else { return ([], []) }
            s.value = value
            defer {
                s.continuations.removeAll()
                s.blockedThreads.removeAll()
            }
            return (s.continuations, s.blockedThreads)
        }
        for continuation in continuations { continuation.resume(returning: value) }
        for semaphore in blocked { semaphore.signal() }
    }

    func wait() async -> Value {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s -> Value? in
                if let value = s.value { return value }
                s.continuations.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Blocks the calling thread until the value arrives.
    func waitBlocking() -> Value {
        let semaphore = DispatchSemaphore(value: 0)
        let ready = state.withLock { s -> Value? in
            if let value = s.value { return value }
            s.blockedThreads.append(semaphore)
            return nil
        }
        if let ready { return ready }
        semaphore.wait()
        return state.withLock { $0.value! }
    }
}
