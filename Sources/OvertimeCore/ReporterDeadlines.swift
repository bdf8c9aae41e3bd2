/// Under `every-reporter`, the deadline of each reporter that has reported and is still
/// connected, and which of them is earliest: the soft deadline in force (DESIGN §3a).
///
/// The earliest is kept as it changes, so reading it costs nothing. A report moves one
/// reporter's deadline later; only when that reporter held the earliest, and others are
/// there, are the others looked at again (they are a task's ranks: few). The single
/// reporter of most tasks never costs a look at anything else.
struct ReporterDeadlines: Sendable, Equatable {
    private var deadlines: [ReporterID: MonotonicInstant] = [:]
    /// Whose deadline is earliest, and when; nil before any reporter has reported.
    private(set) var earliest: Entry?

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
        deadlines.map { Entry(reporter: $0.key, deadline: $0.value) }.sorted(by: Entry.isBefore)
    }

    /// `reporter` reported: its deadline becomes `max(its own, candidate)`; a reporter's
    /// first report starts from `start` (the task's deadline then).
    mutating func reported(_ reporter: ReporterID, candidate: MonotonicInstant, start: MonotonicInstant) {
        let previous = deadlines[reporter]
        let moved = max(previous ?? start, candidate)
        guard moved != previous else { return }
        deadlines[reporter] = moved
        if deadlines.count == 1 {
            earliest = Entry(reporter: reporter, deadline: moved)
        } else if earliest?.reporter == reporter {
            findEarliest()
        } else if let first = earliest, Entry.isBefore(first, Entry(reporter: reporter, deadline: moved)) {
            return
        } else {
            earliest = Entry(reporter: reporter, deadline: moved)
        }
    }

    /// An extend: every deadline is at least `target` now.
    mutating func raise(to target: MonotonicInstant) {
        guard let first = earliest, first.deadline < target else { return }
        for (reporter, deadline) in deadlines where deadline < target { deadlines[reporter] = target }
        findEarliest()
    }

    /// The reporter disconnected: a finished rank is no hang.
    mutating func remove(_ reporter: ReporterID) {
        guard deadlines.removeValue(forKey: reporter) != nil, earliest?.reporter == reporter else { return }
        findEarliest()
    }

    /// A revoke: no reporter's report moves the deadline any more.
    mutating func removeAll() {
        deadlines = [:]
        earliest = nil
    }

    private mutating func findEarliest() {
        earliest = deadlines.lazy.map { Entry(reporter: $0.key, deadline: $0.value) }.min(by: Entry.isBefore)
    }
}
