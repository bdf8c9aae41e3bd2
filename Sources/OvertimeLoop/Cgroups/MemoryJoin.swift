import Synchronization

/// A yes that one thread says and another reads.
final class SharedFlag: Sendable {
    private let value: Atomic<Bool>

    init(_ initially: Bool) {
        value = Atomic(initially)
    }

    var isSet: Bool { value.load(ordering: .acquiring) }

    func set() {
        value.store(true, ordering: .releasing)
    }
}

/// Where a task's late join of its memory cgroup stands, shared by the loop and the thread
/// that moves it.
final class MemoryJoin: Sendable {
    enum State: Int { case waiting, moving, joined, abandoned }
    private let value = Atomic<Int>(State.waiting.rawValue)

    var state: State { State(rawValue: value.load(ordering: .acquiring)) ?? .abandoned }

    /// The move starts: true unless it started already or the task ended.
    func begin() -> Bool {
        value.compareExchange(expected: State.waiting.rawValue, desired: State.moving.rawValue, ordering: .acquiringAndReleasing).exchanged
    }

    func finish(joined: Bool) {
        value.store((joined ? State.joined : State.abandoned).rawValue, ordering: .releasing)
    }

    func abandon() {
        _ = value.compareExchange(expected: State.waiting.rawValue, desired: State.abandoned.rawValue, ordering: .acquiringAndReleasing)
    }
}
