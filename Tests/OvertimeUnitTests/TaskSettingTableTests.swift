import Foundation
import OvertimeTestSupport
import Testing
@testable import Overtime
@testable import OvertimeCLI

/// A task's settings are declared once, in `TaskSetting.all`; what reads the declarations
/// must agree: `overtime run`'s parser and help, the job file's fields, the remote launcher
/// and docs/jobfile.md.
@Suite struct TaskSettingTableTests {
    static let keys = TaskSetting.all.map(\.key)

    static func setting(_ key: String) -> TaskSetting {
        TaskSetting.all.first { $0.key == key }!
    }

    /// The settings a job file's single task gets from `fields` (a JSON object's members).
    static func jobSettings(_ fields: String) throws -> TaskSettings {
        var members = String(fields.dropFirst().dropLast())
        if !members.isEmpty { members = ", " + members }
        let json = #"{"resources": {"cpu": 4}, "tasks": [{"name": "t", "command": ["true"]\#(members)}]}"#
        return try JobFile.parse(Array(json.utf8), origin: "jobs.json").tasks[0].settings
    }

    /// The settings `overtime run` gives its task for `options`. Its spec holds the bundled
    /// bridge's directory, which a test build has none of: the setting itself is compared.
    static func runSettings(_ options: [String]) throws -> TaskSettings {
        let command = try RunCommand.parse(ArraySlice(options + ["--", "true"]))
        var settings = command.spec.settings
        if let i = options.lastIndex(of: "--python-bridge") {
            settings.pythonBridge = try TaskSetting.onOff(options[i + 1])
        } else {
            settings.pythonBridge = true
        }
        return settings
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
        let example = Self.setting(key).example
        let fromFile = try Self.jobSettings(example.fields)
        // An example that changed nothing could not show that a reader is wrong.
        #expect(fromFile != TaskSettings(), "\(key)'s example sets nothing")
        guard !example.options.isEmpty else {
            #expect(Self.setting(key).options.isEmpty, "\(key) has options but no example of them")
            return
        }
        var expected = fromFile
        expected.resources = [:]
        #expect(try Self.runSettings(example.options) == expected, "\(key): run's options and the job file's field differ")
    }

    /// What the remote launcher writes, `overtime run` on the node reads back to the same.
    @Test(arguments: keys)
    func theRemoteLauncherWritesWhatRunReads(key: String) throws {
        let example = Self.setting(key).example
        guard !example.options.isEmpty else { return }
        let settings = try Self.runSettings(example.options)
        let words = TaskSetting.options(for: settings)
        #expect(Self.effective(try Self.runSettings(words)) == Self.effective(settings), "\(key): \(words)")
    }

    @Test func everyOptionIsInRunsHelpOnceAndTheHelpNamesNoOtherOptions() {
        let lines = RunCommand.help.split(separator: "\n").map { $0.drop { $0 == " " } }
        let named = lines.filter { $0.hasPrefix("--") }.map { String($0.prefix { $0 != " " }) }
        for option in TaskSetting.optionNames {
            #expect(named.count(where: { $0 == option }) == 1, "\(option) is in run's help \(named.count(where: { $0 == option })) times")
        }
        for option in named {
            #expect(RunCommand.knownOptions.contains(option), "run's help names \(option), which it does not take")
        }
    }

    @Test func runTakesEveryOptionOfTheTable() {
        for setting in TaskSetting.all where !setting.example.options.isEmpty {
            #expect(throws: Never.self, "\(setting.key)") { _ = try RunCommand.parse(ArraySlice(setting.example.options + ["--", "true"])) }
        }
        for option in TaskSetting.optionNames {
            #expect(RunCommand.knownOptions.contains(option))
            #expect(TaskSetting.all.contains { $0.example.options.contains(option) } || option.hasPrefix("--limit-"),
                    "\(option) has no example")
        }
    }

    @Test func aJobFileTakesEveryKeyInATaskAndInDefaults() throws {
        for setting in TaskSetting.all {
            let members = String(setting.example.fields.dropFirst().dropLast())
            let json = #"{"resources": {"cpu": 4}, "defaults": {\#(members)}, "tasks": [{"name": "t", "command": ["true"]}]}"#
            #expect(throws: Never.self, "\(setting.key) in defaults") { _ = try JobFile.parse(Array(json.utf8), origin: "jobs.json") }
        }
    }

    /// docs/jobfile.md's table of task fields has a row for each, and for nothing else.
    @Test func theJobFileReferenceListsEveryField() throws {
        let text = try String(contentsOfFile: Checkout.path("docs/jobfile.md"), encoding: .utf8)
        let section = text.components(separatedBy: "\n## Tasks\n")[1].components(separatedBy: "\n#")[0]
        let rows = section.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { $0.dropFirst(3).prefix { $0 != "`" } }.map(String.init)
        let own = ["name", "command", "command-made-by", "after"]
        #expect(Set(rows) == Set(own + Self.keys))
        #expect(rows.count == Set(rows).count)
    }
}
