import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// Sweeps and arrays as values: the array syntax, the matrix's combinations, element names,
/// placeholders, the numbering of a job's elements, and the log file names.
@Suite struct SweepTests {
    /// Every index `text` makes, in order.
    static func indices(_ text: String) throws -> [Int] {
        let (indices, _) = try ArrayIndices.parse(text)
        return (0..<indices.count).map(indices.index(at:))
    }

    static func parseError(_ text: String) -> ArrayIndices.ParseError? {
        do {
            _ = try ArrayIndices.parse(text)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Arrays

    @Test func slurmsArraySyntax() throws {
        let (range, noCap) = try ArrayIndices.parse("0-999")
        #expect(range.count == 1000 && noCap == nil)
        #expect(range.index(at: 0) == 0 && range.index(at: 999) == 999)
        let (stepped, _) = try ArrayIndices.parse("0-999:4")
        #expect(stepped.count == 250)
        #expect(stepped.index(at: 1) == 4 && stepped.index(at: 249) == 996, "the last is 996, not 999: the step decides")
        #expect(try Self.indices("1,3,5-7") == [1, 3, 5, 6, 7])
        #expect(try Self.indices("9, 2-3") == [9, 2, 3], "in the order written")
        let (capped, cap) = try ArrayIndices.parse("0-9%3")
        #expect(capped.count == 10 && cap == 3)
        #expect(try Self.indices("42") == [42])
    }

    @Test func badArraysAreRefusedWithTheirReason() {
        #expect(Self.parseError("") == .empty)
        #expect(Self.parseError("%4") == .empty, "a cap of nothing")
        #expect(Self.parseError("7-3") == .backwards("7-3"))
        #expect(Self.parseError("0-9:0") == .zeroStep("0-9:0"))
        #expect(Self.parseError("0-9%0") == .badCap("0"))
        #expect(Self.parseError("0-9%x") == .badCap("x"))
        #expect(Self.parseError("0-10000000") == .tooMany(10_000_001))
        #expect(Self.parseError("0-5000000,6000000-10999999") == .tooMany(10_000_001), "the total counts, not each range")
        #expect(Self.parseError("a-b") == .notARange("a-b"))
        #expect(Self.parseError("-3") == .notARange("-3"), "no negative index")
        #expect(Self.parseError("1,,2") == .notARange(""))
        #expect(Self.parseError("5:2") == .notARange("5:2"), "a step needs a range")
        #expect(Self.parseError("0-10000000:2") == nil, "5,000,001 elements fit")
    }

    @Test func aRepeatedIndexIsFoundInAStringAndInAList() throws {
        #expect(try ArrayIndices.parse("1-5,3").indices.repeatsAnIndex)
        #expect(try ArrayIndices.parse("0-10:2,4").indices.repeatsAnIndex)
        #expect(try ArrayIndices.parse("7,7").indices.repeatsAnIndex)
        #expect(try !ArrayIndices.parse("0-10:2,5").indices.repeatsAnIndex, "5 is not among the even ones")
        #expect(try !ArrayIndices.parse("1,3,5-7").indices.repeatsAnIndex)
        #expect(try !ArrayIndices.parse("0-999").indices.repeatsAnIndex)
        var list = ArrayIndices()
        for n in [5, 6, 7, 1, 6] { list.append(start: n, step: 1, count: 1) }
        #expect(list.repeatsAnIndex)
        var distinct = ArrayIndices()
        for n in [5, 6, 7, 1, 8] { distinct.append(start: n, step: 1, count: 1) }
        #expect(!distinct.repeatsAnIndex)
        #expect((0..<distinct.count).map(distinct.index(at:)) == [5, 6, 7, 1, 8])
    }

    @Test(arguments: ["0-999", "0-999:4", "1,3,5-7", "10-20:5,0-4,100", "3,2,1,0", "0-0,2-2:7,4-9:2"])
    func indexAndPositionRoundTrip(text: String) throws {
        let (indices, _) = try ArrayIndices.parse(text)
        for position in 0..<indices.count {
            #expect(indices.position(of: indices.index(at: position)) == position, "\(text) at \(position)")
        }
        let all = Set((0..<indices.count).map(indices.index(at:)))
        for absent in 0...1001 where !all.contains(absent) {
            #expect(indices.position(of: absent) == nil, "\(text) has no \(absent)")
        }
    }

    @Test func aListOfConsecutiveIndicesRoundTrips() {
        var list = ArrayIndices()
        let written = [0, 1, 2, 3, 10, 11, 4, 30]
        for n in written { list.append(start: n, step: 1, count: 1) }
        #expect((0..<list.count).map(list.index(at:)) == written)
        for (position, index) in written.enumerated() { #expect(list.position(of: index) == position) }
        #expect(list.position(of: 5) == nil && list.position(of: 12) == nil)
    }

    // MARK: Matrices

    static let lrSeed: [(key: String, values: [String])] = [("lr", ["0.01", "0.001"]), ("seed", ["1", "2"])]

    /// Every element as "key=value" texts, keys without a value left out.
    static func rows(_ matrix: MatrixElements) -> [String] {
        let sweep = Sweep(elements: .matrix(matrix))
        return (0..<matrix.count).map { sweep.label(at: $0) }
    }

    @Test func theProductVariesTheLastKeyFastest() throws {
        let matrix = try #require(MatrixElements.combine(Self.lrSeed, include: [], exclude: []))
        #expect(matrix.keys == ["lr", "seed"])
        #expect(Self.rows(matrix) == ["lr=0.01,seed=1", "lr=0.01,seed=2", "lr=0.001,seed=1", "lr=0.001,seed=2"],
                "the order written, not the values' sorted order")
    }

    @Test func excludeDropsTheCombinationsMatchingAllItsKeys() throws {
        let one = try #require(MatrixElements.combine(Self.lrSeed, include: [], exclude: [[("lr", "0.01"), ("seed", "2")]]))
        #expect(Self.rows(one) == ["lr=0.01,seed=1", "lr=0.001,seed=1", "lr=0.001,seed=2"])
        let byOneKey = try #require(MatrixElements.combine(Self.lrSeed, include: [], exclude: [[("seed", "1")]]))
        #expect(Self.rows(byOneKey) == ["lr=0.01,seed=2", "lr=0.001,seed=2"])
    }

    @Test func includeAddsAKeyToTheCombinationsItMatches() throws {
        let matrix = try #require(MatrixElements.combine(Self.lrSeed, include: [[("lr", "0.01"), ("opt", "adam")]], exclude: []))
        #expect(matrix.keys == ["lr", "seed", "opt"])
        #expect(Self.rows(matrix) == ["lr=0.01,seed=1,opt=adam", "lr=0.01,seed=2,opt=adam", "lr=0.001,seed=1", "lr=0.001,seed=2"])
    }

    @Test func includeMatchingNoCombinationIsOneOfItsOwn() throws {
        let matrix = try #require(MatrixElements.combine(Self.lrSeed, include: [[("lr", "0.0001"), ("seed", "1")]], exclude: []))
        #expect(matrix.count == 5)
        #expect(Self.rows(matrix).last == "lr=0.0001,seed=1", "after the product")
        // A value the matrix does not list, with a key of its own: a new combination, the
        // other matrix key left without a value.
        let other = try #require(MatrixElements.combine(Self.lrSeed, include: [[("lr", "0.5"), ("opt", "sgd")]], exclude: []))
        #expect(Self.rows(other) == ["lr=0.01,seed=1", "lr=0.01,seed=2", "lr=0.001,seed=1", "lr=0.001,seed=2", "lr=0.5,opt=sgd"])
        #expect(other.value(1, at: 4) == nil)
    }

    @Test func excludeComesBeforeInclude() throws {
        // The excluded combination comes back through include, at the end.
        let matrix = try #require(MatrixElements.combine(Self.lrSeed, include: [[("lr", "0.01"), ("seed", "2")]],
                                                         exclude: [[("lr", "0.01"), ("seed", "2")]]))
        #expect(Self.rows(matrix) == ["lr=0.01,seed=1", "lr=0.001,seed=1", "lr=0.001,seed=2", "lr=0.01,seed=2"])
    }

