import OvertimeProtocol

/// A task of a job file made once per combination of values (`matrix`) or once per index
/// (`array`): its elements, each a task of its own once it is made (`JobElements`).
///
/// A sweep holds what tells its elements apart, never the elements themselves: an array of
/// a million indices is a few ranges, and a matrix is its value texts and one small number per
/// key and element.
public struct Sweep: Sendable, Equatable {
    public enum Elements: Sendable, Equatable {
        case matrix(MatrixElements)
        case array(ArrayIndices)
    }

    public var elements: Elements
    /// At most this many elements run at once (`max-running`, or an array's `%N`); nil for
    /// no cap but the batch's concurrency.
    public var maxRunning: Int?
    /// Duration fields written with placeholders (`"budget": "{budget}"`), by key: read for
    /// each element once its placeholders are replaced.
    public var durationTemplates: [String: String]

    public init(elements: Elements, maxRunning: Int? = nil, durationTemplates: [String: String] = [:]) {
        self.elements = elements
        self.maxRunning = maxRunning
        self.durationTemplates = durationTemplates
    }

    /// How many elements it makes.
    public var count: Int {
        switch elements {
        case let .matrix(matrix): matrix.count
        case let .array(indices): indices.count
        }
    }

    /// The keys its placeholders may name: the matrix's, and `index`.
    public var keys: [String] {
        switch elements {
        case let .matrix(matrix): matrix.keys + ["index"]
        case .array: ["index"]
        }
    }

    /// Element `position`'s index: its array index, or its position in a matrix.
    public func index(at position: Int) -> Int {
        switch elements {
        case .matrix: position
        case let .array(indices): indices.index(at: position)
        }
    }

    /// The position of the element whose index is `index`, if there is one.
    public func position(ofIndex index: Int) -> Int? {
        switch elements {
        case .matrix: (0..<count).contains(index) ? index : nil
        case let .array(indices): indices.position(of: index)
        }
    }

    /// What tells element `position` apart in its name: `lr=0.01,seed=1`, or `7`.
    public func label(at position: Int) -> String {
        switch elements {
        case let .matrix(matrix):
            matrix.keys.indices.compactMap { k in matrix.value(k, at: position).map { matrix.keys[k] + "=" + $0 } }
                .joined(separator: ",")
        case let .array(indices):
            String(indices.index(at: position))
        }
    }

    /// Element `position`'s name: `train[lr=0.01,seed=1]`, `shard[7]`.
    public func name(at position: Int, of sweep: String) -> String {
        sweep + "[" + label(at: position) + "]"
    }

    /// The element whose label is `label` (what its name holds between the brackets).
    public func position(ofLabel label: Substring) -> Int? {
        switch elements {
        case .matrix:
            // A matrix is small enough to look through; its labels are made the one way.
            return (0..<count).first { self.label(at: $0) == label }
        case let .array(indices):
            guard let index = Int(label), String(index) == label else { return nil }
            return indices.position(of: index)
        }
    }

    /// Element `position`'s value for placeholder `key`, if it has one.
    public func value(of key: String, at position: Int) -> String? {
        if key == "index" { return String(index(at: position)) }
        guard case let .matrix(matrix) = elements, let k = matrix.keys.firstIndex(of: key) else { return nil }
        return matrix.value(k, at: position)
    }

    /// `text` with each `{KEY}` naming one of its keys replaced by element `position`'s
    /// value; any other brace text (`{print $1}`, `${HOME}`) is left as written.
    public func substitute(_ text: String, at position: Int) -> String {
        guard text.utf8.contains(UInt8(ascii: "{")) else { return text }
        var result = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            result += rest[..<open]
            let afterOpen = rest.index(after: open)
            if let close = rest[afterOpen...].firstIndex(of: "}"),
               let value = value(of: String(rest[afterOpen..<close]), at: position) {
                result += value
                rest = rest[rest.index(after: close)...]
            } else {
                result += "{"
                rest = rest[afterOpen...]
            }
        }
        return result + rest
    }

    /// The placeholder-like words in `text` (`{word}` of letters, digits, `_` and `-`).
    public static func placeholders(in text: String) -> [String] {
        guard text.utf8.contains(UInt8(ascii: "{")) else { return [] }
        var words: [String] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            rest = rest[rest.index(after: open)...]
            guard let close = rest.firstIndex(of: "}") else { break }
            let word = rest[..<close]
            if !word.isEmpty, word.unicodeScalars.allSatisfy(MatrixElements.isKeyCharacter) { words.append(String(word)) }
        }
        return words
    }
}

/// An array's indices: runs of evenly spaced numbers (`0-999:4` is one run, `1,3,5-7` three),
/// in the order written.
public struct ArrayIndices: Sendable, Equatable {
    struct Run: Sendable, Equatable {
        var start: Int
        var step: Int
        var count: Int
    }

