/// Under `every-reporter`, the deadline of each reporter that has reported and is still
/// connected, and which of them is earliest: the soft deadline in force (DESIGN §3a).
///
/// The earliest is kept out of the dictionary, as it changes, so reading it costs nothing
/// and the one reporter of most tasks reports with no hashing and no look at anything
/// else. A report moves one reporter's deadline later; only when that reporter held the
/// earliest, and others are there, are the others looked at again (a task's ranks: few).
struct ReporterDeadlines: Sendable, Equatable {
    /// Whose deadline is earliest, and when; nil before any reporter has reported.
    private(set) var earliest: Entry?
    /// Every other reporter's.
    private var others: [ReporterID: MonotonicInstant] = [:]

    struct Entry: Sendable, Equatable {
        var reporter: ReporterID
        var deadline: MonotonicInstant

        /// Earlier deadline first; of equal ones, the lower number, so the reporter named
        /// for a tie is the same every time.
        static func isBefore(_ a: Entry, _ b: Entry) -> Bool {
            (a.deadline, a.reporter.number) < (b.deadline, b.reporter.number)
        }
    }

    /// Every deadline, the earliest first (for a status).
    var sorted: [Entry] {
        guard let earliest else { return [] }
        return [earliest] + others.map { Entry(reporter: $0.key, deadline: $0.value) }.sorted(by: Entry.isBefore)
    }

    /// `reporter` reported: its deadline becomes `max(its own, candidate)`; a reporter's
    /// first report starts from `start` (the task's deadline then).
    mutating func reported(_ reporter: ReporterID, candidate: MonotonicInstant, start: MonotonicInstant) {
        guard var first = earliest else {
            earliest = Entry(reporter: reporter, deadline: max(start, candidate))
            return
        }
        if first.reporter == reporter {
            guard candidate > first.deadline else { return }
            first.deadline = candidate
            if others.isEmpty {
                earliest = first
            } else {
                others[reporter] = candidate
                takeEarliest()
            }
            return
        }
        let previous = others[reporter]
        let moved = Entry(reporter: reporter, deadline: max(previous ?? start, candidate))
        guard moved.deadline != previous else { return }
        if Entry.isBefore(first, moved) {
            others[reporter] = moved.deadline
        } else {
            others[reporter] = nil
            others[first.reporter] = first.deadline
            earliest = moved
        }
    }

    /// An extend: every deadline is at least `target` now.
    mutating func raise(to target: MonotonicInstant) {
        guard let first = earliest, first.deadline < target else { return }
        others[first.reporter] = target
        for (reporter, deadline) in others where deadline < target { others[reporter] = target }
        takeEarliest()
    }

    /// The reporter disconnected: a finished rank is no hang.
    mutating func remove(_ reporter: ReporterID) {
        if earliest?.reporter == reporter {
            takeEarliest()
        } else {
            others[reporter] = nil
        }
    }

    /// A revoke: no reporter's report moves the deadline any more.
    mutating func removeAll() {
        earliest = nil
        others = [:]
    }

    /// The earliest of `others` becomes `earliest` (nil when there are none).
    private mutating func takeEarliest() {
        earliest = others.lazy.map { Entry(reporter: $0.key, deadline: $0.value) }.min(by: Entry.isBefore)
        if let earliest { others[earliest.reporter] = nil }
    }
}
