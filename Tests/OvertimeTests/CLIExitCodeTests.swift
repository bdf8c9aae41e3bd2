// `overtime run` exit codes (DESIGN §4) and the command line itself: usage errors, --help,
// --version. Every test runs the built binary.

import Foundation
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI exit codes")
struct CLIExitCodeTests {
    @Test("a child's own exit code passes through", arguments: [0, 1, 2, 3, 42, 100, 123, 124, 125, 126, 127, 128, 137, 143, 200, 254, 255])
    func ownExitCode(code: Int) async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--", "sh", "-c", "exit \(code)"], in: scratch)
        #expect(r.status == Int32(code), "\(r)")
        #expect(!r.diedOfSignal, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("an exit code in the --json report matches the process exit code", arguments: [0, 7, 255])
    func ownExitCodeInReport(code: Int) async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--", "sh", "-c", "exit \(code)"], in: scratch)
        #expect(r.status == Int32(code), "\(r)")
        let report = try r.report()
        #expect(CLIJSON.int(report["exit_code"]) == code, "\(r)")
        #expect(report["status"] as? String == "exited", "\(r)")
        #expect(CLIJSON.int(report["code"]) == code, "\(r)")
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        #expect(CLIJSON.bool(report["killed"]) == false, "\(r)")
    }

    @Test("death by a signal Overtime did not send is 128+N",
          arguments: [("SEGV", SIGSEGV), ("USR1", SIGUSR1), ("TERM", SIGTERM), ("KILL", SIGKILL), ("HUP", SIGHUP)])
    func foreignSignal(name: String, number: Int32) async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--budget", "30s", "--", "sh", "-c", "kill -\(name) $$; sleep 5"], in: scratch)
        #expect(r.status == 128 + number, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.int(report["exit_code"]) == Int(128 + number), "\(r)")
        #expect(report["status"] as? String == "signaled", "\(r)")
        #expect(report["signal"] as? String == "SIG\(name)", "\(r)")
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        #expect(CLIJSON.bool(report["killed"]) == false, "a SIGKILL Overtime did not send is not 'killed'. \(r)")
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("a command that is not found exits 127 and says so")
    func commandNotFound() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--", "nosuch-command-xyz", "arg"], in: scratch)
        #expect(r.status == 127, "\(r)")
        #expect(r.stderr.contains("command not found"), "\(r)")
        #expect(r.stderr.contains("nosuch-command-xyz"), "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
    }

    @Test("a missing path exits 127; --json reports failed-to-start")
    func missingPathReport() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--", "./no/such/file"], in: scratch)
        #expect(r.status == 127, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.int(report["exit_code"]) == 127, "\(r)")
        #expect(report["status"] as? String == "failed-to-start", "\(r)")
    }

    @Test("a file that is not executable exits 126")
    func notExecutable() async throws {
        let scratch = try CLIScratch()
        let path = try scratch.write("plain.sh", "#!/bin/sh\nexit 0\n", mode: 0o644)
        let r = try await cliRun(["run", "--", path], in: scratch)
        #expect(r.status == 126, "\(r)")
        #expect(r.stderr.contains(path), "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
    }

    @Test("a directory as the command exits 126 and says it is a directory")
    func directoryAsCommand() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--", scratch.url.path], in: scratch)
        #expect(r.status == 126, "\(r)")
        #expect(r.stderr.contains("\(scratch.url.path): is a directory"), "\(r)")
    }

    @Test("--help exits 0 with usage on stdout", arguments: [["run", "--help"], ["run", "-h"], ["help", "run"]])
    func runHelp(arguments: [String]) async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(arguments, in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("Usage: overtime run"), "\(r)")
        #expect(r.stdout.contains("--budget"), "\(r)")
        #expect(r.stdout.contains("--preserve-status"), "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
    }

    @Test("overtime --help exits 0 with usage on stdout")
    func topLevelHelp() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["--help"], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("Usage: overtime"), "\(r)")
        #expect(r.stdout.contains("run"), "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
    }

    /// The checkout's VERSION file, the one place the version is written.
    static let checkoutVersion = (try? String(contentsOfFile: Checkout.path("VERSION"), encoding: .utf8))?
        .trimmingCharacters(in: .whitespacesAndNewlines)

    @Test("--version prints the VERSION file's version and the commit it was built from, and exits 0", arguments: ["--version", "version"])
    func version(flag: String) async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun([flag], in: scratch)
        #expect(r.status == 0, "\(r)")
        let version = try #require(Self.checkoutVersion)
        let line = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasPrefix("overtime \(version) (commit "), "\(r)")
        #expect(line.range(of: #"\(commit ([0-9a-f]{12}(-dirty)?|unknown)\)$"#, options: .regularExpression) != nil, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
    }
}

