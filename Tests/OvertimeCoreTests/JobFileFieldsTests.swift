import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// The job file's field-reading layer on its own, and the one checker on a job from code
/// and from a file.
@Suite struct JobFileFieldsTests {
    /// Reads `json` (an object) at `scope` and `path` with `body`; the problems reported.
    private func problems(_ json: String, scope: JobFileScope = .task(0, "t"), path: String? = nil,
                          _ body: (JobFileFields) -> Void = { _ in }) throws -> [String] {
        guard case let .object(members) = try JSONValue.parse(Array(json.utf8)) else {
            Issue.record("not an object: \(json)")
            return []
        }
        let report = JobFileReport()
        body(JobFileFields(members, scope: scope, path: path, report: report))
        return report.problems.all
    }

    @Test func aTypeMismatchNamesTheFieldsPath() throws {
        let found = try problems(#"{"max": "3", "backoff": true, "on": ["exit", 7], "ok": 2}"#, path: "retries") { fields in
            for field in fields {
                switch field.key {
                case "max": #expect(fields.wholeNumber(field, "a count") == nil)
                case "backoff": #expect(fields.duration(field, allowNone: false, positive: false) == nil)
                case "on":
                    let items = fields.array(field, expected: "an array") ?? []
                    #expect(items.map(\.path) == ["retries.on[0]", "retries.on[1]"])
                    #expect(items.compactMap { fields.string($0, expected: "an outcome") } == ["exit"])
                default: #expect(fields.wholeNumber(field, "a count") == 2)
                }
            }
        }
        #expect(found.count == 3, "\(found)")
        #expect(found.first == "task 't': field 'retries.max': expected a whole number, got \"3\"; write 3 without quotes")
        #expect(found.dropFirst().first?.hasPrefix("task 't': field 'retries.backoff': expected ") == true)
        #expect(found.dropFirst().first?.hasSuffix("got true") == true)
        #expect(found.last == "task 't': field 'retries.on[1]': expected an outcome, got 7")
    }

