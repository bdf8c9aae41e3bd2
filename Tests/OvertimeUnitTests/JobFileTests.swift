import Foundation
import OvertimeProtocol
import OvertimeTestSupport
import Testing
@testable import Overtime

// MARK: - Helpers (JobFileMemoryAndRetryTests.swift uses them too)

/// The problems a job file's text is refused with (none, and a recorded issue, if accepted).
func jobFileProblems(_ json: String, origin: String = "/srv/jobs/jobs.json",
                             sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
    do {
        _ = try JobFile.parse(Array(json.utf8), origin: origin)
        Issue.record("the job file was accepted:\n\(json)", sourceLocation: sourceLocation)
        return []
    } catch {
        #expect(error.origin == origin, sourceLocation: sourceLocation)
        return error.problems
    }
}

/// A job file of one task named `t` with the given extra fields, and the given top-level
/// fields.
func oneTask(_ fields: String = "", top: String = "") -> String {
    let extra = fields.isEmpty ? "" : ", " + fields
    let topExtra = top.isEmpty ? "" : top + ", "
    return "{\(topExtra)\"tasks\": [{\"name\": \"t\", \"command\": [\"true\"]\(extra)}]}"
}

/// A job file of the given task objects (comma-separated JSON), with top-level fields.
func tasks(_ list: String, top: String = "") -> String {
    let topExtra = top.isEmpty ? "" : top + ", "
    return "{\(topExtra)\"tasks\": [\(list)]}"
}


// MARK: - Decoding

@Suite struct JobFileDecodingTests {
    @Test func fullExampleDecodesToExactlyTheExpectedJob() throws {
        let valid = """
        {
          "concurrency": 2,
          "deadline": "1h30m",
          "resources": {"gpu": ["0", "1", 2, 3], "mem_gb": 64},
          "defaults": {
            "budget": "10m",
            "window": 60,
            "grace": "20s",
            "min-start": "1m",
            "env": {"A": "1", "B": "2"},
            "cwd": "work",
            "resources": {"mem_gb": 4},
            "retries": 2
          },
          "tasks": [
            {
              "name": "prep",
              "command": ["python3", "prep.py"],
              "env": {"B": "two", "C": "3"},
              "budget": "none",
              "max-runtime": "2h",
              "resources": {}
            },
            {
              "name": "server",
              "command": ["./serve", "--port", "8500"],
              "cwd": "/opt/server",
              "window": 0.25,
              "require-advance": true,
              "after": ["prep"],
              "retries": 0
            },
            {
              "name": "train.large_v2",
              "command": ["python3", "train.py", "--epochs", "3", ""],
              "cwd": "../models/./large/",
              "after": [{"task": "server", "when": "ready"}, {"task": "prep", "when": "done"}],
              "grace": 0,
              "warn-before": "1m30s",
              "resources": {"gpu": 2, "mem_gb": 32},
              "retries": {"max": 3, "backoff": "5s", "max-backoff": "1m", "on": ["timeout", "signal"]}
            },
            {
              "name": "report",
              "command": ["sh", "-c", "echo done | mail team"],
              "after": [{"task": "train.large_v2"}],
              "budget": 45,
              "retries": {"max": 1, "backoff": "2m"}
            }
          ]
        }
        """
        let job = try JobFile.parse(Array(valid.utf8), origin: "/srv/pipeline/jobs.json")
        let expected = JobFile(
            concurrency: 2,
            deadline: .seconds(5400),
            resources: ["gpu": .slots(["0", "1", "2", "3"]), "mem_gb": .count(64)],
            tasks: [
                JobTask(
                    name: "prep",
                    command: ["python3", "prep.py"],
                    environment: ["A": "1", "B": "two", "C": "3"],
                    workingDirectory: "/srv/pipeline/work",
                    policy: BudgetPolicy(budget: nil, window: .seconds(60), maxRuntime: .seconds(7200),
                                         grace: .seconds(20), minStart: .seconds(60)),
                    resources: [:],
                    retry: RetryPolicy(maxRetries: 2)
                ),
                JobTask(
                    name: "server",
                    command: ["./serve", "--port", "8500"],
                    environment: ["A": "1", "B": "2"],
                    workingDirectory: "/opt/server",
                    policy: BudgetPolicy(budget: .seconds(600), window: .milliseconds(250), grace: .seconds(20),
                                         requireAdvance: true, minStart: .seconds(60)),
                    after: [Dependency(task: "prep", condition: .success)],
                    resources: ["mem_gb": 4],
                    retry: .none
                ),
                JobTask(
                    name: "train.large_v2",
                    command: ["python3", "train.py", "--epochs", "3", ""],
                    environment: ["A": "1", "B": "2"],
                    workingDirectory: "/srv/pipeline/../models/large",
                    policy: BudgetPolicy(budget: .seconds(600), window: .seconds(60), grace: .zero,
                                         warnBefore: .seconds(90), minStart: .seconds(60)),
                    after: [Dependency(task: "server", condition: .ready), Dependency(task: "prep", condition: .done)],
                    resources: ["gpu": 2, "mem_gb": 32],
                    retry: RetryPolicy(maxRetries: 3, backoff: .seconds(5), maxBackoff: .seconds(60), on: [.timeout, .signal])
                ),
                JobTask(
                    name: "report",
                    command: ["sh", "-c", "echo done | mail team"],
                    environment: ["A": "1", "B": "2"],
                    workingDirectory: "/srv/pipeline/work",
                    policy: BudgetPolicy(budget: .seconds(45), window: .seconds(60), grace: .seconds(20), minStart: .seconds(60)),
                    after: [Dependency(task: "train.large_v2")],
                    resources: ["mem_gb": 4],
                    // A backoff longer than the default cap raises the cap.
                    retry: RetryPolicy(maxRetries: 1, backoff: .seconds(120), maxBackoff: .seconds(120))
                ),
            ]
        )
        #expect(job == expected)
        for (got, want) in zip(job.tasks, expected.tasks) {
            #expect(got == want, "task \(want.name)")
        }
    }

