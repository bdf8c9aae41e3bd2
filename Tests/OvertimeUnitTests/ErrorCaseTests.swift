import Foundation
@testable import Overtime
@testable import OvertimeLoop
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The supervisor library's failures as a program that embeds it meets them: cases to
/// switch on, each naming its path or errno, made here by real sockets, files and
/// directories; and the words the CLI prints, unchanged.
@Suite struct ErrorCaseTests {
    private static func scratch() throws -> String {
        let directory = NSTemporaryDirectory() + "overtime-errors-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// A socket file nobody listens on: what a supervisor that died leaves behind.
    private static func leaveStaleSocket(at path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var (address, length) = UnixListener.address(path)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        close(fd)
        #expect(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
    }

    private static func connecting(to path: String) -> ControlClient.Failure? {
        do {
            try ControlClient(path: path).close()
            return nil
        } catch {
            return error
        }
    }

    @Test func aControlClientSaysWhyItCouldNotConnect() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let stale = directory + "/ended.sock"
        Self.leaveStaleSocket(at: stale)
        #expect(Self.connecting(to: stale) == .noSupervisor(path: stale))
        #expect(Self.connecting(to: stale)?.message == "nobody listens on it (left by a supervisor that has ended)")

        let file = directory + "/plain"
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        #expect(Self.connecting(to: file) == .notASocket(path: file))

        let missing = directory + "/missing.sock"
        guard case let .cannotConnect(path, error)? = Self.connecting(to: missing) else {
            Issue.record("connecting to nothing: \(String(describing: Self.connecting(to: missing)))")
            return
        }
        #expect(path == missing && error.errno == ENOENT)
        #expect(Self.connecting(to: missing)?.message == String(cString: strerror(ENOENT)))

        let long = "/tmp/" + String(repeating: "x", count: 200)
        #expect(Self.connecting(to: long) == .pathTooLong(path: long))
    }

    @Test func aControlSocketSaysWhyItCannotBeHad() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let supervisor = try Supervisor()
        let live = try supervisor.serveControl(at: directory + "/live.sock")
        #expect(throws: ControlSocketError.inUse(path: live)) { try ControlSocketPath.claim(live) }
        #expect(throws: ControlSocketError.inUse(path: live)) { try supervisor.serveControl(at: live) }

        let file = directory + "/plain"
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        #expect(throws: ControlSocketError.notASocket(path: file)) { try ControlSocketPath.claim(file) }
        #expect(throws: ControlSocketError.notADirectory(path: file)) { try ControlSocketPath.prepareDirectory(file) }
        let long = directory + "/" + String(repeating: "x", count: 120) + ".sock"
        #expect(throws: ControlSocketError.pathTooLong(path: long, limit: UnixListener.maxPathLength)) { try ControlSocketPath.claim(long) }
        do {
            try ControlSocketPath.prepareDirectory(file + "/inside")
            Issue.record("made a directory inside a file")
        } catch {
            guard case let .cannotCreateDirectory(path, cause) = error else { Issue.record("\(error)"); return }
            #expect(path == file + "/inside" && cause.errno == ENOTDIR)
            #expect(error.message == "cannot create \(file)/inside: \(String(cString: strerror(ENOTDIR)))")
        }

