import Foundation
import OvertimeProtocol
import Synchronization
import OvertimeTestSupport
import Testing
@testable import Overtime

/// The OvertimeWorker library inside the example workers, under the real supervisor.
@Suite struct SwiftWorkerTests {
    /// An example worker built beside the `overtime` binary.
    static func worker(_ name: String) -> String {
        URL(fileURLWithPath: CLIBinary.path).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// What a task wrote on its standard error, kept for a test to read.
    final class StandardError: Sendable {
        private let bytes = Mutex<[UInt8]>([])
        func append(_ more: [UInt8]) { bytes.withLock { $0 += more } }
        var text: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }
    }

    func run(_ arguments: [String], policy: BudgetPolicy, memory: MemoryPolicy = .none, cancelAfterReady: CancelReason? = nil,
             log: SupervisorTests.EventLog = .init(), stderr: StandardError? = nil) async throws -> (TaskOutcome, String) {
        let supervisor = try Supervisor { log.append($0) }
        defer { supervisor.shutdown() }
        let stdout = Mutex<[UInt8]>([])
        var spec = TaskSpec(arguments: arguments, policy: policy, stdin: .null,
                            stdout: .capture { bytes in stdout.withLock { $0 += bytes } },
                            stderr: stderr.map { kept in .capture { kept.append($0) } } ?? .discard)
        spec.memory = memory
        let task = supervisor.spawn(spec)
        if let reason = cancelAfterReady {
            // Cancel once the worker has reported progress: it is inside its handler scope.
            let clock = ContinuousClock()
            let end = clock.now + .seconds(10)
            while clock.now < end, !log.kinds.contains(where: { if case .progress = $0 { true } else { false } }) {
                try await Task.sleep(for: .milliseconds(20))
            }
            await task.cancel(reason: reason)
        }
        let outcome = await task.outcome
        return (outcome, String(decoding: stdout.withLock { $0 }, as: UTF8.self))
    }

    func ledger(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map { String($0.split(separator: " ").first ?? "") }
    }

    @Test func uploadFileOutlivesItsBudgetOnProgressAndReturnsItsResult() async throws {
        let (outcome, output) = try await run([Self.worker("upload-file"), "--chunks", "40", "--chunk-ms", "60"],
                                              policy: BudgetPolicy(budget: .seconds(1), grace: .seconds(2)))
        #expect(outcome.succeeded, "\(outcome)")
        #expect(outcome.elapsed > .seconds(1), "it must have outlived its 1 s budget")
        #expect(outcome.result == .string("Upload complete!"))
        #expect(outcome.lastProgress?.completed == 40 && outcome.lastProgress?.total == 40)
        #expect(outcome.lastProgress?.title == "Uploading file")
        #expect(output.contains("Upload complete!"))
    }

    @Test func aWorkerThatInheritedNoFd3ReportsOnTheTaskSocket() async throws {
        // Behind a shell that closes fd 3 (and does not exec it), the worker is the task's
        // grandchild with no channel of its own: it connects to OVERTIME_SOCKET.
        let script = "\(Self.worker("upload-file")) --chunks 40 --chunk-ms 60 3>&-; exit $?"
        let (outcome, output) = try await run(["/bin/sh", "-c", script], policy: BudgetPolicy(budget: .seconds(1), grace: .seconds(2)))
        #expect(outcome.succeeded, "its progress kept the task alive past its 1 s budget: \(outcome)")
        #expect(outcome.result == .string("Upload complete!"), "\(outcome)")
        #expect(outcome.lastProgress?.completed == 40, "\(outcome)")
        #expect(output.contains("Upload complete!"))
    }

    @Test func aWorkerSaysItsRankAsItsReporterName() async throws {
        // Under torchrun every rank has RANK: its reports are told apart by it.
        let (outcome, _) = try await run(["/usr/bin/env", "RANK=3", Self.worker("upload-file"), "--chunks", "5", "--chunk-ms", "20"],
                                         policy: BudgetPolicy(budget: .seconds(10), grace: .seconds(2)))
        #expect(outcome.succeeded, "\(outcome)")
        #expect(outcome.lastProgress?.reporter == "rank 3", "\(outcome)")
    }