    @Test func aMatrixTooLargeIsNil() {
        let big: [(key: String, values: [String])] = ["a", "b", "c"].map { ($0, (0..<101).map(String.init)) }
        #expect(MatrixElements.combine(big, include: [], exclude: []) == nil, "101^3 > 1,000,000")
    }

    // MARK: Names and placeholders

    @Test func elementsAreNamedByTheirValuesOrIndex() throws {
        let matrix = try #require(MatrixElements.combine(Self.lrSeed, include: [], exclude: []))
        let sweep = Sweep(elements: .matrix(matrix))
        #expect(sweep.name(at: 0, of: "train") == "train[lr=0.01,seed=1]")
        #expect(sweep.position(ofLabel: "lr=0.001,seed=2") == 3)
        #expect(sweep.position(ofLabel: "seed=2,lr=0.001") == nil, "one spelling: the matrix's key order")
        let shard = Sweep(elements: .array(try ArrayIndices.parse("5-9").indices))
        #expect(shard.name(at: 2, of: "shard") == "shard[7]")
        #expect(shard.position(ofLabel: "7") == 2)
        #expect(shard.position(ofLabel: "07") == nil && shard.position(ofLabel: "+7") == nil && shard.position(ofLabel: "4") == nil)
    }

    @Test func placeholdersAreReplacedAndOtherBracesKept() throws {
        let matrix = try #require(MatrixElements.combine(Self.lrSeed, include: [], exclude: []))
        let sweep = Sweep(elements: .matrix(matrix))
        #expect(sweep.substitute("--lr={lr}", at: 1) == "--lr=0.01")
        #expect(sweep.substitute("{index}", at: 3) == "3", "a matrix's index is the position")
        #expect(sweep.substitute("{lr}{seed}", at: 1) == "0.012", "adjacent placeholders")
        #expect(sweep.substitute("{lrr} {print $1} ${HOME} {", at: 0) == "{lrr} {print $1} ${HOME} {")
        #expect(sweep.substitute("{{seed}}", at: 2) == "{1}")
        let shard = Sweep(elements: .array(try ArrayIndices.parse("5-9").indices))
        #expect(shard.substitute("part-{index}.txt", at: 2) == "part-7.txt")
        #expect(shard.substitute("{lr}", at: 2) == "{lr}", "an array has no matrix keys")
        #expect(Sweep.placeholders(in: "{lr}-{print $1}-${HOME}-{a_b-c}") == ["lr", "HOME", "a_b-c"])
    }

