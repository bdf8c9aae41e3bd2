import Foundation
import OvertimeTestSupport
import Testing
@testable import Overtime
@testable import OvertimeCLI

/// A task's settings are declared once, in `TaskSetting.all`; what reads the declarations
/// must agree: `overtime run`'s parser and help, the job file's fields and `defaults`, the
/// remote launcher and docs/jobfile.md.
@Suite struct TaskSettingTableTests {
    static let keys = TaskSetting.all.map(\.key)

    static func setting(_ key: String) -> TaskSetting {
        TaskSetting.all.first { $0.key == key }!
    }

    /// The settings a job file's single task gets from `fields` (a JSON object), given in
    /// the task or in `defaults`.
    static func jobSettings(_ fields: String, inDefaults: Bool = false) throws -> TaskSettings {
        let members = String(fields.dropFirst().dropLast())
        let task = #"{"name": "t", "command": ["true"]\#(members.isEmpty || inDefaults ? "" : ", " + members)}"#
        let json = #"{"resources": {"cpu": 4}, "defaults": {\#(inDefaults ? members : "")}, "tasks": [\#(task)]}"#
        return try JobFile.parse(Array(json.utf8), origin: "jobs.json").tasks[0].settings
    }

    /// `fields` without `key`.
    static func leavingOut(_ key: String, of fields: String) throws -> String {
        var object = try #require(JSONSerialization.jsonObject(with: Data(fields.utf8)) as? [String: Any])
        object[key] = nil
        return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    /// `options` without those of `setting` (and their values).
    static func leavingOut(_ setting: TaskSetting, of options: [String]) -> [String] {
        var kept: [String] = []
        var words = options[...]
        while let word = words.popFirst() {
            if let option = setting.options.first(where: { $0.name == word }) {
                if option.valueName != nil { words = words.dropFirst() }
            } else {
                kept.append(word)
            }
        }
        return kept
    }

    /// The settings `overtime run` gives its task for `options`.
    static func runSettings(_ options: [String]) throws -> TaskSettings {
        try RunCommand.parse(ArraySlice(options + ["--", "true"])).settings
    }

    /// `settings` with its memory warning as the bytes it comes to, which is how the remote
    /// launcher writes it.
    static func effective(_ settings: TaskSettings) -> TaskSettings {
        var settings = settings
        if let bytes = settings.memory.warnBytes { settings.memory.warn = .bytes(bytes) }
        return settings
    }

    @Test(arguments: keys)
    func aJobFileAndRunAgree(key: String) throws {
        let setting = Self.setting(key)
        let example = setting.example
        let fromFile = try Self.jobSettings(example.fields)
        // An example whose own field changed nothing could not show that a reader is wrong.
        #expect(fromFile != (try Self.jobSettings(try Self.leavingOut(key, of: example.fields))), "\(key)'s example sets nothing")
        guard !example.options.isEmpty else {
            #expect(setting.options.isEmpty, "\(key) has options but no example of them")
            return
        }
        var expected = fromFile
        expected.resources = [:]
        let fromOptions = try Self.runSettings(example.options)
        #expect(fromOptions == expected, "\(key): run's options and the job file's field differ")
        #expect(fromOptions != (try Self.runSettings(Self.leavingOut(setting, of: example.options))), "\(key)'s options set nothing")
    }

    @Test(arguments: keys)
    func aFieldInDefaultsIsTheTasksOwn(key: String) throws {
        let fields = Self.setting(key).example.fields
        #expect(try Self.jobSettings(fields, inDefaults: true) == (try Self.jobSettings(fields)))
    }

    /// The remote launcher's `overtime run` on another node reads back what it was given.
    @Test(arguments: keys)
    func theRemoteLauncherWritesWhatRunReads(key: String) throws {
        let example = Self.setting(key).example
        guard !example.options.isEmpty else { return }
        let settings = try Self.runSettings(example.options)
        let launcher = RemoteLauncher(prefix: ["srun", "--quiet"], overtime: "/shared/bin/overtime")
        let words = launcher.command(for: TaskSpec(name: "t", arguments: ["true"], settings: settings, pythonBridge: "/bridge"), log: "/tmp/t.log")
        let run = try #require(words.firstIndex(of: "run"))
        let read = try RunCommand.parse(words[(run + 1)...])
        #expect(Self.effective(read.settings) == Self.effective(settings), "\(key): \(words)")
        #expect(read.spec.arguments == ["true"] && read.controlStdio)
    }

    @Test func everyOptionIsInRunsHelpOnceAndRunTakesEveryOptionItsHelpNames() {
        let lines = RunCommand.help.split(separator: "\n").map { $0.drop { $0 == " " } }
        let named = lines.filter { $0.hasPrefix("--") }.map { String($0.prefix { $0 != " " }) }
        for option in TaskSetting.optionNames {
            #expect(named.count(where: { $0 == option }) == 1, "\(option) is in run's help \(named.count(where: { $0 == option })) times")
        }
        for option in named {
            // A value that may be wrong for it: only "unknown option" says the parser lacks it.
            do {
                _ = try RunCommand.parse([option, "1", "--", "true"])
            } catch let error as UsageError {
                #expect(!error.message.contains("unknown option"), "run's help names \(option): \(error.message)")
            } catch {}
        }
    }

    @Test(arguments: [
        (["--diagnose", " "], "overtime run: --diagnose needs a command"),
        (["--diagnose", "true", "--diagnose-limit", "0"], "overtime run: --diagnose-limit must be above 0"),
        (["--grace", "1x"], "overtime run: --grace: '1x' has an unknown unit 'x'; expected a duration such as 30s, 1.5s, 250ms, 5m or 1h30m"),
        (["--memory-max", "none", "--memory-warn", "50%"],
         "overtime run: --memory-warn needs a --memory-max other than none (the warning is about the cancel to come)"),
    ])
    func aBadValueIsRefusedInTheOptionsWords(options: [String], message: String) {
        do {
            _ = try Self.runSettings(options)
            Issue.record("\(options) was taken")
        } catch let error as UsageError {
            #expect(error.message == message)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func everyOptionOfTheTableHasAnExample() {
        for option in TaskSetting.optionNames {
            #expect(TaskSetting.all.contains { $0.example.options.contains(option) }, "\(option) has no example")
        }
    }

    /// docs/jobfile.md's table of task fields has a row for each, and for nothing else.
    @Test func theJobFileReferenceListsEveryField() throws {
        let text = try String(contentsOfFile: Checkout.path("docs/jobfile.md"), encoding: .utf8)
        let section = text.components(separatedBy: "\n## Tasks\n")[1].components(separatedBy: "\n#")[0]
        let rows = section.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { $0.dropFirst(3).prefix { $0 != "`" } }.map(String.init)
        let own = ["name", "command", "command-made-by", "after", "matrix", "array", "max-running", "peer-group", "stragglers"]
        #expect(Set(rows) == Set(own + Self.keys))
        #expect(rows.count == Set(rows).count)
    }
}