/// One bad command line: what to pass, and words the one-line error must contain.
struct CLIUsageCase: Sendable, CustomTestStringConvertible {
    var arguments: [String]
    var mentions: [String]
    var testDescription: String { arguments.map { $0.isEmpty ? "''" : $0 }.joined(separator: " ") }
}

@Suite("CLI usage errors")
struct CLIUsageErrorTests {
    static let cases: [CLIUsageCase] = [
        CLIUsageCase(arguments: ["--budget", "-1s"], mentions: ["--budget", "-1s"]),
        CLIUsageCase(arguments: ["--budget", "abc"], mentions: ["--budget", "abc"]),
        CLIUsageCase(arguments: ["--budget", "1e400"], mentions: ["--budget", "1e400"]),
        CLIUsageCase(arguments: ["--budget", ""], mentions: ["--budget"]),
        CLIUsageCase(arguments: ["--budget=-5"], mentions: ["--budget"]),
        CLIUsageCase(arguments: ["--grace", "none"], mentions: ["--grace", "none"]),
        CLIUsageCase(arguments: ["--window", "-2s"], mentions: ["--window", "-2s"]),
        CLIUsageCase(arguments: ["--max-runtime", "5x"], mentions: ["--max-runtime"]),
        CLIUsageCase(arguments: ["--budgt", "1s"], mentions: ["--budgt", "did you mean --budget"]),
        CLIUsageCase(arguments: ["--grace-period", "1s"], mentions: ["--grace-period"]),
        CLIUsageCase(arguments: ["--progress", "bogus"], mentions: ["--progress", "bogus"]),
        CLIUsageCase(arguments: ["--json=yes"], mentions: ["--json"]),
        // The value forgotten before `--`: not taken from it.
        CLIUsageCase(arguments: ["--user"], mentions: ["--user", "before '--'"]),
        CLIUsageCase(arguments: ["--name"], mentions: ["--name", "before '--'"]),
        CLIUsageCase(arguments: ["--limit-nofile", "lots"], mentions: ["--limit-nofile", "lots"]),
        CLIUsageCase(arguments: ["--nice", "99"], mentions: ["--nice", "99"]),
        CLIUsageCase(arguments: ["--group", "no-such-group-here"], mentions: ["--group", "no-such-group-here"]),
    ]

    @Test("a bad option exits 125 with one line naming it, and runs nothing", arguments: cases)
    func badOption(_ usage: CLIUsageCase) async throws {
        let scratch = try CLIScratch()
        let marker = scratch.path("ran")
        let r = try await cliRun(["run"] + usage.arguments + ["--", "sh", "-c", "touch '\(marker)'"], in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderrLines.count == 1, "one line of error, got: \(r)")
        for word in usage.mentions {
            #expect(r.stderr.contains(word), "the error should mention \(word): \(r)")
        }
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(!FileManager.default.fileExists(atPath: marker), "the command must not run on a usage error")
    }

    @Test("a missing command exits 125 with one line", arguments: [["run"], ["run", "--budget", "1s"], ["run", "--budget", "1s", "--"]])
    func missingCommand(arguments: [String]) async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(arguments, in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderrLines.count == 1, "\(r)")
        #expect(r.stderr.contains("command"), "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
    }

    @Test("an option missing its value exits 125 naming it")
    func missingValue() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--budget"], in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderrLines.count == 1, "\(r)")
        #expect(r.stderr.contains("--budget"), "\(r)")
    }

    @Test("an unknown command exits 125 and suggests the close one")
    func unknownCommand() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["runn", "--", "true"], in: scratch)
        #expect(r.status == 125, "\(r)")
        #expect(r.stderrLines.count == 1, "\(r)")
        #expect(r.stderr.contains("runn"), "\(r)")
        #expect(r.stderr.contains("did you mean run"), "\(r)")
    }
}