    @Test func aNestedObjectsFieldsArePathedUnderIt() throws {
        let found = try problems(#"{"env": {"A": 1}, "cwd": []}"#, scope: .defaults) { fields in
            for field in fields {
                if let env = fields.nested(field) {
                    for item in env { _ = env.quotedString(item) }
                } else {
                    #expect(fields.object(field, expected: "an object") == nil)
                }
            }
        }
        #expect(found == ["defaults: field 'env.A': expected a string, got 1; quote it: \"1\"",
                          "defaults: field 'cwd': expected an object, got an empty array"])
    }

    @Test func anUnknownFieldSuggestsTheCloseOne() throws {
        let known = JobFileFields.Known(isNot: "is not a field of a task", fields: ["budget", "grace", "cwd"],
                                        synonyms: ["timeout": "budget"], alwaysList: false)
        let found = try problems(#"{"budgte": "1m", "timeout": "1m", "flavour": "vanilla"}"#) { fields in
            for field in fields { fields.unknown(field, known) }
        }
        #expect(found == [
            "task 't': field 'budgte' is not a field of a task; did you mean 'budget'?",
            "task 't': field 'timeout' is not a field of a task; did you mean 'budget'?",
            "task 't': field 'flavour' is not a field of a task (its fields: budget, grace, cwd)",
        ])
        let listed = try problems(#"{"delay": "1s"}"#, path: "retries") { fields in
            for field in fields {
                fields.unknown(field, .init(isNot: "is not a field of 'retries'", fields: ["max", "backoff"], synonyms: ["delay": "backoff"]))
            }
        }
        #expect(listed == ["task 't': field 'retries.delay' is not a field of 'retries'; did you mean 'backoff'? (its fields: max, backoff)"])
    }

    @Test func aRepeatedFieldIsReportedOnce() throws {
        #expect(try problems(#"{"budget": "1m", "grace": 1, "budget": "2m", "budget": "3m"}"#)
            == ["task 't': field 'budget' is given more than once; keep one"])
        #expect(try problems(#"{"X": "1", "Y": "2", "X": "3"}"#, scope: .top, path: "resources")
            == ["field 'resources.X' is given more than once; keep one"])
        // The last copy is the one read.
        _ = try problems(#"{"budget": "1m", "budget": "2m"}"#) { fields in
            #expect(fields.last("budget") == .string("2m"))
            #expect(fields.contains("budget") && !fields.contains("grace"))
        }
    }

    @Test func problemsComeInTheOrderOfTheirPlaces() {
        var problems = JobFileProblems()
        problems.add(.task(0, "t"), "grace", "late", at: JobFilePlace(field: 3))
        problems.add(.task(0, "t"), "after[0]", "end", at: JobFilePlace(field: 5))
        problems.add(.task(0, "t"), "resources.gpu", "checked", at: JobFilePlace(field: 2))
        problems.add(.task(0, "t"), "name", "first", at: JobFilePlace(field: -2))
        problems.add(.defaults, "budget", "defaults", at: JobFilePlace(field: 4, within: 1))
        problems.add(.top, "concurrency", "top", at: JobFilePlace(field: 1))
        problems.add(.task(0, "t"), "resources.mem", "checked too", at: JobFilePlace(field: 2))
        #expect(problems.all == [
            "field 'concurrency': top",
            "defaults: field 'budget': defaults",
            "task 't': field 'name': first",
            "task 't': field 'resources.gpu': checked",
            "task 't': field 'resources.mem': checked too",
            "task 't': field 'grace': late",
            "task 't': field 'after[0]': end",
        ])
    }

    /// The same job, read from a file and built in code, is refused with the same problems:
    /// one checker, run once on the model.
    @Test func aJobBuiltInCodeAndTheSameJobReadFromAFileGetTheSameProblems() throws {
        let json = """
        {
          "concurrency": 0,
          "resources": {"gpu": ["0"], "mem": 0},
          "tasks": [
            {"name": "a", "command": ["a"], "after": ["b"], "resources": {"gpu": 2}},
            {"name": "b", "command": ["b"], "after": [{"task": "a", "when": "done"}]},
            {"name": "b", "command": ["b2"], "after": ["nope", "b"], "command-made-by": "maker"},
            {"name": "bad name", "command": ["c"], "resources": {"disk": 1}}
          ]
        }
        """
        let built = JobFile(concurrency: 0, resources: ["gpu": .slots(["0"]), "mem": .count(0)], tasks: [
            JobTask(name: "a", command: ["a"], after: [Dependency(task: "b")], resources: ["gpu": 2]),
            JobTask(name: "b", command: ["b"], after: [Dependency(task: "a", condition: .done)]),
            JobTask(name: "b", command: ["b2"], after: [Dependency(task: "nope"), Dependency(task: "b")], commandMadeBy: "maker"),
            JobTask(name: "bad name", command: ["c"], resources: ["disk": 1]),
        ])
        let host = JobFileHost(accounts: AccountLookup(
            user: { name throws(TaskIsolation.ParseError) in throw TaskIsolation.ParseError("no user \(name)") },
            group: { name throws(TaskIsolation.ParseError) in throw TaskIsolation.ParseError("no group \(name)") }))
        var decoder = JobFileDecoder(baseDirectory: "/srv", host: host)
        let read = decoder.decode(Array(json.utf8))
        let decoded = try #require(read)
        #expect(decoder.report.problems.isEmpty, "\(decoder.report.problems.all)")
        #expect(decoded == built)

        var fromFile = JobFileChecker(report: decoder.report.problems)
        fromFile.check(decoded, reading: decoder.reading)
        var fromCode = JobFileChecker()
        fromCode.check(built)
        #expect(fromFile.problems.count == 10, "\(fromFile.problems.joined(separator: "\n"))")
        #expect(fromFile.problems == fromCode.problems)

        do {
            try built.validate(origin: "built")
            Issue.record("accepted")
        } catch {
            #expect(error.problems == fromFile.problems)
        }
        do {
            _ = try JobFile.parse(Array(json.utf8), origin: "jobs.json", directory: "/srv", host: host)
            Issue.record("accepted")
        } catch {
            #expect(error.problems == fromFile.problems)
        }
    }

    /// What could not be read is reported once, not again as a problem derived from it.
    @Test func anUnreadableValueGetsNoDerivedProblem() throws {
        let host = JobFileHost(accounts: AccountLookup(
            user: { name throws(TaskIsolation.ParseError) in throw TaskIsolation.ParseError("no user \(name)") },
            group: { name throws(TaskIsolation.ParseError) in throw TaskIsolation.ParseError("no group \(name)") }))
        func refused(_ json: String) -> [String] {
            do {
                _ = try JobFile.parse(Array(json.utf8), origin: "j.json", directory: "/srv", host: host)
                return []
            } catch {
                return error.problems
            }
        }
        // A pool whose slots cannot all be read: the request is not measured against it.
        #expect(refused(#"{"resources": {"gpu": ["0", {}]}, "tasks": [{"name": "t", "command": ["t"], "resources": {"gpu": 3}}]}"#)
            == ["field 'resources.gpu[1]': expected a slot id such as \"0\", got an empty object"])
        // A task without a readable name is not also "empty" or unnamed in the checker.
        #expect(refused(#"{"tasks": [{"command": ["t"]}, 3]}"#) == [
            "task #1: field 'name' is missing; every task needs a unique name, e.g. \"train\"",
            "task #2: expected an object with at least 'name' and 'command', got 3",
        ])
        // No task list: not also an empty one.
        #expect(refused(#"{"tasks": "t"}"#) == ["field 'tasks': expected an array of task objects, got \"t\""])
    }
}