    // MARK: A job's elements

    static func sweepJob() throws -> JobFile {
        let matrix = try #require(MatrixElements.combine([("lr", ["0.01", "0.001"]), ("budget", ["5s", "1m"])], include: [], exclude: []))
        let train = JobTask(name: "train", command: ["train", "--lr", "{lr}", "{index}"], environment: ["LR": "{lr}", "HOME": "/h"],
                            workingDirectory: "/runs/{lr}", sweep: Sweep(elements: .matrix(matrix), durationTemplates: ["budget": "{budget}"]))
        let shard = JobTask(name: "shard", command: ["cut", "{index}"], sweep: Sweep(elements: .array(try ArrayIndices.parse("5-7").indices)))
        return JobFile(tasks: [JobTask(name: "prep", command: ["prep"]), train, shard, JobTask(name: "summary", command: ["sum"])])
    }

    @Test func elementsAreNumberedInFileOrder() throws {
        let elements = JobElements(try Self.sweepJob())
        #expect(elements.count == 1 + 4 + 3 + 1)
        #expect((0..<elements.count).map(elements.entry(of:)) == [0, 1, 1, 1, 1, 2, 2, 2, 3])
        #expect((0..<elements.count).map(elements.position(of:)) == [0, 0, 1, 2, 3, 0, 1, 2, 0])
        #expect((0..<elements.count).map(elements.name) == [
            "prep", "train[lr=0.01,budget=5s]", "train[lr=0.01,budget=1m]", "train[lr=0.001,budget=5s]",
            "train[lr=0.001,budget=1m]", "shard[5]", "shard[6]", "shard[7]", "summary",
        ])
        #expect(elements.elements(ofEntry: 1) == 1..<5)
        #expect(elements.element(named: "prep") == 0)
        #expect(elements.element(named: "summary") == 8)
        #expect(elements.element(named: "train[lr=0.001,budget=5s]") == 3)
        #expect(elements.element(named: "shard[6]") == 6)
        #expect(elements.element(named: "shard[8]") == nil, "no such index")
        #expect(elements.element(named: "shard[x]") == nil)
        #expect(elements.element(named: "train[lr=0.5,budget=5s]") == nil)
        #expect(elements.element(named: "prep[0]") == nil, "a plain task has no elements")
        #expect(elements.element(named: "train") == nil, "a whole sweep is no one element")
        #expect(elements.entry(named: "train") == 1)
        #expect(elements.element(named: "nothing") == nil)
    }

    @Test func anElementIsATaskWithItsValuesInPlace() throws {
        let elements = JobElements(try Self.sweepJob())
        let task = elements.task(2)
        #expect(task.name == "train[lr=0.01,budget=1m]")
        #expect(task.sweep == nil)
        #expect(task.command == ["train", "--lr", "0.01", "1"])
        #expect(task.environment == ["LR": "0.01", "HOME": "/h"])
        #expect(task.workingDirectory == "/runs/0.01")
        #expect(task.policy.budget == .seconds(60))
        #expect(elements.task(1).policy.budget == .seconds(5))
        let shard = elements.task(7)
        #expect(shard.name == "shard[7]" && shard.command == ["cut", "7"])
        #expect(elements.task(0).name == "prep" && elements.task(0).command == ["prep"])
    }

    @Test func logFileNames() {
        #expect(JobElements.logFileName(for: "prep") == "prep.log")
        #expect(JobElements.logFileName(for: "train[lr=0.01,seed=1]") == "train[lr=0.01,seed=1].log")
        #expect(JobElements.logFileName(for: "load[path=/data/a]") == "load[path=%2Fdata%2Fa].log")
        #expect(JobElements.logFileName(for: "x[p=50%]") == "x[p=50%25].log", "so that '%2F' written by hand stays apart")
        #expect(JobElements.logFileName(for: "x[p=%2F]") != JobElements.logFileName(for: "x[p=/]"))
        let long = "train[path=" + String(repeating: "a", count: 300)
        let one = JobElements.logFileName(for: long + "1]")
        let two = JobElements.logFileName(for: long + "2]")
        #expect(one.utf8.count <= 255 && two.utf8.count <= 255)
        #expect(one.hasSuffix(".log") && one.hasPrefix("train[path=aaa"))
        #expect(one != two, "cut the same, told apart by the hash")
        let wide = "t[v=" + String(repeating: "é", count: 200) + "]"
        #expect(JobElements.logFileName(for: wide).utf8.count <= 255, "counted in bytes, cut between characters")
    }

    @Test func theCheckSummaryCountsWhatRuns() throws {
        #expect(JobElements(try Self.sweepJob()).summary == "ok: 4 tasks, 9 to run (train: a matrix of 4; shard: an array of 3)")
        #expect(JobElements(JobFile(tasks: [JobTask(name: "a", command: ["a"])])).summary == "ok: 1 task")
        #expect(JobElements.grouped(1_000_000) == "1,000,000" && JobElements.grouped(999) == "999")
    }
}
