import Foundation
import Testing
@testable import Overtime

// The pure parts of isolation: limit, nice, user and group values as users write them, on
// the command line and in job files.

@Suite struct TaskIsolationTests {
    @Test func limitValues() throws {
        #expect(try ResourceLimit.parse(.openFiles, "1024") == ResourceLimit(.openFiles, soft: 1024, hard: 1024))
        #expect(try ResourceLimit.parse(.openFiles, "256:4096") == ResourceLimit(.openFiles, soft: 256, hard: 4096))
        #expect(try ResourceLimit.parse(.processes, "64:unlimited") == ResourceLimit(.processes, soft: 64, hard: ResourceLimit.unlimited))
        #expect(try ResourceLimit.parse(.addressSpace, "4G") == ResourceLimit(.addressSpace, soft: 4 << 30, hard: 4 << 30))
        #expect(try ResourceLimit.parse(.addressSpace, "512MiB:1g").soft == 512 << 20)
        #expect(try ResourceLimit.parse(.addressSpace, "4096").hard == 4096)
        #expect(try ResourceLimit.parse(.cpuSeconds, "1h30m") == ResourceLimit(.cpuSeconds, soft: 5400, hard: 5400))
        #expect(try ResourceLimit.parse(.cpuSeconds, "1.2s").soft == 2, "CPU time rounds up to whole seconds")
        #expect(try ResourceLimit.parse(.cpuSeconds, "90:100") == ResourceLimit(.cpuSeconds, soft: 90, hard: 100))
        #expect(try ResourceLimit.parse(.openFiles, "infinity").soft == ResourceLimit.unlimited)
    }

    @Test(arguments: [
        (ResourceLimit.Resource.openFiles, "-1"), (.openFiles, "1.5"), (.openFiles, ""), (.openFiles, "1:2:3"),
        (.openFiles, "10:5"), (.processes, "many"), (.addressSpace, "4X"), (.addressSpace, "0"),
        (.addressSpace, "99999999999T"), (.cpuSeconds, "0"), (.cpuSeconds, "-5s"), (.cpuSeconds, "soon"),
    ])
    func badLimitValues(resource: ResourceLimit.Resource, text: String) {
        #expect(throws: TaskIsolation.ParseError.self) { try ResourceLimit.parse(resource, text) }
    }

    @Test func niceValues() throws {
        #expect(try TaskIsolation.parseNiceness("-20") == -20)
        #expect(try TaskIsolation.parseNiceness("19") == 19)
        #expect(try TaskIsolation.parseNiceness(" 5 ") == 5)
        for bad in ["20", "-21", "x", "", "1.5"] {
            #expect(throws: TaskIsolation.ParseError.self, "\(bad)") { try TaskIsolation.parseNiceness(bad) }
        }
    }

    @Test func accounts() throws {
        let root = try Account.lookUp("root")
        #expect(root.uid == 0 && root.primaryGroupID == 0 && root.name == "root" && root.home == "/root")
        #expect(try Account.lookUp("0") == root, "a uid finds the same account")
        let bare = try Account.lookUp("4000000")
        #expect(bare == Account(name: nil, uid: 4_000_000, primaryGroupID: 4_000_000, home: nil), "an unlisted uid stands alone")
        #expect(throws: TaskIsolation.ParseError.self) { try Account.lookUp("no-such-user-here") }
        #expect(throws: TaskIsolation.ParseError.self) { try Account.lookUp("") }
        #expect(try TaskIsolation.lookUpGroup("root") == 0)
        #expect(try TaskIsolation.lookUpGroup("4000000") == 4_000_000)
        #expect(throws: TaskIsolation.ParseError.self) { try TaskIsolation.lookUpGroup("no-such-group-here") }
        // (uid_t)-1 tells setresuid "no change": a task asked to run as it would stay root.
        #expect(throws: TaskIsolation.ParseError.self) { try Account.lookUp("4294967295") }
        #expect(throws: TaskIsolation.ParseError.self) { try TaskIsolation.lookUpGroup("4294967295") }
    }

