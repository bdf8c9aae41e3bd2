import OvertimeProtocol
import Testing
@testable import Overtime

/// `matrix`, `array`, `max-running` and `same-index` in a job file's text: the model they
/// make, and every way they are refused.
@Suite struct JobFileSweepTests {
    static let origin = "/srv/jobs/sweep.json"

    /// The problems `json` is refused with (none, and a recorded issue, if accepted).
    static func problems(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        do {
            _ = try JobFile.parse(Array(json.utf8), origin: origin)
            Issue.record("the job file was accepted:\n\(json)", sourceLocation: sourceLocation)
            return []
        } catch {
            return error.problems
        }
    }

    @Test func sweepsArraysAndTheirFieldsDecodeToTheModel() throws {
        let json = #"""
        {"tasks": [
          {"name": "train", "command": ["train", "--lr", "{lr}", "--seed", "{seed}"],
           "matrix": {"lr": [1e-2, "1e-3"], "seed": [1, 2], "exclude": [{"lr": 0.01, "seed": 2}], "include": [{"lr": "1e-3", "opt": "adam"}]},
           "max-running": 2, "budget": "{seed}m"},
          {"name": "shard", "command": ["cut", "{index}"], "array": "0-999:4%50"},
          {"name": "merge", "command": ["merge", "{index}"], "array": [0, 4, 8],
           "after": [{"task": "shard", "same-index": true}]},
          {"name": "summary", "command": ["sum"], "after": [{"task": "train", "when": "done"}]}
        ]}
        """#
        let job = try JobFile.parse(Array(json.utf8), origin: Self.origin)
        let train = try #require(job.tasks[0].sweep)
        #expect(train.maxRunning == 2)
        #expect(train.durationTemplates == ["budget": "{seed}m"])
        #expect(train.count == 3)
        #expect((0..<3).map { train.name(at: $0, of: "train") } == [
            "train[lr=0.01,seed=1]", "train[lr=1e-3,seed=1,opt=adam]", "train[lr=1e-3,seed=2,opt=adam]",
        ], "1e-2 as JSON writes it, \"1e-3\" as written")
        let shard = try #require(job.tasks[1].sweep)
        #expect(shard.count == 250 && shard.maxRunning == 50 && shard.index(at: 249) == 996)
        let merge = try #require(job.tasks[2].sweep)
        #expect(merge.count == 3 && merge.index(at: 2) == 8 && merge.maxRunning == nil)
        #expect(job.tasks[2].after == [Dependency(task: "shard", sameIndex: true)])
        #expect(job.tasks[3].sweep == nil)
        #expect(job.tasks[3].after == [Dependency(task: "train", condition: .done)])
        let elements = JobElements(job)
        #expect(elements.count == 3 + 250 + 3 + 1)
        #expect(elements.task(1).command == ["train", "--lr", "1e-3", "--seed", "1"])
        #expect(elements.task(2).policy.budget == .seconds(120))
    }

    /// One problem of each kind, each in a file of its own, with its message.
    @Test(arguments: [
        (#"{"name": "t", "command": ["x"], "matrix": {"a": [1]}, "array": "0-3"}"#,
         "task 't': field 'array': a task is a 'matrix' or an 'array', not both; for every index of every combination, add the index as a matrix key"),
        (#"{"name": "t", "command": ["x"], "max-running": 2}"#,
         "task 't': field 'max-running': caps the running elements of a 'matrix' or an 'array', and the task has neither"),
        (#"{"name": "t", "command": ["x"], "array": "0-3%2", "max-running": 2}"#,
         "task 't': field 'max-running': the array's '%2' caps it already; give the cap once"),
        (#"{"name": "t", "command": ["x", "{lrr}"], "matrix": {"lr": [1]}}"#,
         "task 't': field 'command[1]': {lrr} is not a key of the matrix (did you mean {lr}?); the keys are {lr} and {index}"),
        (#"{"name": "t", "command": ["x"], "budget": "{b}", "matrix": {"b": ["5s", "soon"]}}"#,
         "task 't': field 'budget': for element t[b=soon], \"soon\": 'soon' is not a duration; expected a duration such as 30s, 1.5s, 250ms, 5m or 1h30m"),
        (#"{"name": "t", "command": ["x"], "matrix": {"index": [1]}}"#,
         "task 't': field 'matrix.index': 'index' is the element's index ({index}); name the key otherwise"),
        (#"{"name": "t", "command": ["x"], "matrix": {"a": [1], "exclude": [{"a": 1}]}}"#,
         "task 't': field 'matrix': makes no elements: 'exclude' takes away every combination"),
        (#"{"name": "t", "command": ["x"], "array": "1-5,3"}"#,
         "task 't': field 'array': \"1-5,3\" lists an index twice; each index is one element"),
        (#"{"name": "t", "command": ["x"], "array": [1, 2, 1]}"#,
         "task 't': field 'array': lists an index twice; each index is one element"),
        (#"{"name": "t", "command": ["x"], "array": "9-3"}"#,
         "task 't': field 'array': \"9-3\" runs backwards; write the smaller index first"),
    ])
    func eachProblemHasItsMessage(task: String, message: String) {
        #expect(Self.problems(#"{"tasks": ["# + task + "]}") == [message])
    }

    @Test func aMatrixTooLargeIsRefused() {
        let tens = (0..<10).map(String.init).joined(separator: ",")
        let keys = ["a", "b", "c", "d", "e", "f"].map { "\"\($0)\": [\(tens)]" }.joined(separator: ", ")
        let json = #"{"tasks": [{"name": "t", "command": ["x"], "matrix": {"# + keys + #", "g": [1, 2]}}]}"#
        #expect(Self.problems(json) == ["task 't': field 'matrix': makes more than 1,000,000 elements; for more, use an 'array' and compute the values from {index}"])
    }

    @Test func aTemplatedNameIsRefused() {
        let found = Self.problems(#"{"tasks": [{"name": "t{lr}", "command": ["x"], "matrix": {"lr": [1]}}]}"#)
        #expect(found == ["task 't{lr}': field 'name': \"t{lr}\" is not a template: one name stands for a whole sweep (in 'after' and 'ctl'), and each element is named by its values, as train[lr=0.01,seed=1]; put the placeholders in 'command', 'env' or 'cwd'"], "one problem, not a second about the brace")
    }

    @Test func sameIndexNeedsTwoSweepsWithTheSameIndices() {
        #expect(Self.problems(#"{"tasks": [{"name": "a", "command": ["x"]}, {"name": "t", "command": ["x"], "after": [{"task": "a", "same-index": true}]}]}"#)
            == ["task 't': field 'after[0].same-index': joins the elements of two sweeps or arrays, and this task is neither; drop it to wait for the whole of 'a'"])
        #expect(Self.problems(#"{"tasks": [{"name": "a", "command": ["x"]}, {"name": "t", "command": ["x"], "array": "0-1", "after": [{"task": "a", "same-index": true}]}]}"#)
            == ["task 't': field 'after[0].same-index': 'a' is neither a sweep nor an array, so it has no elements to join; drop same-index to wait for it"])
        #expect(Self.problems(#"{"tasks": [{"name": "a", "command": ["x"], "array": "0-3"}, {"name": "t", "command": ["x"], "array": "0-4", "after": [{"task": "a", "same-index": true}]}]}"#)
            == ["task 't': field 'after[0].same-index': 'a' has no element of index 4 (it has 4 elements), so t[4] would wait for nothing; give both the same indices"])
        #expect(Self.problems(#"{"tasks": [{"name": "a", "command": ["x"], "array": "0-3"}, {"name": "t", "command": ["x"], "after": ["a[2]"]}]}"#)
            == ["task 't': field 'after[0]': 'a[2]' names one element; wait for the whole sweep by its name, or for the element with the same index with \"same-index\": true"])
    }

    @Test func everyProblemOfAFileIsReportedAtOnce() {
        let json = #"""
        {"tasks": [
          {"name": "a", "command": ["x"], "matrix": {"k": [1]}, "array": "0-3"},
          {"name": "b", "command": ["x"], "max-running": 2},
          {"name": "c", "command": ["x", "{lrr}"], "matrix": {"lr": [1], "index": [2]}},
          {"name": "d", "command": ["x"], "array": "0-3%2", "max-running": 2},
          {"name": "e", "command": ["x"], "budget": "{b}", "matrix": {"b": ["5s", "soon"]}},
          {"name": "f", "command": ["x"], "after": [{"task": "b", "same-index": true}, "d[1]"]}
        ]}
        """#
        let found = Self.problems(json)
        #expect(found.count == 7, "\(found)")
        for (task, field) in [("a", "array"), ("b", "max-running"), ("c", "matrix.index"), ("d", "max-running"), ("e", "budget"),
                              ("f", "after[0].same-index"), ("f", "after[1]")] {
            #expect(found.contains { $0.hasPrefix("task '\(task)': field '\(field)'") }, "\(task) \(field): \(found)")
        }
    }

    @Test func sweepFieldsAreNotDefaults() {
        #expect(Self.problems(#"{"defaults": {"array": "0-3"}, "tasks": [{"name": "t", "command": ["x"]}]}"#)
            == ["defaults: field 'array' is not allowed in 'defaults': each task gives its own 'array'"])
    }
}