    private(set) var runs: [Run] = []
    /// The position of each run's first element.
    private var firsts: [Int] = []
    public private(set) var count = 0

    /// The most elements one array may have: each element's final state is kept while the
    /// batch runs.
    public static let maximumCount = 10_000_000

    init() {}

    mutating func append(start: Int, step: Int, count: Int) {
        if let last = runs.last, count == 1, last.start + last.step * last.count == start, last.step == step || last.count == 1 {
            // `[0, 1, 2, 3]` written as a list is one run, as `0-3` is.
            runs[runs.count - 1].step = last.count == 1 ? start - last.start : last.step
            runs[runs.count - 1].count += 1
        } else {
            firsts.append(self.count)
            runs.append(Run(start: start, step: step, count: count))
        }
        self.count += count
    }

    /// The index at `position`.
    public func index(at position: Int) -> Int {
        var low = 0, high = firsts.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if firsts[mid] <= position { low = mid } else { high = mid - 1 }
        }
        let run = runs[low]
        return run.start + run.step * (position - firsts[low])
    }

    /// The position of `index`, if the array has it.
    public func position(of index: Int) -> Int? {
        for (r, run) in runs.enumerated() {
            let offset = index - run.start
            if run.count == 1 {
                if offset == 0 { return firsts[r] }
            } else if offset >= 0, offset % run.step == 0, offset / run.step < run.count {
                return firsts[r] + offset / run.step
            }
        }
        return nil
    }

    /// Whether some index is listed twice.
    var repeatsAnIndex: Bool {
        guard runs.count > 1 else { return false }
        // Only runs whose spans overlap can share an index; each pair is probed from its
        // shorter run. A list written by hand is mostly runs of one, whose spans do not.
        let ordered = runs.sorted { $0.start < $1.start }
        for (a, run) in ordered.enumerated() {
            let end = run.start + run.step * (run.count - 1)
            for other in ordered[(a + 1)...] {
                if other.start > end { break }
                let (probe, within) = run.count <= other.count ? (run, other) : (other, run)
                let span = ArrayIndices(runs: [within])
                for k in 0..<probe.count where span.position(of: probe.start + probe.step * k) != nil { return true }
            }
        }
        return false
    }

    private init(runs: [Run]) {
        for run in runs { append(start: run.start, step: run.step, count: run.count) }
    }

    /// Why `text` is not an array in Slurm's syntax (`0-999`, `0-999:4`, `1,3,5-7`, each
    /// with an optional `%N` cap at the end), if it is not.
    public enum ParseError: Error, Sendable, Equatable {
        case empty
        case notARange(String)
        case backwards(String)
        case zeroStep(String)
        case badCap(String)
        case tooMany(Int)
    }

    /// Reads Slurm's `--array` syntax: the indices, and the cap after `%`.
    public static func parse(_ text: String) throws(ParseError) -> (indices: ArrayIndices, cap: Int?) {
        var body = Substring(text.trimmingSpaces)
        var cap: Int?
        if let percent = body.firstIndex(of: "%") {
            let capText = body[body.index(after: percent)...]
            guard let n = Int(capText), n >= 1 else { throw .badCap(String(capText)) }
            cap = n
            body = body[..<percent]
        }
        guard !body.isEmpty else { throw .empty }
        var indices = ArrayIndices()
        for part in body.split(separator: ",", omittingEmptySubsequences: false) {
            let item = String(part).trimmingSpaces
            var range = Substring(item)
            var step = 1
            if let colon = range.firstIndex(of: ":") {
                guard let s = Int(range[range.index(after: colon)...]) else { throw .notARange(item) }
                guard s > 0 else { throw .zeroStep(item) }
                step = s
                range = range[..<colon]
            }
            let bounds = range.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = bounds.first.flatMap({ Int($0) }), first >= 0 else { throw .notARange(item) }
            var last = first
            if bounds.count == 2 {
                guard let l = Int(bounds[1]), l >= 0 else { throw .notARange(item) }
                last = l
            } else if step != 1 {
                throw .notARange(item)
            }
            guard first <= last else { throw .backwards(item) }
            let made = (last - first) / step + 1
            guard indices.count + made <= maximumCount else { throw .tooMany(indices.count + made) }
            indices.append(start: first, step: step, count: made)
        }
        return (indices, cap)
    }
}

extension ArrayIndices.ParseError {
    public var message: String {
        let syntax = "expected indices as Slurm's --array writes them, e.g. \"0-999\", \"0-999:4\" (every 4th), \"1,3,5-7\", with an optional cap on how many run at once, \"0-999%50\""
        switch self {
        case .empty: return "is empty; \(syntax)"
        case let .notARange(item): return "\(JobFileText.quote(item)) is not an index or a range; \(syntax)"
        case let .backwards(item): return "\(JobFileText.quote(item)) runs backwards; write the smaller index first"
        case let .zeroStep(item): return "\(JobFileText.quote(item)) has a step of 0; a step is at least 1"
        case let .badCap(text): return "\(JobFileText.quote("%" + text)) is not a cap; after '%' write how many may run at once, at least 1"
        case let .tooMany(n): return "makes \(JobElements.grouped(n)) elements; an array has at most \(JobElements.grouped(ArrayIndices.maximumCount))"
        }
    }
}