    /// What the account lookups refuse, as cases: a caller tells an unknown name from an
    /// empty one or the reserved id without reading the words.
    @Test func accountRefusalsAreCases() {
        #expect(throws: TaskIsolation.ParseError.notFound(.user, "no-such-user-here", localFilesOnly: false)) {
            try Account.lookUp(" no-such-user-here ")
        }
        #expect(throws: TaskIsolation.ParseError.emptyName(.user)) { try Account.lookUp("") }
        #expect(throws: TaskIsolation.ParseError.reservedID(.user, "4294967295")) { try Account.lookUp("4294967295") }
        #expect(throws: TaskIsolation.ParseError.notFound(.group, "no-such-group-here", localFilesOnly: false)) {
            try TaskIsolation.lookUpGroup("no-such-group-here")
        }
        #expect(throws: TaskIsolation.ParseError.emptyName(.group)) { try TaskIsolation.lookUpGroup(" ") }
        #expect(throws: TaskIsolation.ParseError.reservedID(.group, "4294967295")) { try TaskIsolation.lookUpGroup("4294967295") }
    }

    @Test func accountEnvironment() throws {
        let root = TaskIsolation(user: try Account.lookUp("root"))
        #expect(root.accountEnvironment == ["HOME": "/root", "USER": "root", "LOGNAME": "root"])
        #expect(TaskIsolation(user: Account(name: nil, uid: 4_000_000, primaryGroupID: 4_000_000, home: nil)).accountEnvironment == ["HOME": "/"],
                "an unlisted uid never keeps the supervisor's home")
        #expect(root.effectiveGroupID == 0)
        #expect(TaskIsolation(user: try Account.lookUp("root"), groupID: 7).effectiveGroupID == 7)
    }

    @Test func jobFileFields() throws {
        let json = """
        {"defaults": {"user": "root", "limits": {"nofile": 64, "as": "1G"}, "nice": 4, "clean-env": true},
         "tasks": [
           {"name": "a", "command": ["true"], "limits": {"nofile": "32:48", "cpu": 90}, "group": 0},
           {"name": "b", "command": ["true"], "user": 4000000, "nice": -2, "clean-env": false}
         ]}
        """
        let file = try JobFile.parse(Array(json.utf8), origin: "jobs.json")
        let a = try #require(file.task(named: "a")), b = try #require(file.task(named: "b"))
        #expect(a.isolation.user?.name == "root" && a.isolation.groupID == 0 && a.isolation.niceness == 4)
        #expect(Set(a.isolation.limits.map(\.resource)) == [.openFiles, .addressSpace, .cpuSeconds])
        #expect(a.isolation.limits.first { $0.resource == .openFiles } == ResourceLimit(.openFiles, soft: 32, hard: 48))
        #expect(a.isolation.limits.first { $0.resource == .cpuSeconds }?.hard == 90)
        #expect(!a.inheritEnvironment)
        #expect(b.isolation.user?.uid == 4_000_000 && b.isolation.niceness == -2 && b.inheritEnvironment)
        #expect(b.isolation.limits.first { $0.resource == .openFiles }?.soft == 64, "defaults' limits stay when a task sets none")
    }

    @Test func jobFileMistakes() {
        let json = """
        {"tasks": [{"name": "t", "command": ["true"], "user": "no-such-user-here", "group": [1], "nice": 30,
                    "limits": {"memory": "1G", "nofile": "x", "cpu": true}, "clean-env": "yes"},
                   {"name": "u", "command": ["true"], "limits": 5, "ulimit": {}}]}
        """
        do {
            _ = try JobFile.parse(Array(json.utf8), origin: "jobs.json")
            Issue.record("accepted")
        } catch {
            let expected = [
                "task 't': field 'user': no such user: no-such-user-here",
                "task 't': field 'group': expected a string or a whole number, e.g. \"nogroup\" or 65534, got an array",
                "task 't': field 'nice': '30' is not a nice value",
                "task 't': field 'limits.memory' is not a resource Overtime limits; did you mean 'as'?",
                "task 't': field 'limits.nofile': 'x' is not a limit",
                "task 't': field 'limits.cpu': expected a string or a whole number",
                "task 't': field 'clean-env': expected true or false, got \"yes\"",
                "task 'u': field 'limits': expected an object of resource limits",
                "task 'u': field 'ulimit' is not a field of a task; did you mean 'limits'?",
            ]
            #expect(error.problems.count == expected.count, "\(error.problems)")
            for (problem, start) in zip(error.problems, expected) {
                #expect(problem.hasPrefix(start), "\(problem)")
            }
        }
    }
}
