// A task's name reaches the terminal on one line and with no control character in it: a
// name given with `--name` that holds one is refused, and the default name (the command's
// base name, which may hold anything) is shown with its control characters blanked out,
// while the JSON report keeps it exactly.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("CLI task names")
struct CLITaskNameTests {
    /// A terminal title set (OSC 0 … BEL), then a line that looks like overtime's own.
    static let evil = "evil\u{1B}]0;pwned\u{07}\nforged line"

    /// What no byte stream of overtime's may carry from a name: ESC, BEL, or the forged line
    /// starting a line of its own.
    static func expectClean(_ text: String, _ what: String, _ r: CLIResult) {
        #expect(!text.contains("\u{1B}"), "ESC on \(what): \(r)")
        #expect(!text.contains("\u{07}"), "BEL on \(what): \(r)")
        #expect(!text.split(separator: "\n").contains { $0.hasPrefix("forged line") }, "a forged line on \(what): \(r)")
    }

    @Test("--name with an escape sequence and a newline is refused with 125, and the refusal prints neither")
    func controlCharactersInNameAreRefused() async throws {
        let scratch = try CLIScratch()
        let marker = scratch.path("ran")
        let r = try await cliRun(["run", "--progress", "plain", "--name", Self.evil, "--",
                                  "sh", "-c", "touch '\(marker)'"], in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderr.contains("--name") && r.stderr.contains("control character"), "\(r)")
        #expect(r.stderrLines.count == 1, "one line of refusal: \(r)")
        Self.expectClean(r.stderr, "stderr", r)
        Self.expectClean(r.stdout, "stdout", r)
        #expect(!FileManager.default.fileExists(atPath: marker), "the task ran: \(r)")
    }

    /// A command whose file name is `evil`: a symlink to /bin/sh in the scratch directory.
    static func evilCommand(in scratch: CLIScratch) throws -> String {
        let path = scratch.path(evil)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/bin/sh")
        return path
    }

    @Test("the default name from a command whose file name holds an escape sequence: plain lines, notices and diagnosis notes carry none of it; the JSON report keeps it")
    func defaultNameIsShownSafely() async throws {
        let scratch = try CLIScratch()
        let command = try Self.evilCommand(in: scratch)
        // Progress, then silence: a timeout cancel, with its diagnose notes on stderr.
        let script = #"printf '{"type":"progress","completed":1,"total":2,"title":"t"}\n' >&3; sleep 30"#
        let r = try await cliRun(["run", "--progress", "plain", "--json", "--budget", "1s", "--grace", "1s",
                                  "--diagnose", "true", "--", command, "-c", script], in: scratch)
        #expect(r.status == 124, "\(r)")
        Self.expectClean(r.stderr, "stderr", r)
        // Every line on stderr is one of overtime's: a plain line, or a diagnosis note.
        let time = try Regex(#"^\d\d:\d\d:\d\d overtime: "#)
        for line in r.stderrLines {
            #expect(line.contains(time) || line.hasPrefix("overtime: "), "a line not overtime's own: \(line.debugDescription)")
        }
        for expected in ["started", "50% (1/2) t", "cancelling (timeout", "diagnosing first"] {
            #expect(r.stderr.contains(expected), "no '\(expected)': \(r)")
        }
        // JSON escapes the name; the report names the task exactly as its command is called.
        let report = try r.report()
        #expect(report["task"] as? String == Self.evil, "\(r)")
        #expect(!r.stdout.contains("\u{1B}") && !r.stdout.contains("\u{07}"), "\(r)")
    }

    @Test("a command that cannot start, its path holding an escape sequence: the failure line carries none of it, in plain and in none")
    func failureToStartIsShownSafely() async throws {
        let scratch = try CLIScratch()
        let missing = scratch.path(Self.evil + "-missing")
        for mode in ["plain", "none"] {
            let r = try await cliRun(["run", "--progress", mode, "--", missing], in: scratch)
            #expect(r.status == 127, "\(mode): \(r)")
            #expect(r.stderr.contains("not found"), "\(mode): \(r)")
            Self.expectClean(r.stderr, "stderr (\(mode))", r)
        }
    }
}