    @Test func aMinimalFileGetsEveryDefault() throws {
        let job = try JobFile.parse(Array(#"{"tasks": [{"name": "hello", "command": ["echo", "hi"]}]}"#.utf8), origin: "jobs.json")
        #expect(job == JobFile(concurrency: 4, deadline: nil, resources: [:],
                               tasks: [JobTask(name: "hello", command: ["echo", "hi"])]))
        #expect(job.concurrency == JobFile.defaultConcurrency)
        #expect(job.tasks[0].policy == .default)
        #expect(job.tasks[0].retry == .none)
        #expect(job.tasks[0].workingDirectory == nil)
    }

    @Test(arguments: [
        ("\"30s\"", Duration.seconds(30)),
        ("\"1h30m\"", .seconds(5400)),
        ("\"250ms\"", .milliseconds(250)),
        ("90", .seconds(90)),
        ("1.5", .milliseconds(1500)),
        ("\"2\"", .seconds(2)),
    ])
    func durationsAreStringsOrSeconds(text: String, expected: Duration) throws {
        let job = try JobFile.parse(Array(oneTask("\"grace\": \(text), \"budget\": \(text)").utf8), origin: "j.json")
        #expect(job.tasks[0].policy.grace == expected)
        #expect(job.tasks[0].policy.budget == expected)
    }

