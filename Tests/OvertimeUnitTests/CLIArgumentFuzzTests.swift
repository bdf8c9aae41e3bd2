import Foundation
import OvertimeTestSupport
import Testing
@testable import OvertimeCLI

// Any command line gets a command or a usage error (or help), never a crash: random
// sequences of the real options, values of every kind (good, bad, empty, huge, `--`,
// control characters) and words, fed to each parser in-process, deterministically.

@Suite struct CLIArgumentFuzzTests {
    static let values = ["", "0", "-1", "1s", "30s", "1h30m", "none", "1e400", "9999999999999999999", "abc", "--", "-",
                         "4G", "1024:4096", "unlimited", "root", "0:0", "nobody", "20", "-20", "x=y", "=x", "A=", "plain",
                         "json", "tty", "auto", "\u{1B}[31m", "a\nb", String(repeating: "9", count: 400), "/tmp", "train",
                         "status", "watch", "cancel", "extend", "revoke", "list", "10m", "--past-max", "true", "sh"]

    static func commandLine(options: [String], _ dice: inout TestDice) -> [String] {
        var words: [String] = []
        for _ in 0..<dice.roll(8) {
            switch dice.roll(6) {
            case 0, 1, 2:
                let option = options[dice.roll(options.count)]
                if dice.roll(4) == 0 { words.append(option + "=" + values[dice.roll(values.count)]) } else { words.append(option) }
            default:
                words.append(values[dice.roll(values.count)])
            }
        }
        return words
    }

    @Test func runBatchAndCtlParseAnyCommandLine() async {
        var dice = TestDice(state: 6)
        var outcomes = [0, 0, 0]  // parsed, usage error, help
        for round in 0..<6_000 {
            // Other tests share this process's few threads: do not hold one for long.
            if round % 50 == 0 { await Task.yield() }
            let which = round % 3
            let options = [RunCommand.knownOptions, BatchCommand.knownOptions, ["--socket", "--json", "--past-max"]][which]
            let words = ArraySlice(Self.commandLine(options: options + ["-h"], &dice))
            do {
                switch which {
                case 0: _ = try RunCommand.parse(words)
                case 1: _ = try BatchCommand.parse(words)
                default: _ = try CtlCommand.parse(words)
                }
                outcomes[0] += 1
            } catch let error as UsageError {
                outcomes[1] += 1
                #expect(!error.message.isEmpty && error.message.hasPrefix("overtime"), "round \(round) \(Array(words)): \(error.message)")
            } catch is HelpRequest {
                outcomes[2] += 1
            } catch {
                Issue.record("round \(round) \(Array(words)): an error of another kind: \(error)")
            }
        }
        #expect(outcomes[0] > 100 && outcomes[1] > 1000, "parsed, refused, help: \(outcomes)")
    }

    @Test func reportParsesAnyCommandLine() {
        var dice = TestDice(state: 15)
        var parsed = 0
        for round in 0..<2_000 {
            let words = ArraySlice(Self.commandLine(options: ReportCommand.knownOptions, &dice))
            do {
                let command = try ReportCommand.parse(words)
                #expect(!command.runDirectory.isEmpty || words.contains(""), "round \(round) \(Array(words))")
                parsed += 1
            } catch let error as UsageError {
                #expect(error.message.hasPrefix("overtime report: "), "round \(round) \(Array(words)): \(error.message)")
            } catch is HelpRequest {
            } catch {
                Issue.record("round \(round) \(Array(words)): an error of another kind: \(error)")
            }
        }
        #expect(parsed > 50, "parsed \(parsed) of 2,000")
    }
}
