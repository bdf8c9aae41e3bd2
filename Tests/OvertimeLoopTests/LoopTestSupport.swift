import Foundation
import OvertimeLoop
import Synchronization

// What the loop tests share: a way to run code on the loop thread and await its result,
// state the loop's callbacks fill in and the test reads, and polling with a generous bound.

/// Runs `body` on the loop thread (where every handle must be touched) and returns its
/// result to the awaiting test.
func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        loop.execute { continuation.resume(returning: body()) }
    }
}

/// State written by loop callbacks and read by the test thread.
final class Shared<Value: Sendable>: Sendable {
    private let state: Mutex<Value>

    init(_ value: Value) { state = Mutex(value) }

    var value: Value { state.withLock { $0 } }

    func update(_ change: (inout Value) -> Void) {
        state.withLock { change(&$0) }
    }
}

/// Polls `condition` until it holds or `timeout` passes. The bound is only there so a
/// broken loop fails the test instead of hanging it; it is never a speed claim.
func eventually(within timeout: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// Writes all of `bytes` to a blocking descriptor (the test's end of a pair).
func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    do throws(SystemError) {
        try Descriptors.writeAll(fd, bytes)
    } catch {
        preconditionFailure("\(error)")
    }
}

/// A recognisable byte pattern: position `i` holds a byte that depends on `i` and `seed`,
/// so a reordered, lost or repeated range shows up in a comparison.
func pattern(count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 8) ^ seed) }
}