    @Test func uploadFileStopsAtTheNextChunkWhenCancelled() async throws {
        let (outcome, _) = try await run([Self.worker("upload-file"), "--chunks", "1000", "--chunk-ms", "20"],
                                         policy: BudgetPolicy(budget: .seconds(30), grace: .seconds(5)),
                                         cancelAfterReady: .user)
        #expect(outcome.cancelReason == .user)
        #expect(outcome.termination == .exited(1), "it unwinds and exits by itself within grace: \(outcome)")
        #expect(!outcome.killed)
        #expect((outcome.lastProgress?.completed ?? 1000) < 1000)
    }

    @Test func paymentRollsBackOnTimeout() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("ledger")
        let (outcome, _) = try await run([Self.worker("process-payment"), "--ledger", path, "--step-ms", "3000"],
                                         policy: BudgetPolicy(budget: .seconds(1), grace: .seconds(5)))
        #expect(outcome.cancelReason == .timeout)
        #expect(outcome.exitCode == 124 && !outcome.killed, "\(outcome)")
        #expect(ledger(path) == ["rollback"], "\(ledger(path))")
    }

    @Test func paymentCancelsWhenAUserCancels() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("ledger")
        let (outcome, _) = try await run([Self.worker("process-payment"), "--ledger", path, "--step-ms", "3000"],
                                         policy: BudgetPolicy(budget: .seconds(30), grace: .seconds(5)),
                                         cancelAfterReady: .user)
        #expect(outcome.cancelReason == .user && !outcome.killed, "\(outcome)")
        // A loaded machine may let the first step finish before the cancel lands; what
        // matters is that the user's cancel cancelled (and neither rolled back nor completed).
        let kinds = ledger(path)
        #expect(kinds.last == "cancel" && !kinds.contains("rollback") && !kinds.contains("complete"), "\(kinds)")
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("user_cancelled"))
    }

    @Test func paymentCompletesWithFractionalProgress() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("ledger")
        let log = SupervisorTests.EventLog()
        let (outcome, output) = try await run([Self.worker("process-payment"), "--ledger", path, "--step-ms", "200", "--amount", "9.99"],
                                              policy: BudgetPolicy(budget: .seconds(10)), log: log)
        #expect(outcome.succeeded, "\(outcome)")
        #expect(ledger(path) == ["initiate", "authorize", "process", "complete"])
        #expect(outcome.result == .string("Payment of 9.99 processed successfully"))
        #expect(outcome.lastProgress?.fraction == 1.0 && outcome.lastProgress?.detail == "Payment complete")
        #expect(output.contains("processed successfully"))
        let fractions = log.kinds.compactMap { if case let .progress(p, _) = $0 { p.fraction } else { nil } }
        #expect(fractions.contains(0.3) || fractions.contains(0.7), "fractional steps reported: \(fractions)")
    }

    @Test func requestExtensionIsGrantedAndKeepsASilentStepAlive() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("ledger")
        // Steps of 1.2 s under a 1 s budget would time out; the extension asks for 6 s.
        let (outcome, _) = try await run([Self.worker("process-payment"), "--ledger", path, "--step-ms", "1200", "--extend", "6"],
                                         policy: BudgetPolicy(budget: .seconds(1), grace: .seconds(2)))
        #expect(outcome.succeeded, "\(outcome)")
        #expect(ledger(path).first == "extension")
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("granted=true"))
    }

    @Test func onExpiringRunsBeforeTheDeadline() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("ledger")
        let (outcome, _) = try await run([Self.worker("process-payment"), "--ledger", path, "--step-ms", "5000"],
                                         policy: BudgetPolicy(budget: .seconds(2), grace: .seconds(3), warnBefore: .seconds(1)))
        #expect(outcome.cancelReason == .timeout)
        #expect(ledger(path) == ["expiring", "rollback"], "\(ledger(path))")
    }

    /// The numbers upload-file's memory-warning handler printed (`… memory warning, USED of
    /// LIMIT bytes: read-ahead cut from BEFORE to AFTER MiB`), or nil when it printed none.
    func memoryWarningLine(_ stderr: String) -> (used: UInt64, limit: UInt64, before: Int, after: Int)? {
        guard let line = stderr.split(separator: "\n").first(where: { $0.contains("memory warning, ") }) else { return nil }
        let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { UInt64($0) }
        guard numbers.count == 4 else { return nil }
        return (numbers[0], numbers[1], Int(numbers[2]), Int(numbers[3]))
    }

    @Test func onMemoryWarningHearsTheWarningAndTheUploadGoesOnWithLessReadAhead() async throws {
        // 64 MiB read ahead passes a 32 MiB warning level far below the 1 GiB max: the
        // handler halves the read-ahead and the upload finishes, never cancelled.
        let stderr = StandardError()
        let log = SupervisorTests.EventLog()
        let (outcome, output) = try await run([Self.worker("upload-file"), "--chunks", "40", "--chunk-ms", "50", "--read-ahead-mb", "64"],
                                              policy: BudgetPolicy(budget: .seconds(10)),
                                              memory: MemoryPolicy(max: 1 << 30, warn: .bytes(32 << 20)), log: log, stderr: stderr)
        #expect(outcome.succeeded && outcome.cancelReason == nil, "\(outcome)\n\(stderr.text)")
        #expect(output.contains("Upload complete!"))
        let warning = try #require(memoryWarningLine(stderr.text), "the handler ran: \(stderr.text)")
        #expect(warning.limit == 1 << 30, "the limit is the max, where the task would be cancelled")
        #expect(warning.used >= 32 << 20 && warning.used < 1 << 30, "\(warning.used)")
        #expect(warning.before == 64 && warning.after == 32)
        let sent = log.kinds.compactMap { if case let .memoryWarning(used, limit) = $0 { (used, limit) } else { nil } }
        #expect(sent.count == 1 && sent.first?.0 == warning.used && sent.first?.1 == warning.limit,
                "the handler got what the supervisor sent, once: \(sent)")
        // Worker.memoryWarning keeps it for the program to read later.
        #expect(stderr.text.contains("finished after a memory warning at \(warning.used) of \(warning.limit) bytes, with 32 MiB read ahead"),
                "\(stderr.text)")
    }

    @Test func aMemoryCancelReachesTheWorkerAsMemory() async throws {
        // 56 MiB read ahead passes a 48 MiB max, with the warning at the max itself: warning
        // and cancel come from the same sample, so the handler's halving cannot save it.
        // It stays below the memory cgroup's hard limit (48 + 32 MiB), where the kernel
        // would kill the burst before the watchdog's next sample. The upload unwinds at its
        // next chunk and exits within grace.
        let stderr = StandardError()
        let (outcome, _) = try await run([Self.worker("upload-file"), "--chunks", "200", "--chunk-ms", "50", "--read-ahead-mb", "56"],
                                         policy: BudgetPolicy(budget: .seconds(30), grace: .seconds(5)),
                                         memory: MemoryPolicy(max: 48 << 20, warn: .share(1)), stderr: stderr)
        #expect(outcome.cancelReason == .memory, "\(outcome)\n\(stderr.text)")
        #expect(outcome.exitCode == 124 && !outcome.killed, "a memory cancel exits like a timeout: \(outcome)")
        #expect(stderr.text.contains("upload stopped (memory)"), "the worker knew why: \(stderr.text)")
        #expect((outcome.lastProgress?.completed ?? 0) < 200)
    }

    @Test func aStragglerCancelReachesTheWorkerAsStraggler() async throws {
        // A reason the worker did not know was dropped, and the SIGTERM after it read as a
        // shutdown.
        let stderr = StandardError()
        let (outcome, _) = try await run([Self.worker("upload-file"), "--chunks", "1000", "--chunk-ms", "20"],
                                         policy: BudgetPolicy(budget: .seconds(30), grace: .seconds(5)),
                                         cancelAfterReady: .straggler, stderr: stderr)
        #expect(outcome.cancelReason == .straggler && !outcome.killed, "\(outcome)")
        #expect(stderr.text.contains("upload stopped (straggler)"), "the worker knew why: \(stderr.text)")
    }

    /// The phases the task entered, in order, with the window each brought in force.
    func phases(_ log: SupervisorTests.EventLog) -> [String] {
        log.kinds.compactMap { if case let .phase(name, window) = $0 { "\(name) \(window.map { "\($0)" } ?? "-")" } else { nil } }
    }

    @Test func aPhaseWithItsOwnWindowKeepsASilentHashAliveAndThenTheUploadsWindowRules() async throws {
        // 2.5 s of silence under a 1 s budget: the phase `hash` brings its own 60 s window.
        let log = SupervisorTests.EventLog()
        let (outcome, output) = try await run([Self.worker("upload-file"), "--chunks", "10", "--chunk-ms", "50", "--hash-ms", "2500"],
                                              policy: BudgetPolicy(budget: .seconds(1), grace: .seconds(2)), log: log)
        #expect(outcome.succeeded && outcome.cancelReason == nil, "\(outcome)")
        #expect(outcome.elapsed > .milliseconds(2500))
        #expect(output.contains("Upload complete!"))
        #expect(phases(log) == ["hash 60.0 seconds", "main 1.0 seconds"], "back in `main` after the scope: \(phases(log))")
    }

    @Test func aScopedPhaseGoesBackWhenItsBodyThrows() async throws {
        let log = SupervisorTests.EventLog()
        let stderr = StandardError()
        let (outcome, _) = try await run([Self.worker("upload-file"), "--chunks", "20", "--chunk-ms", "50", "--hash-ms", "200", "--hash-fails"],
                                         policy: BudgetPolicy(budget: .seconds(10)), log: log, stderr: stderr)
        #expect(outcome.succeeded, "\(outcome)")
        #expect(stderr.text.contains("hashing failed; uploading unverified"), "\(stderr.text)")
        #expect(phases(log) == ["hash 60.0 seconds", "main 10.0 seconds"], "\(phases(log))")
    }

    @Test func onCheckpointAdviceHearsTheAdviceAndTheUploadStopsWithAResumePoint() async throws {
        // 100 chunks of 100 ms cannot be done within a 4 s max-runtime: 2 s before it the
        // advice comes, the handler says so, and the upload saves where it got to and stops.
        let dir = try TemporaryDirectory()
        let resume = dir.path("resume")
        let log = SupervisorTests.EventLog()
        let stderr = StandardError()
        var policy = BudgetPolicy(budget: .seconds(2), maxRuntime: .seconds(4), grace: .seconds(2))
        policy.checkpointLead = .seconds(2)
        let (outcome, output) = try await run([Self.worker("upload-file"), "--chunks", "100", "--chunk-ms", "100", "--resume-file", resume],
                                              policy: policy, log: log, stderr: stderr)
        #expect(outcome.succeeded && outcome.cancelReason == nil, "it stopped on its own before max-runtime: \(outcome)\n\(stderr.text)")
        let advice = log.kinds.compactMap { if case let .advice(action, remaining, _) = $0 { (action, remaining) } else { nil } }
        #expect(advice.count == 1 && advice.first?.0 == "checkpoint", "\(advice)")
        #expect(stderr.text.contains("upload-file: advised to checkpoint, "), "the handler ran: \(stderr.text)")
        #expect(stderr.text.contains("max-runtime is 2s away"), "with the supervisor's why: \(stderr.text)")
        let chunk = try #require(try? String(contentsOfFile: resume, encoding: .utf8), "the resume point was saved")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(Int(chunk).map { $0 > 0 && $0 < 100 } == true, "\(chunk)")
        #expect(output.contains("Upload paused at chunk \(chunk) of 100"), "\(output)")
        #expect(phases(log).map { $0.prefix { $0 != " " } } == ["checkpoint", "main"], "\(phases(log))")
    }

    @Test func workersRunStandaloneOutsideOvertime() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("ledger")
        let worker = Self.worker("process-payment")
        let (status, output) = try await offThePool { () throws -> (Int32, String) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: worker)
            process.arguments = ["--ledger", path, "--step-ms", "50", "--extend", "5"]
            var environment = ProcessInfo.processInfo.environment
            environment["OVERTIME_FD"] = nil
            process.environment = environment
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output)
        }
        #expect(status == 0)
        #expect(output.contains("processed successfully"))
        // Outside Overtime an extension is "granted": there is no limit to extend.
        #expect(ledger(path) == ["extension", "initiate", "authorize", "process", "complete"])
    }
}
