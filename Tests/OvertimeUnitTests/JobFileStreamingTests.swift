import OvertimeProtocol
import Testing
@testable import Overtime
@testable import OvertimeCore
@testable import OvertimeLoop

/// The problems `json` is refused with.
private func problems(_ json: String) -> [String] {
    do {
        _ = try JobFile.parse(Array(json.utf8), origin: "jobs.json")
        return []
    } catch {
        return error.problems
    }
}

/// `count` tasks, one a line, the one at `broken` (if any) replaced by `brokenText`.
private func manyTasks(_ count: Int, broken: Int? = nil, brokenText: String = "", after: String = "") -> String {
    let lines = (0..<count).map { i in
        i == broken ? brokenText : #"    {"name": "t\#(i)", "command": ["true"]}"#
    }
    return "{\n  \"tasks\": [\n" + lines.joined(separator: ",\n") + "\n  ]\(after)\n}\n"
}

/// The tasks of a job file are read one at a time from its text (`JSONOutline`), never as
/// one tree: what is found, and where, must be what the whole tree gave.
@Suite struct JobFileStreamingTests {
    @Test func aSyntaxErrorDeepInTheTasksIsPlacedByLineAndColumn() {
        // Task #500 is on line 502 (after "{" and "tasks": [); its missing comma at column 18.
        let json = manyTasks(1000, broken: 499, brokenText: #"    {"name": "x" "command": ["true"]}"#)
        #expect(problems(json) == [
            #"not JSON: expected ',' or '}' at line 502, column 18; is a comma missing before it? (the line reads: {"name": "x" "command": ["true"]},)"#,
        ])
    }

    @Test func aSyntaxErrorAfterTheTasksHidesEveryProblemOfTheTasks() {
        // The tasks have problems of their own (a misspelt field), but a file that is not
        // JSON is answered with its syntax error alone, wherever in the file it is.
        var json = manyTasks(3, broken: 1, brokenText: #"    {"name": "t1", "comand": ["true"]}"#, after: ",\n  \"concurrency\": 4,")
        #expect(problems(json) == [#"not JSON: expected a string at line 8, column 1; a trailing comma at line 7, column 19: JSON allows none before '}' (the line reads: })"#])
        json = manyTasks(3) + "{}"
        #expect(problems(json) == ["not JSON: text after the document at line 8, column 1; is a comma missing before it? (the line reads: {})"])
    }

    @Test func errorsMatchTheWholeTreeReaderByteForByte() {
        let documents = [
            #"{"tasks": [{"name": "a", "command": ["x"]}, ]}"#,
            #"{"tasks": [{"name": "a" "command": ["x"]}]}"#,
            #"{"tasks": [{"name": "a", "command": ["x\u12"]}]}"#,
            #"{"tasks": [1, 2, 3e999]}"#,
            #"{"tasks": [{"name": "a"}], "defaults": {"budget": 30s}}"#,
            #"{"tasks": ["#,
            #"{"tasks": [], "tasks": [tru]}"#,
            "{\"tasks\": [\"\u{1}\"]}",
            "{\"tasks\": [" + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "]}",
            #"{"tasks": [{}]} x"#,
            #"["tasks"]]"#,
        ]
        for document in documents {
            let bytes = Array(document.utf8)
            let whole = Result { () throws(JSONDocumentError) in try JSONValue.parse(bytes) }
            let outlined = Result { () throws(JSONDocumentError) in try JSONOutline.parse(bytes[...], leavingOut: "tasks") }
            guard case let .failure(expected) = whole, case let .failure(found) = outlined else {
                Issue.record("\(document): both readers must refuse it (tree: \(whole), outline: \(outlined))")
                continue
            }
            #expect(found.problem == expected.problem, "\(document)")
            #expect(found.offset == expected.offset, "\(document)")
        }
    }

    @Test func theOutlineHandsOutWhatTheTreeHolds() throws {
        let text = #"{"a": 1, "tasks": [{"name": "x"}, [1, 2], "s", null], "b": {"tasks": [3]}, "tasks": 7}"#
        let bytes = Array(text.utf8)[...]
        let outline = try JSONOutline.parse(bytes, leavingOut: "tasks")
        guard case let .object(members) = outline.root, case let .object(tree) = try JSONValue.parse(Array(bytes)) else {
            Issue.record("not an object")
            return
        }
        #expect(members.map(\.key) == ["a", "tasks", "b", "tasks"])
        // Only the top-level array is left out; a nested "tasks" and a non-array one stay.
        #expect(outline.elementCount(ofMember: 1) == 4)
        #expect(outline.elementCount(ofMember: 2) == nil && outline.elementCount(ofMember: 3) == nil)
        #expect(members[1].value == .array([]))
        #expect(members[2].value == tree[2].value && members[3].value == tree[3].value)
        var elements: [JSONValue] = []
        outline.forEachElement(ofMember: 1, in: bytes) { elements.append($0) }
        #expect(JSONValue.array(elements) == tree[1].value)
    }

    @Test func defaultsAfterTheTasksStillApplyAndTheLastTasksListWins() throws {
        let json = #"{"tasks": [{"name": "old", "command": ["true"]}], "tasks": [{"name": "a", "command": ["true"]}, {"name": "b", "command": ["true"], "budget": "1m"}], "defaults": {"budget": "5m"}}"#
        #expect(problems(json) == ["field 'tasks' is given more than once; keep one"])
        let file = try JobFile.parse(Array(manyTasks(2, after: #", "defaults": {"budget": "5m", "env": {"A": "1"}}"#).utf8), origin: "jobs.json")
        #expect(file.tasks.map(\.policy.budget) == [.seconds(300), .seconds(300)])
        #expect(file.tasks.map(\.environment) == [["A": "1"], ["A": "1"]])
    }

    @Test func aByteOrderMarkIsNotCountedInPlaces() {
        let json = "\u{FEFF}" + #"{"tasks": [{"name": "t", "command": ["true"],}]}"#
        #expect(problems(json).first?.hasPrefix("not JSON: expected a string at line 1, column 46") == true)
    }

    @Test func tasksWithEqualSettingsShareThemAndChangeAlone() throws {
        var file = try JobFile.parse(Array(manyTasks(3).utf8), origin: "jobs.json")
        #expect(file.tasks[0].shared === file.tasks[2].shared)
        file.tasks[1].policy.budget = .seconds(5)
        file.tasks[1].environment["X"] = "1"
        #expect(file.tasks[1].policy.budget == .seconds(5) && file.tasks[1].environment == ["X": "1"])
        #expect(file.tasks[0].policy.budget == BudgetPolicy.default.budget && file.tasks[2].environment.isEmpty)
        #expect(file.tasks[0] != file.tasks[1])
        var renamed = file.tasks[0]
        renamed.name = file.tasks[2].name
        renamed.command = file.tasks[2].command
        #expect(renamed == file.tasks[2])
    }

    @Test func suggestionsForUnknownNamesStopWhenTheirBudgetIsSpent() {
        // 30 tasks: each suggestion looks through 30 names, so a budget of 300 makes 10.
        let count = 30
        let tasks = (0..<count).map { JobTask(name: "task\($0)", command: ["true"], after: [Dependency(task: "tsak\($0)")]) }
        var checker = JobFileChecker()
        checker.suggestionBudget = 300
        checker.check(JobFile(tasks: tasks))
        let found = checker.problems
        #expect(found.count == count)
        #expect(found.filter { $0.contains("did you mean") }.count == 10)
        #expect(found[0] == "task 'task0': field 'after[0]': there is no task named 'tsak0'; did you mean 'task0'?")
        #expect(found[count - 1] == "task 'task\(count - 1)': field 'after[0]': there is no task named 'tsak\(count - 1)'")
        // The default budget suggests for every unknown name of a file of 1,000 tasks.
        #expect(JobFileChecker().suggestionBudget >= 1000 * 1000)
    }

    @Test func aCycleThroughEveryTaskIsNamedWhole() {
        let count = 20_000
        let tasks = (0..<count).map { JobTask(name: "t\($0)", command: ["true"], after: [Dependency(task: "t\(($0 + count - 1) % count)")]) }
        var checker = JobFileChecker()
        checker.check(JobFile(tasks: tasks))
        #expect(checker.problems.count == 1)
        #expect(checker.problems.first?.hasPrefix("task 't0': field 'after': dependency cycle t0 → t19999 → t19998 → ") == true)
        #expect(checker.problems.first?.contains("→ t1 → t0 (each waits for the next)") == true)
    }
}

/// The job file's size against the machine's memory (`JobFile.sizeProblem`).
@Suite struct JobFileSizeTests {
    static let mib = 1 << 20

    @Test func aFileIsReadWhenItsModelFitsInTheMemoryAvailable() {
        let factor = JobFile.memoryPerFileByte
        let available = UInt64(800 * Self.mib)
        #expect(JobFile.largestReadableFile(availableMemory: available) == 800 * Self.mib / factor)
        #expect(JobFile.sizeProblem(800 * Self.mib / factor, availableMemory: available) == nil)
        #expect(JobFile.sizeProblem(800 * Self.mib / factor + 1, availableMemory: available) != nil)
        // Unknown memory: only the absolute bound.
        #expect(JobFile.largestReadableFile(availableMemory: nil) == JobFile.maximumFileSize)
        #expect(JobFile.sizeProblem(JobFile.maximumFileSize, availableMemory: nil) == nil)
        // Plenty of memory does not lift the absolute bound.
        #expect(JobFile.largestReadableFile(availableMemory: 1 << 50) == JobFile.maximumFileSize)
    }

    @Test func theRefusalSaysWhatItWouldTakeAndWhatThereIs() {
        let problem = JobFile.sizeProblem(200 * Self.mib, availableMemory: UInt64(1 << 30))
        let needed = ByteSize.text(UInt64(200 * Self.mib * JobFile.memoryPerFileByte))
        #expect(problem == "the job file is 200 MiB; reading it takes up to \(JobFile.memoryPerFileByte) bytes of memory for each of its bytes (\(needed)), more than the 1 GiB available here (MemAvailable, or what the memory cgroup still allows); split the job into smaller files, or free memory")
        #expect(JobFile.sizeProblem(200 * Self.mib, whole: false, availableMemory: UInt64(1 << 30))?.hasPrefix("the job file is over 200 MiB;") == true)
        #expect(JobFile.sizeProblem(JobFile.maximumFileSize + 1, availableMemory: 1 << 50) == "the job file is larger than 1024 MiB; is this the right file?")
    }

    @Test func memAvailableIsReadFromMeminfo() {
        let meminfo = "MemTotal:       32768000 kB\nMemFree:         1000000 kB\nMemAvailable:   23289360 kB\nBuffers: 1 kB\n"
        #expect(MemoryHeadroom.available(meminfo: Array(meminfo.utf8)) == 23_289_360 * 1024)
        #expect(MemoryHeadroom.available(meminfo: Array("MemTotal: 1 kB\n".utf8)) == nil)
        #expect(MemoryHeadroom.current().map { $0 > 0 } ?? true)
    }
}
