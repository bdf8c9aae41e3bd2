/// A binary min-heap on an array: O(log n) a push or a pop, the least element at hand.
/// The queue keeps its ready tasks (by file order) and its timers (retry backoffs, last
/// start times) in these, so that no event has to look at every task.
struct MinHeap<Element: Comparable & Sendable>: Sendable {
    private var items: [Element] = []

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    /// The least element, if any.
    var min: Element? { items.first }

    mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func popMin() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let least = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < items.count else { break }
            var smaller = left
            if left + 1 < items.count, items[left + 1] < items[left] { smaller = left + 1 }
            guard items[smaller] < items[parent] else { break }
            items.swapAt(smaller, parent)
            parent = smaller
        }
        return least
    }

    mutating func removeAll() {
        items.removeAll()
    }
}