/// A matrix's combinations: each element's value text per key, as a small number into the
/// key's distinct texts (-1 where an element has no value for a key that `include` added).
public struct MatrixElements: Sendable, Equatable {
    /// The matrix's keys in the order written, then the keys `include` added.
    public private(set) var keys: [String]
    /// Per key, its distinct value texts.
    private var texts: [[String]]
    /// Per element, per key: an index into `texts`, or -1.
    private var cells: [Int32] = []
    public private(set) var count = 0

    /// The most elements a matrix may make (an array has no such list to keep).
    public static let maximumCount = 1_000_000

    static func isKeyCharacter(_ c: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c) || c == "_" || c == "-"
    }

    /// The value of key number `k` at `position`, if the element has one.
    public func value(_ k: Int, at position: Int) -> String? {
        let cell = cells[position * keys.count + k]
        return cell < 0 ? nil : texts[k][Int(cell)]
    }

    /// Every element, as one value per key.
    func combination(at position: Int) -> [String?] {
        keys.indices.map { value($0, at: position) }
    }

    /// The product of `lists` (key, value texts) in the order written (the last key varies
    /// fastest), less what `exclude` matches, plus what `include` adds, by GitHub Actions'
    /// rule: an include entry whose matrix values match combinations adds its other keys to
    /// them; one that matches none is a combination of its own.
    /// - Returns: nil when the product is larger than `maximumCount`.
    static func combine(_ lists: [(key: String, values: [String])], include: [[(key: String, value: String)]],
                        exclude: [[(key: String, value: String)]]) -> MatrixElements? {
        var product = 1
        for list in lists {
            product = product.multipliedReportingOverflow(by: list.values.count).partialValue
            if product > maximumCount || list.values.isEmpty { break }
        }
        guard product <= maximumCount else { return nil }
        var matrix = MatrixElements(keys: lists.map(\.key), texts: lists.map { Array(Set($0.values)).sorted() })
        let matrixKeys = lists.count
        var rows: [[String?]] = []
        if !lists.isEmpty, lists.allSatisfy({ !$0.values.isEmpty }) {
            var digits = [Int](repeating: 0, count: lists.count)
            for _ in 0..<product {
                let row: [String?] = digits.indices.map { lists[$0].values[digits[$0]] }
                let excluded = exclude.contains { entry in
                    entry.allSatisfy { pair in lists.firstIndex { $0.key == pair.key }.map { row[$0] == pair.value } ?? false }
                }
                if !excluded { rows.append(row) }
                var k = digits.count - 1
                while k >= 0 {
                    digits[k] += 1
                    if digits[k] < lists[k].values.count { break }
                    digits[k] = 0
                    k -= 1
                }
            }
        }
        for entry in include {
            for pair in entry where !matrix.keys.contains(pair.key) {
                matrix.keys.append(pair.key)
                matrix.texts.append([])
                for r in rows.indices { rows[r].append(nil) }
            }
            let own = entry.filter { pair in matrix.keys.prefix(matrixKeys).contains(pair.key) }
            let added = entry.filter { pair in !matrix.keys.prefix(matrixKeys).contains(pair.key) }
            var matched = false
            for r in rows.indices where own.allSatisfy({ pair in rows[r][matrix.keys.firstIndex(of: pair.key)!] == pair.value }) {
                // An entry never overwrites a matrix value; what an earlier entry added, it may.
                matched = true
                for pair in added { rows[r][matrix.keys.firstIndex(of: pair.key)!] = pair.value }
            }
            if !matched {
                var row = [String?](repeating: nil, count: matrix.keys.count)
                for pair in entry { row[matrix.keys.firstIndex(of: pair.key)!] = pair.value }
                rows.append(row)
            }
        }
        guard rows.count <= maximumCount else { return nil }
        // Include entries may bring values of their own.
        for k in matrix.keys.indices {
            matrix.texts[k] = Array(Set(rows.compactMap { $0[k] })).sorted()
        }
        let lookup = matrix.texts.map { Dictionary(uniqueKeysWithValues: $0.enumerated().map { ($1, Int32($0)) }) }
        matrix.cells.reserveCapacity(rows.count * matrix.keys.count)
        for row in rows {
            for k in row.indices { matrix.cells.append(row[k].map { lookup[k][$0]! } ?? -1) }
        }
        matrix.count = rows.count
        return matrix
    }

    private init(keys: [String], texts: [[String]]) {
        self.keys = keys
        self.texts = texts
    }
}