    @Test func noneIsAllowedWhereTheCLIAllowsIt() throws {
        let job = try JobFile.parse(Array(oneTask(#""budget": "none", "max-runtime": "NONE""#, top: #""deadline": "none""#).utf8),
                                    origin: "j.json")
        #expect(job.deadline == nil)
        #expect(job.tasks[0].policy.budget == nil)
        #expect(job.tasks[0].policy.maxRuntime == nil)
    }

    @Test func metricsAtTheTopLevel() throws {
        let job = try JobFile.parse(Array(oneTask(top: #""metrics": "0.0.0.0:9464", "metrics-file": "out/overtime.prom""#).utf8),
                                    origin: "/srv/jobs/j.json")
        #expect(job.metrics == MetricsAddress(host: "0.0.0.0", port: 9464))
        #expect(job.metricsFile == "/srv/jobs/out/overtime.prom")
        let problems = jobFileProblems(oneTask(top: #""metrics": "nonsense", "metrics-file": """#))
        #expect(problems.count == 2 && problems[0].contains("metrics") && problems[0].contains("expected PORT"), "\(problems)")
    }

    @Test func zeroIsNoLimitAsWithGNUTimeout() throws {
        let job = try JobFile.parse(Array(oneTask(#""budget": "0s", "window": 0, "max-runtime": "0""#, top: #""deadline": 0"#).utf8),
                                    origin: "j.json")
        #expect(job.deadline == nil)
        #expect(job.tasks[0].policy.budget == nil)
        #expect(job.tasks[0].policy.maxRuntime == nil)
        #expect(job.tasks[0].policy.window == BudgetPolicy.unlimitedWindow)
    }

    @Test func defaultsMergeUnderTheTasksOwnFields() throws {
        let json = tasks("""
            {"name": "a", "command": ["a"]},
            {"name": "b", "command": ["b"], "env": {"X": "mine", "Y": "y"}, "resources": {"mem": 1},
             "retries": {"max": 1}, "budget": "1m", "cwd": "/b"},
            {"name": "c", "command": ["c"], "resources": {}, "retries": 0, "env": {}}
            """, top: """
            "resources": {"mem": 8, "gpu": ["0"]},
            "defaults": {"env": {"X": "default", "Z": "z"}, "resources": {"gpu": 1, "mem": 2},
                         "retries": {"max": 5, "backoff": "3s", "on": ["exit"]}, "budget": "5m", "cwd": "d"}
            """)
        let job = try JobFile.parse(Array(json.utf8), origin: "/p/j.json")
        let (a, b, c) = (job.tasks[0], job.tasks[1], job.tasks[2])
        #expect(a.environment == ["X": "default", "Z": "z"])
        #expect(a.resources == ["gpu": 1, "mem": 2])
        #expect(a.retry == RetryPolicy(maxRetries: 5, backoff: .seconds(3), on: [.exit]))
        #expect(a.policy.budget == .seconds(300))
        #expect(a.workingDirectory == "/p/d")
        // env merges per variable; everything else is replaced whole.
        #expect(b.environment == ["X": "mine", "Y": "y", "Z": "z"])
        #expect(b.resources == ["mem": 1])
        #expect(b.retry == RetryPolicy(maxRetries: 1))
        #expect(b.policy.budget == .seconds(60))
        #expect(b.workingDirectory == "/b")
        #expect(c.environment == ["X": "default", "Z": "z"])
        #expect(c.resources == [:])
        #expect(c.retry == .none)
    }

    @Test func relativeWorkingDirectoriesFollowTheJobFile() throws {
        func cwd(_ path: String, origin: String) throws -> String? {
            try JobFile.parse(Array(oneTask("\"cwd\": \(JobFileText.quote(path))").utf8), origin: origin).tasks[0].workingDirectory
        }
        #expect(try cwd("data", origin: "/srv/jobs/jobs.json") == "/srv/jobs/data")
        #expect(try cwd(".", origin: "/srv/jobs/jobs.json") == "/srv/jobs")
        #expect(try cwd("./a//b/", origin: "/srv/jobs/jobs.json") == "/srv/jobs/a/b")
        #expect(try cwd("/abs", origin: "/srv/jobs/jobs.json") == "/abs")
        #expect(try cwd("data", origin: "/jobs.json") == "/data")
        let here = FileManager.default.currentDirectoryPath
        #expect(try cwd("data", origin: "jobs.json") == here + "/data")
        #expect(try cwd("data", origin: "sub/jobs.json") == here + "/sub/data")
        let explicit = try JobFile.parse(Array(oneTask(#""cwd": "x""#).utf8), origin: "<stdin>", directory: "/base")
        #expect(explicit.tasks[0].workingDirectory == "/base/x")
    }

    @Test func slotIdsMayBeWholeNumbersAndABOMIsSkipped() throws {
        let json = oneTask(#""resources": {"gpu": 2}"#, top: #""resources": {"gpu": [0, 1, "7"]}"#)
        let job = try JobFile.parse([0xEF, 0xBB, 0xBF] + Array(json.utf8), origin: "j.json")
        #expect(job.resources["gpu"] == .slots(["0", "1", "7"]))
        #expect(job.resources["gpu"]?.capacity == 3)
    }

    @Test func helpers() throws {
        #expect(JobFile.resourceVariable(forPool: "gpu") == "OVERTIME_RESOURCE_GPU")
        #expect(JobFile.resourceVariable(forPool: "mem-gb") == "OVERTIME_RESOURCE_MEM_GB")
        let job = try JobFile.parse(Array(oneTask().utf8), origin: "j.json")
        #expect(job.task(named: "t")?.command == ["true"])
        #expect(job.task(named: "u") == nil)
    }
}

// MARK: - Validation

/// One invalid job file and what its single problem must mention.
struct JobFileCase: Sendable, CustomTestStringConvertible {
    var name: String
    var json: String
    /// Every one of these is in the same problem line.
    var mentions: [String]
    /// How many problems the file has in all.
    var count = 1

    var testDescription: String { name }
}

@Suite struct JobFileValidationTests {
    static let cases: [JobFileCase] = [
        // Not JSON, or not the right shape
        JobFileCase(name: "not JSON", json: "{\n  \"tasks\": [\n    {\"name\": \"t\" \"command\": []}\n  ]\n}",
                    mentions: ["not JSON", "line 3, column 18", "comma missing"]),
        JobFileCase(name: "trailing comma", json: "{\"tasks\": [\n  {\"name\": \"t\", \"command\": [\"true\"]},\n]}",
                    mentions: ["not JSON", "line 3, column 1", "trailing comma at line 2, column 37"]),
        JobFileCase(name: "a comment", json: "{\n// the tasks\n\"tasks\": []}", mentions: ["not JSON", "line 2, column 1", "no comments"]),
        JobFileCase(name: "unquoted duration", json: oneTask(#""budget": 30s"#), mentions: ["not JSON", "line 1, column 59", "double quotes"]),
        JobFileCase(name: "cut short", json: "{\"tasks\": [", mentions: ["not JSON", "end of file", "line 1, column 12", "missing"]),
        JobFileCase(name: "empty file", json: " \n", mentions: ["the file is empty", "\"tasks\""]),
        JobFileCase(name: "top-level array", json: #"[{"name": "t", "command": ["true"]}]"#, mentions: ["top level is an array", "{\"tasks\": [...]}"]),
        JobFileCase(name: "top-level string", json: #""tasks""#, mentions: ["expected a JSON object", "got \"tasks\""]),
        JobFileCase(name: "tasks not an array", json: #"{"tasks": {"name": "t"}}"#, mentions: ["field 'tasks'", "expected an array", "got an object"]),
        JobFileCase(name: "tasks missing", json: #"{"concurrency": 2}"#, mentions: ["field 'tasks' is missing"]),
        JobFileCase(name: "empty task list", json: #"{"tasks": []}"#, mentions: ["field 'tasks'", "empty", "at least one task"]),
        JobFileCase(name: "task not an object", json: tasks(#""echo hi""#), mentions: ["task #1", "expected an object", "got \"echo hi\""]),

        // Unknown fields, with suggestions
        JobFileCase(name: "unknown top-level field", json: #"{"task": [{"name": "t", "command": ["x"]}]}"#,
                    mentions: ["field 'task'", "did you mean 'tasks'?"], count: 2),
        JobFileCase(name: "task field at the top", json: oneTask(top: #""budget": "1m""#),
                    mentions: ["field 'budget'", "is a task field", "'defaults'"]),
        JobFileCase(name: "command at the top", json: oneTask(top: #""command": ["x"]"#),
                    mentions: ["field 'command'", "field of each task", "under 'tasks'"]),
        JobFileCase(name: "snake_case", json: oneTask(#""max_runtime": "1h""#),
                    mentions: ["task 't'", "field 'max_runtime'", "did you mean 'max-runtime'?"]),
        JobFileCase(name: "camelCase", json: oneTask(#""warnBefore": "1m""#),
                    mentions: ["task 't'", "field 'warnBefore'", "did you mean 'warn-before'?"]),
        JobFileCase(name: "synonym", json: oneTask(#""depends_on": ["x"]"#),
                    mentions: ["task 't'", "field 'depends_on'", "did you mean 'after'?"]),
        JobFileCase(name: "typo", json: oneTask(#""budgte": "1m""#), mentions: ["task 't'", "field 'budgte'", "did you mean 'budget'?"]),
        JobFileCase(name: "nothing close", json: oneTask(#""flavour": "vanilla""#),
                    mentions: ["task 't'", "field 'flavour'", "its fields: name, command"]),
        JobFileCase(name: "top-level field in a task", json: oneTask(#""concurrency": 2"#),
                    mentions: ["task 't'", "field 'concurrency'", "top level"]),
        JobFileCase(name: "unknown field in defaults", json: oneTask(top: #""defaults": {"graceperiod": "5s"}"#),
                    mentions: ["defaults: field 'graceperiod'", "did you mean 'grace'?"]),
        JobFileCase(name: "no default for command", json: oneTask(top: #""defaults": {"command": ["x"]}"#),
                    mentions: ["defaults: field 'command' is not allowed in 'defaults'", "each task gives its own"]),
        JobFileCase(name: "unknown field in retries", json: oneTask(#""retries": {"max": 2, "delay": "1s"}"#),
                    mentions: ["task 't'", "field 'retries.delay'", "did you mean 'backoff'?"]),
        JobFileCase(name: "unknown field in a dependency",
                    json: tasks(#"{"name": "a", "command": ["a"]}, {"name": "t", "command": ["t"], "after": [{"task": "a", "condition": "done"}]}"#),
                    mentions: ["task 't'", "field 'after[0].condition'", "did you mean 'when'?"]),
        JobFileCase(name: "a field twice", json: oneTask(#""budget": "1m", "budget": "2m""#),
                    mentions: ["task 't'", "field 'budget' is given more than once"]),

        // Wrong types
        JobFileCase(name: "command as a string", json: tasks(#"{"name": "t", "command": "python3 train.py --epochs 3"}"#),
                    mentions: ["task 't'", "field 'command'", #"["python3", "train.py", "--epochs", "3"]"#, "never runs a shell"]),
        JobFileCase(name: "shell command as a string", json: tasks(#"{"name": "t", "command": "ls | wc -l"}"#),
                    mentions: ["task 't'", "field 'command'", #"["sh", "-c", "ls | wc -l"]"#]),
        JobFileCase(name: "number in argv", json: tasks(#"{"name": "t", "command": ["sleep", 3]}"#),
                    mentions: ["task 't'", "field 'command[1]'", "quote it: \"3\""]),
        JobFileCase(name: "empty command", json: tasks(#"{"name": "t", "command": []}"#), mentions: ["task 't'", "field 'command' is empty"]),
        JobFileCase(name: "empty program", json: tasks(#"{"name": "t", "command": ["", "x"]}"#),
                    mentions: ["task 't'", "field 'command[0]'", "program name is empty"]),
        JobFileCase(name: "command missing", json: tasks(#"{"name": "t"}"#), mentions: ["task 't'", "field 'command' is missing"]),
        JobFileCase(name: "env value a number", json: oneTask(#""env": {"THREADS": 4}"#),
                    mentions: ["task 't'", "field 'env.THREADS'", "quote it: \"4\""]),
        JobFileCase(name: "env not an object", json: oneTask(#""env": ["A=1"]"#), mentions: ["task 't'", "field 'env'", "expected an object"]),
        JobFileCase(name: "bool as a string", json: oneTask(#""require-advance": "true""#),
                    mentions: ["task 't'", "field 'require-advance'", "without quotes"]),
        JobFileCase(name: "concurrency as a string", json: oneTask(top: #""concurrency": "4""#),
                    mentions: ["field 'concurrency'", "write 4 without quotes"]),
        JobFileCase(name: "concurrency fractional", json: oneTask(top: #""concurrency": 1.5"#),
                    mentions: ["field 'concurrency'", "whole number", "got 1.5"]),
        JobFileCase(name: "after as a string", json: oneTask(#""after": "prep""#), mentions: ["task 't'", "field 'after'", "write [\"prep\"]"]),
        JobFileCase(name: "after entry a number", json: oneTask(#""after": [1]"#), mentions: ["task 't'", "field 'after[0]'", "got 1"]),
        JobFileCase(name: "bad condition",
                    json: tasks(#"{"name": "a", "command": ["a"]}, {"name": "t", "command": ["t"], "after": [{"task": "a", "when": "finished"}]}"#),
                    mentions: ["task 't'", "field 'after[0].when'", "\"finished\" is not a condition (did you mean 'done'?); expected success", "ready"]),
        JobFileCase(name: "retries as a string", json: oneTask(#""retries": "3""#), mentions: ["task 't'", "field 'retries'", "{\"max\": 3"]),
        JobFileCase(name: "negative retries", json: oneTask(#""retries": -1"#), mentions: ["task 't'", "field 'retries'", "negative"]),
        JobFileCase(name: "retries without max", json: oneTask(#""retries": {"backoff": "5s"}"#),
                    mentions: ["task 't'", "field 'retries.max' is missing"]),
        JobFileCase(name: "retry on user", json: oneTask(#""retries": {"max": 2, "on": ["timeout", "user"]}"#),
                    mentions: ["task 't'", "field 'retries.on[1]'", "never retried", "final"]),
        JobFileCase(name: "retry on a typo", json: oneTask(#""retries": {"max": 2, "on": ["timeot"]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "did you mean 'timeout'?"]),
        JobFileCase(name: "retry on a bad exit status", json: oneTask(#""retries": {"max": 2, "on": ["exit:abc"]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "\"exit:abc\"", "not an exit status", "\"exit:3\""]),
        JobFileCase(name: "retry on an exit status out of range", json: oneTask(#""retries": {"max": 2, "on": ["exit:300"]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "300 is not an exit status", "1 to 255", "\"signal\""]),
        JobFileCase(name: "retry on exit 0", json: oneTask(#""retries": {"max": 2, "on": ["exit:0"]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "0 is success"]),
        JobFileCase(name: "retry on a bare status", json: oneTask(#""retries": {"max": 2, "on": [3]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "write \"exit:3\""]),
        JobFileCase(name: "retry on nonsense", json: oneTask(#""retries": {"max": 2, "on": ["oops"]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "\"oops\" is not an outcome; expected", "oom", "failed or exit:N"]),
        JobFileCase(name: "retry on another tool's word", json: oneTask(#""retries": {"max": 2, "on": ["OOMKilled"]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "did you mean 'oom'?"]),
        JobFileCase(name: "retry on a misspelt alias", json: oneTask(#""retries": {"max": 2, "on": ["faild"]}"#),
                    mentions: ["task 't'", "field 'retries.on[0]'", "did you mean 'failed'?"]),
        JobFileCase(name: "retry on nothing", json: oneTask(#""retries": {"max": 2, "on": []}"#),
                    mentions: ["task 't'", "field 'retries.on'", "\"retries\": 0"]),
        JobFileCase(name: "backoff beyond max-backoff", json: oneTask(#""retries": {"max": 2, "backoff": "2m", "max-backoff": "1m"}"#),
                    mentions: ["task 't'", "field 'retries.backoff'", "longer than max-backoff"]),
        JobFileCase(name: "resource request as ids", json: oneTask(#""resources": {"gpu": ["0"]}"#, top: #""resources": {"gpu": ["0"]}"#),
                    mentions: ["task 't'", "field 'resources.gpu'", "not for ids"]),
        JobFileCase(name: "pool of the wrong type", json: oneTask(top: #""resources": {"gpu": true}"#),
                    mentions: ["field 'resources.gpu'", "list of slot ids", "got true"]),
        JobFileCase(name: "slot id of the wrong type", json: oneTask(top: #""resources": {"gpu": ["0", 1.5]}"#),
                    mentions: ["field 'resources.gpu[1]'", "slot id", "got 1.5"]),

        // Durations
        JobFileCase(name: "negative duration", json: tasks(#"{"name": "train", "command": ["t"], "budget": "-1s"}"#),
                    mentions: ["task 'train'", "field 'budget'", "'-1s' is negative", "expected a duration such as 30s", "\"none\""]),
        JobFileCase(name: "negative seconds", json: oneTask(#""grace": -5"#), mentions: ["task 't'", "field 'grace'", "-5 is negative"]),
        JobFileCase(name: "not a duration", json: oneTask(#""window": "soon""#), mentions: ["task 't'", "field 'window'", "'soon' is not a duration"]),
        JobFileCase(name: "words for units", json: oneTask(#""max-runtime": "1 hour 30 minutes""#),
                    mentions: ["task 't'", "field 'max-runtime'", "is not a duration; write \"1h30m\""]),
        JobFileCase(name: "a long unit", json: oneTask(#""budget": "5mins""#), mentions: ["task 't'", "field 'budget'", "write \"5m\""]),
        JobFileCase(name: "none where not allowed", json: oneTask(#""grace": "none""#), mentions: ["task 't'", "field 'grace'", "'none' is not allowed"]),
        JobFileCase(name: "zero min-start is fine, zero concurrency is not", json: oneTask(#""min-start": 0"#, top: #""concurrency": 0"#),
                    mentions: ["field 'concurrency'"]),
        JobFileCase(name: "null duration", json: oneTask(#""max-runtime": null"#),
                    mentions: ["task 't'", "field 'max-runtime'", "null", "leave the field out", "\"none\""]),
        JobFileCase(name: "duration of the wrong type", json: oneTask(#""budget": true"#), mentions: ["task 't'", "field 'budget'", "got true"]),
        JobFileCase(name: "too long", json: oneTask(#""budget": 1e12"#), mentions: ["task 't'", "field 'budget'", "too long"]),
        JobFileCase(name: "bad duration in defaults", json: oneTask(top: #""defaults": {"min-start": "5x"}"#),
                    mentions: ["defaults: field 'min-start'", "unknown unit 'x'"]),

        // Memory
        JobFileCase(name: "not a size", json: oneTask(#""memory-max": "lots""#),
                    mentions: ["task 't'", "field 'memory-max'", "'lots' is not a size", "512M", "\"none\""]),
        JobFileCase(name: "a size without a unit", json: oneTask(#""memory-max": 8"#),
                    mentions: ["task 't'", "field 'memory-max'", "8 has no unit", "\"8G\""]),
        JobFileCase(name: "a negative size", json: oneTask(#""memory-max": "-1G""#),
                    mentions: ["task 't'", "field 'memory-max'", "'-1G' is not a size"]),
        JobFileCase(name: "a size of the wrong type", json: oneTask(#""memory-max": true"#),
                    mentions: ["task 't'", "field 'memory-max'", "as a string", "got true"]),
        JobFileCase(name: "a null size", json: oneTask(#""memory-max": null"#),
                    mentions: ["task 't'", "field 'memory-max'", "leave the field out"]),
        JobFileCase(name: "not a warning level", json: oneTask(#""memory-max": "1G", "memory-warn": "150%""#),
                    mentions: ["task 't'", "field 'memory-warn'", "'150%' is not a warning level", "80%"]),
        JobFileCase(name: "a share as a number", json: oneTask(#""memory-max": "1G", "memory-warn": 0.8"#),
                    mentions: ["task 't'", "field 'memory-warn'", "0.8 has no unit", "\"80%\""]),
        JobFileCase(name: "a warning without a max", json: oneTask(#""memory-warn": "80%""#),
                    mentions: ["task 't'", "field 'memory-warn' is set but the task has no memory-max", "\"memory-max\": \"8G\""]),
        JobFileCase(name: "a warning whose max is turned off", json: oneTask(#""memory-max": "none", "memory-warn": "1G""#, top: #""defaults": {"memory-max": "2G"}"#),
                    mentions: ["task 't'", "field 'memory-warn' is set but the task has no memory-max"]),
        JobFileCase(name: "a default warning no task can use", json: oneTask(top: #""defaults": {"memory-warn": "80%"}"#),
                    mentions: ["defaults: field 'memory-warn' is set but no task has a memory-max"]),
        JobFileCase(name: "a warning above the max", json: tasks(#"{"name": "train", "command": ["t"], "memory-max": "1G", "memory-warn": "1.5G"}"#),
                    mentions: ["task 'train'", "field 'memory-warn'", "1.5 GiB is above memory-max (1 GiB)", "90%"]),
        JobFileCase(name: "a default warning above the task's max", json: oneTask(#""memory-max": "1G""#, top: #""defaults": {"memory-warn": "3G"}"#),
                    mentions: ["task 't'", "field 'memory-warn'", "3 GiB is above memory-max (1 GiB) (memory-warn comes from 'defaults')"]),
        JobFileCase(name: "a warning above the default max", json: oneTask(#""memory-warn": "3G""#, top: #""defaults": {"memory-max": "1G"}"#),
                    mentions: ["task 't'", "field 'memory-warn'", "(memory-max comes from 'defaults')"]),

        // Names
        JobFileCase(name: "name missing", json: tasks(#"{"command": ["t"]}"#), mentions: ["task #1", "field 'name' is missing"]),
        JobFileCase(name: "name not a string", json: tasks(#"{"name": 7, "command": ["t"]}"#), mentions: ["task #1", "field 'name'", "got 7"]),
        JobFileCase(name: "empty name", json: tasks(#"{"name": "", "command": ["t"]}"#), mentions: ["task #1", "field 'name' is empty"]),
        JobFileCase(name: "name with a space", json: tasks(#"{"name": "my task", "command": ["t"]}"#),
                    mentions: ["task 'my task'", "field 'name'", "a space", "letters, digits"]),
        JobFileCase(name: "name with a slash", json: tasks(#"{"name": "a/b", "command": ["t"]}"#), mentions: ["task 'a/b'", "field 'name'", "'/'"]),
        JobFileCase(name: "name starting with a dot", json: tasks(#"{"name": "..", "command": ["t"]}"#), mentions: ["task '..'", "field 'name'", "starts with '.'"]),
        JobFileCase(name: "name too long", json: tasks("{\"name\": \"\(String(repeating: "a", count: 101))\", \"command\": [\"t\"]}"),
                    mentions: ["field 'name'", "101 characters"]),
        JobFileCase(name: "duplicate names",
                    json: tasks(#"{"name": "train", "command": ["a"]}, {"name": "x", "command": ["x"]}, {"name": "train", "command": ["b"]}"#),
                    mentions: ["task 'train'", "field 'name'", "already the name of task #1", "unique"]),

        // Dependencies
        JobFileCase(name: "unknown dependency",
                    json: tasks(#"{"name": "prep", "command": ["a"]}, {"name": "train", "command": ["b"], "after": ["prepp"]}"#),
                    mentions: ["task 'train'", "field 'after[0]'", "no task named 'prepp'", "did you mean 'prep'?"]),
        JobFileCase(name: "unknown dependency in an object",
                    json: tasks(#"{"name": "prep", "command": ["a"]}, {"name": "train", "command": ["b"], "after": ["prep", {"task": "Prep", "when": "done"}]}"#),
                    mentions: ["task 'train'", "field 'after[1]'", "no task named 'Prep'", "did you mean 'prep'?"]),
        JobFileCase(name: "itself", json: oneTask(#""after": ["t"]"#), mentions: ["task 't'", "field 'after[0]'", "cannot wait for itself"]),
        JobFileCase(name: "listed twice",
                    json: tasks(#"{"name": "a", "command": ["a"]}, {"name": "t", "command": ["b"], "after": ["a", {"task": "a", "when": "done"}]}"#),
                    mentions: ["task 't'", "field 'after[1]'", "listed twice", "after[0]"]),
        JobFileCase(name: "a cycle",
                    json: tasks(#"{"name": "a", "command": ["a"], "after": ["c"]}, {"name": "b", "command": ["b"], "after": ["a"]}, {"name": "c", "command": ["c"], "after": ["b"]}"#),
                    mentions: ["task 'a'", "field 'after'", "dependency cycle a → c → b → a"]),

        // Resources
        JobFileCase(name: "unknown pool", json: oneTask(#""resources": {"gpus": 1}"#, top: #""resources": {"gpu": ["0"], "mem_gb": 8}"#),
                    mentions: ["task 't'", "field 'resources.gpus'", "no pool named 'gpus'", "did you mean 'gpu'?", "pools: gpu, mem_gb"]),
        JobFileCase(name: "no pools at all", json: oneTask(#""resources": {"gpu": 1}"#),
                    mentions: ["task 't'", "field 'resources.gpu'", "declares none", "top-level 'resources'"]),
        JobFileCase(name: "more slots than the pool has",
                    json: tasks(#"{"name": "train", "command": ["t"], "resources": {"gpu": 5}}"#, top: #""resources": {"gpu": ["0", "1", "2", "3"]}"#),
                    mentions: ["task 'train'", "field 'resources.gpu'", "asks for 5 slots", "has only 4 (0, 1, 2, 3)", "at most 4"]),
        JobFileCase(name: "more than the count",
                    json: oneTask(#""resources": {"mem_gb": 80}"#, top: #""resources": {"mem_gb": 64}"#),
                    mentions: ["task 't'", "field 'resources.mem_gb'", "asks for 80", "holds 64"]),
        JobFileCase(name: "zero request", json: oneTask(#""resources": {"mem_gb": 0}"#, top: #""resources": {"mem_gb": 64}"#),
                    mentions: ["task 't'", "field 'resources.mem_gb'", "asks for 0", "at least 1"]),
        JobFileCase(name: "negative request", json: oneTask(#""resources": {"mem_gb": -2}"#, top: #""resources": {"mem_gb": 64}"#),
                    mentions: ["task 't'", "field 'resources.mem_gb'", "asks for -2"]),
        JobFileCase(name: "request in defaults too large", json: oneTask(top: #""resources": {"mem_gb": 4}, "defaults": {"resources": {"mem_gb": 8}}"#),
                    mentions: ["defaults: field 'resources.mem_gb'", "asks for 8", "holds 4"]),
        JobFileCase(name: "duplicate slot ids", json: oneTask(top: #""resources": {"gpu": ["0", "1", "1"]}"#),
                    mentions: ["field 'resources.gpu[2]'", "slot \"1\" is listed twice", "resources.gpu[1]"]),
        JobFileCase(name: "duplicate slot ids, number and string", json: oneTask(top: #""resources": {"gpu": [0, "0"]}"#),
                    mentions: ["field 'resources.gpu[1]'", "listed twice"]),
        JobFileCase(name: "empty slot pool", json: oneTask(top: #""resources": {"gpu": []}"#), mentions: ["field 'resources.gpu'", "no slots"]),
        JobFileCase(name: "slot ids with a comma", json: oneTask(top: #""resources": {"gpu": ["0,1"]}"#),
                    mentions: ["field 'resources.gpu[0]'", "comma", "[\"0\", \"1\"]"]),
        JobFileCase(name: "zero pool", json: oneTask(top: #""resources": {"mem_gb": 0}"#), mentions: ["field 'resources.mem_gb'", "less than 1"]),
        JobFileCase(name: "counted gpu pool", json: oneTask(top: #""resources": {"gpu": 4}"#),
                    mentions: ["field 'resources.gpu'", "must list its device ids", "CUDA_VISIBLE_DEVICES"]),
        JobFileCase(name: "pools that clash as variables", json: oneTask(top: #""resources": {"mem-gb": 4, "mem_gb": 8}"#),
                    mentions: ["field 'resources.mem_gb'", "OVERTIME_RESOURCE_MEM_GB", "rename one"]),
        JobFileCase(name: "pool name with a space", json: oneTask(top: #""resources": {"my pool": 4}"#),
                    mentions: ["field 'resources.my pool'", "a space"]),

        // The rest
        JobFileCase(name: "concurrency zero", json: oneTask(top: #""concurrency": 0"#),
                    mentions: ["field 'concurrency'", "0 is less than 1"]),
        JobFileCase(name: "reserved variable", json: oneTask(#""env": {"OVERTIME_TASK": "x"}"#),
                    mentions: ["task 't'", "field 'env.OVERTIME_TASK'", "set by Overtime"]),
        JobFileCase(name: "CUDA_VISIBLE_DEVICES with a gpu request",
                    json: oneTask(#""resources": {"gpu": 1}, "env": {"CUDA_VISIBLE_DEVICES": "0"}"#, top: #""resources": {"gpu": ["0"]}"#),
                    mentions: ["task 't'", "field 'env.CUDA_VISIBLE_DEVICES'", "from the 'gpu' slots"]),
        JobFileCase(name: "a home-relative cwd", json: oneTask(#""cwd": "~/data""#), mentions: ["task 't'", "field 'cwd'", "'~' is not expanded"]),
        JobFileCase(name: "an empty cwd", json: oneTask(#""cwd": """#), mentions: ["task 't'", "field 'cwd' is empty"]),
        JobFileCase(name: "NUL in an argument", json: tasks(#"{"name": "t", "command": ["echo", "a\u0000b"]}"#),
                    mentions: ["task 't'", "field 'command[1]'", "NUL"]),
    ]

    @Test(arguments: cases)
    func eachProblemIsNamedWithItsTaskAndField(_ c: JobFileCase) {
        let problems = jobFileProblems(c.json)
        #expect(problems.count == c.count, "\(problems)")
        let line = problems.first { problem in c.mentions.allSatisfy { problem.contains($0) } }
        #expect(line != nil, "no problem mentions all of \(c.mentions): \(problems)")
    }

    @Test func everyProblemIsReportedAtOnce() {
        let json = """
        {
          "concurrency": 0,
          "resources": {"gpu": ["0", "1", "1"]},
          "defaults": {"budget": "-1s"},
          "tasks": [
            {"name": "a", "command": "run a", "max_runtime": "1h"},
            {"name": "b", "command": ["b"], "after": ["a", "zz"], "resources": {"gpu": 4}},
            {"name": "a", "command": ["a2"], "retries": {"max": 1, "on": ["user"]}},
            {"name": "c", "command": ["c"], "after": ["d"]},
            {"name": "d", "command": ["d"], "after": ["c"], "grace": "soon"}
          ]
        }
        """
        let problems = jobFileProblems(json)
        let expected: [[String]] = [
            ["field 'concurrency'", "less than 1"],
            ["field 'resources.gpu[2]'", "listed twice"],
            ["defaults: field 'budget'", "negative"],
            ["task 'a': field 'command'", "array"],
            ["task 'a': field 'max_runtime'", "did you mean 'max-runtime'?"],
            ["task 'b': field 'resources.gpu'", "asks for 4 slots", "has only 3"],
            ["task 'b': field 'after[1]'", "no task named 'zz'"],
            ["task 'a': field 'name'", "already the name of task #1"],
            ["task 'a': field 'retries.on[0]'", "never retried"],
            ["task 'd': field 'grace'", "'soon' is not a duration"],
            ["task 'c': field 'after'", "dependency cycle c → d → c"],
        ]
        #expect(problems.count == expected.count, "\(problems.joined(separator: "\n"))")
        for (k, mentions) in expected.enumerated() where k < problems.count {
            #expect(mentions.allSatisfy { problems[k].contains($0) }, "problem \(k): \(problems[k]) lacks \(mentions)")
        }
    }

    @Test func theErrorReadsOneProblemALinePrefixedWithThePath() {
        do {
            _ = try JobFile.parse(Array(oneTask(#""budget": "x", "grace": "y""#, top: #""concurrency": 0"#).utf8), origin: "jobs.json")
            Issue.record("accepted")
        } catch {
            let lines = error.description.split(separator: "\n")
            #expect(lines.count == 3)
            #expect(lines.allSatisfy { $0.hasPrefix("jobs.json: ") })
            #expect(lines[0] == "jobs.json: field 'concurrency': 0 is less than 1; expected how many tasks may run at once, e.g. 4")
            #expect(lines[1].hasPrefix("jobs.json: task 't': field 'budget': 'x' is not a duration; expected a duration such as 30s"))
        }
    }
}

// MARK: - Cycles

@Suite struct JobFileCycleTests {
    private func job(_ edges: [(String, [String])]) -> String {
        tasks(edges.map { name, after in
            "{\"name\": \"\(name)\", \"command\": [\"true\"], \"after\": [\(after.map { "\"\($0)\"" }.joined(separator: ", "))]}"
        }.joined(separator: ", "))
    }

    private func cycles(_ problems: [String]) -> [String] {
        problems.compactMap { line in
            guard let start = line.range(of: "dependency cycle "), let end = line.range(of: " (each waits") else { return nil }
            return String(line[start.upperBound..<end.lowerBound])
        }
    }

    @Test func aCycleIsNamedFromItsFirstTask() {
        let problems = jobFileProblems(job([("x", []), ("a", ["b"]), ("b", ["c"]), ("c", ["a", "x"]), ("after-c", ["c"])]))
        #expect(cycles(problems) == ["a → b → c → a"])
        #expect(problems.count == 1)
        #expect(problems[0].hasPrefix("task 'a': field 'after': "))
    }

    @Test func separateCyclesAreEachNamed() {
        let problems = jobFileProblems(job([("a", ["b"]), ("b", ["a"]), ("c", []), ("d", ["e"]), ("e", ["f"]), ("f", ["d"])]))
        #expect(cycles(problems) == ["a → b → a", "d → e → f → d"])
    }

    @Test func everyTaskInATangleIsOnANamedCycle() {
        // a ⇄ b ⇄ c: one strongly connected component, two shortest cycles.
        let problems = jobFileProblems(job([("a", ["b"]), ("b", ["a", "c"]), ("c", ["b"])]))
        #expect(cycles(problems) == ["a → b → a", "c → b → c"])
    }

    @Test func theShortestCycleIsNamed() {
        let problems = jobFileProblems(job([("a", ["b", "c"]), ("b", ["c"]), ("c", ["d"]), ("d", ["a"])]))
        // b is in the same knot but not on that cycle, so a cycle through b is named too.
        #expect(cycles(problems) == ["a → c → d → a", "b → c → d → a → b"])
    }

    @Test func aSelfDependencyIsNotAlsoACycle() {
        let problems = jobFileProblems(job([("a", ["a"])]))
        #expect(problems.count == 1)
        #expect(problems[0].contains("cannot wait for itself"))
    }

    @Test func aLongChainIsFineAndALongLoopIsNamed() throws {
        let n = 5000
        var edges: [(String, [String])] = [("t0", [])]
        for i in 1..<n { edges.append(("t\(i)", ["t\(i - 1)"])) }
        let chain = try JobFile.parse(Array(job(edges).utf8), origin: "chain.json")
        #expect(chain.tasks.count == n)
        edges[0] = ("t0", ["t\(n - 1)"])
        let problems = jobFileProblems(job(edges))
        #expect(problems.count == 1)
        #expect(problems.first?.contains("t0 → t\(n - 1) → t\(n - 2)") == true)
    }
}

// MARK: - Jobs built in code

@Suite struct JobFileValidateTests {
    @Test func aJobBuiltInCodeIsCheckedTheSameWay() {
        var job = JobFile(concurrency: 0, resources: ["gpu": .slots(["0"])], tasks: [
            JobTask(name: "a", command: ["a"], after: [Dependency(task: "b")], resources: ["gpu": 2]),
            JobTask(name: "b", command: ["b"], after: [Dependency(task: "a", condition: .done)]),
            JobTask(name: "b", command: ["b2"], after: [Dependency(task: "nope")]),
        ])
        do {
            try job.validate(origin: "built")
            Issue.record("accepted")
        } catch {
            #expect(error.origin == "built")
            #expect(error.problems.count == 5, "\(error.problems)")
            #expect(error.problems.contains { $0.contains("field 'concurrency'") })
            #expect(error.problems.contains { $0.contains("task 'a': field 'resources.gpu'") })
            #expect(error.problems.contains { $0.contains("already the name of task #2") })
            #expect(error.problems.contains { $0.contains("no task named 'nope'") })
            #expect(error.problems.contains { $0.contains("a → b → a") })
        }
        job.concurrency = 1
        job.tasks = [JobTask(name: "a", command: ["a"], resources: ["gpu": 1])]
        #expect(throws: Never.self) { try job.validate() }
        #expect(throws: JobFileError.self) { try JobFile(tasks: []).validate() }
    }
}

// MARK: - Files and docs

@Suite struct JobFileLoadingTests {
    @Test func loadReadsTheFileAndPlacesRelativePathsBesideIt() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobfile-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("jobs.json").path
        try oneTask(#""cwd": "data""#).write(toFile: path, atomically: true, encoding: .utf8)
        let job = try JobFile.load(path: path)
        #expect(job.tasks[0].workingDirectory == directory.path + "/data")

        do {
            _ = try JobFile.load(path: directory.path)
            Issue.record("a directory was accepted")
        } catch {
            #expect(error.problems == ["cannot read the job file: it is a directory; expected a JSON or YAML file"])
        }
    }

    @Test func aJobFileFromAPipeResolvesAgainstTheCurrentDirectory() throws {
        // `overtime batch <(generate-jobs)` reads /dev/fd/63: its "directory" means nothing.
        let pipe = Pipe()
        pipe.fileHandleForWriting.write(Data(oneTask(#""cwd": "data""#).utf8))
        try pipe.fileHandleForWriting.close()
        let job = try JobFile.load(path: "/proc/self/fd/\(pipe.fileHandleForReading.fileDescriptor)")
        #expect(job.tasks[0].workingDirectory == FileManager.default.currentDirectoryPath + "/data")
    }

    @Test func aMissingFileIsAJobFileError() {
        do {
            _ = try JobFile.load(path: "/nonexistent/jobs.json")
            Issue.record("accepted")
        } catch {
            #expect(error.origin == "/nonexistent/jobs.json")
            #expect(error.description == "/nonexistent/jobs.json: cannot open the job file: there is no such file (check the path)")
        }
    }

    /// Every ```json block of docs/jobfile.md is a complete, valid job file.
    @Test func theDocsExamplesAreValid() throws {
        let doc = try String(contentsOfFile: Checkout.path("docs/jobfile.md"), encoding: .utf8)
        let blocks = Self.fencedBlocks(in: doc, language: "json")
        #expect(blocks.count >= 3)
        for (k, block) in blocks.enumerated() {
            do {
                let job = try JobFile.parse(Array(block.utf8), origin: "docs/jobfile.md#\(k + 1)", directory: "/docs")
                #expect(!job.tasks.isEmpty)
            } catch {
                Issue.record("docs/jobfile.md, json block \(k + 1):\n\(error)")
            }
        }
    }

    /// The docs show what a file with mistakes is refused with; that file is below, and the
    /// docs must show exactly what it produces.
    @Test func theDocsErrorExampleIsWhatOvertimeSays() throws {
        let doc = try String(contentsOfFile: Checkout.path("docs/jobfile.md"), encoding: .utf8)
        let shown = Self.fencedBlocks(in: doc, language: "text").first { $0.hasPrefix("jobs.json: ") }
        let json = """
        {
          "concurrency": 0,
          "resources": {"gpu": ["0", "1", "2", "3"]},
          "tasks": [
            {"name": "train", "command": ["python3", "train.py"], "max_runtime": "1h", "budget": "-1s", "resources": {"gpu": 5}},
            {"name": "evaluate", "command": "python3 eval.py", "after": ["trian"]},
            {"name": "a", "command": ["a"], "after": ["b"]},
            {"name": "b", "command": ["b"], "after": ["c"]},
            {"name": "c", "command": ["c"], "after": ["a"]}
          ]
        }
        """
        do {
            _ = try JobFile.parse(Array(json.utf8), origin: "jobs.json")
            Issue.record("accepted")
        } catch {
            #expect(shown == error.description + "\n")
        }
    }

    static func fencedBlocks(in text: String, language: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```\(language)" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }
}
