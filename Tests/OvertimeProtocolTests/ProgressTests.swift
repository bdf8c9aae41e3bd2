import OvertimeProtocol
import Testing

@Suite("Progress")
struct ProgressTests {
    // MARK: fractionCompleted

    @Test("fractionCompleted", arguments: [
        (Progress(), nil as Double?),
        (Progress(fraction: 0.4), 0.4),
        (Progress(completed: 1, total: 4), 0.25),
        (Progress(completed: 0, total: 4), 0),
        (Progress(completed: 4, total: 4), 1),
        // More done than the total is capped at 1.
        (Progress(completed: 9, total: 4), 1),
        // A zero total gives no share (no division by zero).
        (Progress(completed: 0, total: 0), nil),
        (Progress(completed: 3, total: 0), nil),
        // Half the pair is not enough.
        (Progress(completed: 3), nil),
        (Progress(total: 3), nil),
        // An explicit fraction wins over counts.
        (Progress(completed: 1, total: 4, fraction: 0.9), 0.9),
        (Progress(completed: 1, fraction: 0), 0),
        (Progress(title: "t", detail: "d"), nil),
    ])
    func fractionCompleted(progress: Progress, expected: Double?) {
        #expect(progress.fractionCompleted == expected)
    }

    // MARK: merge

    @Test("a task sends total and title once, then only completed")
    func mergeKeepsTotalAndTitle() {
        var p = Progress(completed: 0, total: 10, title: "Indexing", detail: "starting")
        p.merge(Progress(completed: 4))
        #expect(p == Progress(completed: 4, total: 10, title: "Indexing", detail: "starting"))
        #expect(p.fractionCompleted == 0.4)
    }

    @Test("merging new counts replaces only the counts given")
    func mergeCounts() {
        var p = Progress(completed: 2, total: 10)
        p.merge(Progress(total: 20))
        #expect(p == Progress(completed: 2, total: 20))
        p.merge(Progress(completed: 5, total: 25))
        #expect(p == Progress(completed: 5, total: 25))
    }

    @Test("new counts without a fraction clear an old fraction, so the counts are what shows")
    func countsClearFraction() {
        var p = Progress(fraction: 0.9)
        p.merge(Progress(completed: 1, total: 10))
        #expect(p == Progress(completed: 1, total: 10))
        #expect(p.fractionCompleted == 0.1)
    }

    @Test("new counts with a fraction take that fraction")
    func countsWithFraction() {
        var p = Progress(fraction: 0.9)
        p.merge(Progress(completed: 1, total: 10, fraction: 0.3))
        #expect(p == Progress(completed: 1, total: 10, fraction: 0.3))
        #expect(p.fractionCompleted == 0.3)
    }

    @Test("a fraction alone replaces the fraction and keeps the counts, but wins over them")
    func fractionAlone() {
        var p = Progress(completed: 1, total: 10, title: "t")
        p.merge(Progress(fraction: 0.75))
        #expect(p == Progress(completed: 1, total: 10, fraction: 0.75, title: "t"))
        #expect(p.fractionCompleted == 0.75)
        // Counts again: the fraction goes, the counts show.
        p.merge(Progress(completed: 2))
        #expect(p == Progress(completed: 2, total: 10, title: "t"))
        #expect(p.fractionCompleted == 0.2)
    }

    @Test("title and detail: a new one replaces, an absent one keeps")
    func titleDetail() {
        var p = Progress(title: "old title", detail: "old detail")
        p.merge(Progress(detail: "new detail"))
        #expect(p == Progress(title: "old title", detail: "new detail"))
        p.merge(Progress(title: "new title"))
        #expect(p == Progress(title: "new title", detail: "new detail"))
        // An empty string is a value, not an absence.
        p.merge(Progress(title: ""))
        #expect(p.title == "")
    }

    @Test("an empty progress (like a heartbeat) changes nothing")
    func mergeEmpty() {
        let original = Progress(completed: 3, total: 9, fraction: 0.5, title: "t", detail: "d")
        var p = original
        p.merge(Progress())
        #expect(p == original)
    }

    @Test("merging into an empty progress gives the newer one")
    func mergeIntoEmpty() {
        let newer = Progress(completed: 3, total: 9, fraction: 0.5, title: "t", detail: "d")
        var p = Progress()
        p.merge(newer)
        #expect(p == newer)
    }
}