        supervisor.shutdown()
        #expect(throws: ControlSocketError.supervisorShutDown) { try supervisor.serveControl(at: directory + "/late.sock") }
    }

    @Test func metricsSayWhyTheyCannotBeServed() throws {
        let first = try Supervisor()
        defer { first.shutdown() }
        let bound = try #require(try first.serveMetrics(MetricsSettings(address: MetricsAddress(host: "127.0.0.1", port: 0), version: "test")))
        let second = try Supervisor()
        defer { second.shutdown() }
        do {
            _ = try second.serveMetrics(MetricsSettings(address: bound, version: "test"))
            Issue.record("two supervisors served metrics on \(bound)")
        } catch {
            guard case let .cannotListen(address, cause) = error else { Issue.record("\(error)"); return }
            #expect(address == bound && cause.errno == EADDRINUSE)
            #expect(error.description.hasSuffix("(another program listens there; choose another port, or 0 for any free one)"))
        }
        do {
            _ = try second.serveMetrics(MetricsSettings(file: NSTemporaryDirectory(), version: "test"))
            Issue.record("wrote metrics to a directory")
        } catch {
            guard case let .cannotWriteFile(path, refusal) = error else { Issue.record("\(error)"); return }
            #expect(path == NSTemporaryDirectory() && refusal == .directory)
            #expect(error.description == "--metrics-file: cannot write \(path): \(refusal.reason)")
        }
    }

    @Test func aBatchSaysWhyItsRunDirectoryWillNotDo() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(throws: BatchError.notARunDirectory(path: directory)) { try RunJournal.succeededTasks(in: directory) }
        #expect(FileManager.default.createFile(atPath: directory + "/notes.txt", contents: Data()))
        #expect(throws: BatchError.notEmpty(path: directory, found: "notes.txt")) { try RunJournal.checkFresh(directory) }
        #expect(FileManager.default.createFile(atPath: directory + "/events.jsonl", contents: Data()))
        #expect(throws: BatchError.holdsARun(path: directory)) { try RunJournal.checkFresh(directory) }
        do {
            _ = try RunJournal(directory: directory + "/notes.txt/run", runID: "r1")
            Issue.record("made a run directory inside a file")
        } catch {
            guard case let .cannotCreateDirectory(path, cause) = error else { Issue.record("\(error)"); return }
            #expect(path == directory + "/notes.txt/run" && cause.errno == ENOTDIR)
        }
        #expect(throws: BatchError.outsideSlurmAllocation) { try SrunExecutor.launcher(runDirectory: directory, overtime: nil, environment: [:]) }
    }

    @Test func controlRefusalsAreCases() {
        #expect(ControlWords.budget(.notRunning(.cancelling(.user))) == .failure(.alreadyCancelling))
        #expect(ControlWords.budget(.notRunning(.exited)) == .failure(.finished))
        #expect(ControlFailure.noRunningTask("trian", closest: "train").message == "no running task named 'trian'; did you mean 'train'?")
        #expect(ControlFailure.noTaskInBatch("x", closest: nil).message == "no task named 'x' in this batch")
    }

    @Test func anOutputFileSaysWhyItCannotBeWritten() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(throws: OutputFile.Refusal.directory) { try OutputFile(path: directory) }
        #expect(throws: OutputFile.Refusal.descriptorNotGiven(999)) { try OutputFile(path: "/dev/fd/999") }
        #expect(mkfifo(directory + "/fifo", 0o600) == 0)
        #expect(throws: OutputFile.Refusal.fifoWithoutReader) { try OutputFile(path: directory + "/fifo") }
        #expect(OutputFile.Refusal.fifoWithoutReader.reason == "\(String(cString: strerror(ENXIO))) (a FIFO nobody reads yet: start its reader first)")
        do {
            _ = try OutputFile(path: directory + "/missing/report.json")
            Issue.record("a file in a missing directory")
        } catch {
            guard case let .directoryNotWritable(parent, cause) = error else { Issue.record("\(error)"); return }
            #expect(parent == directory + "/missing" && cause.errno == ENOENT)
            #expect(error.reason == "\(String(cString: strerror(ENOENT))) (in \(parent))")
        }
    }

    @Test func aJobFileSaysWhyItCannotBeRead() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(JobFilePath.read("").failure == .noPath)
        #expect(JobFilePath.read(directory).failure == .directory)
        guard case let .cannotOpen(cause)? = JobFilePath.read(directory + "/missing.json").failure else {
            Issue.record("read a missing file")
            return
        }
        #expect(cause.errno == ENOENT)
        #expect(JobFilePath.read(directory + "/missing.json").failure?.message == "cannot open the job file: there is no such file (check the path)")
    }
}

private extension Result {
    var failure: Failure? {
        if case let .failure(failure) = self { return failure }
        return nil
    }
}
