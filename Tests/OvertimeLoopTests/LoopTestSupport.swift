import Foundation
import OvertimeLoop
import Synchronization
import Testing

// What the loop tests share: a way to run code on the loop thread and await its result,
// state the loop's callbacks fill in and the test reads, and polling with a generous bound.

/// Runs `body` on the loop thread (where every handle must be touched) and returns its
/// result to the awaiting test.
func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        loop.execute { continuation.resume(returning: body()) }
    }
}

/// State written by loop callbacks and read by the test thread.
final class Shared<Value: Sendable>: Sendable {
    private let state: Mutex<Value>

    init(_ value: Value) { state = Mutex(value) }

    var value: Value { state.withLock { $0 } }

    func update(_ change: (inout Value) -> Void) {
        state.withLock { change(&$0) }
    }
}

/// Polls `condition` until it holds or `timeout` passes. The bound is only there so a
/// broken loop fails the test instead of hanging it; it is never a speed claim.
func eventually(within timeout: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// Writes all of `bytes` to a blocking descriptor (the test's end of a pair).
func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    do throws(SystemError) {
        try Descriptors.writeAll(fd, bytes)
    } catch {
        preconditionFailure("\(error)")
    }
}

/// A recognisable byte pattern: position `i` holds a byte that depends on `i` and `seed`,
/// so a reordered, lost or repeated range shows up in a comparison.
func pattern(count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 8) ^ seed) }
}

/// The fields of /proc/PID/stat after the parenthesised command (state, parent, …), or
/// nil when the process is gone.
func statFields(of pid: Int32) -> [String]? {
    guard let stat = Descriptors.readWholeFile("/proc/\(pid)/stat"),
          let paren = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
    return stat[(paren + 1)...].split(separator: UInt8(ascii: " ")).map { String(decoding: $0, as: UTF8.self) }
}

/// True while `pid` is a live process: it exists and is not a zombie (state Z, or X).
func isAlive(_ pid: Int32) -> Bool {
    guard let state = statFields(of: pid)?.first else { return false }
    return state != "Z" && state != "X"
}

/// The parent pid of `pid`, or nil when it is gone.
func parentPID(of pid: Int32) -> Int32? {
    statFields(of: pid).flatMap { $0.count > 1 ? Int32($0[1]) : nil }
}

/// The pid a shell wrote to `path` (`echo $! > path`), once the file holds a whole line.
func pidWritten(to path: String) async -> Int32? {
    var pid: Int32?
    _ = await eventually {
        guard let text = Descriptors.readWholeFile(path), text.last == UInt8(ascii: "\n") else { return false }
        pid = Int32(String(decoding: text.dropLast(), as: UTF8.self))
        return true
    }
    return pid
}

/// A fresh directory for one test's files, removed by the caller.
func temporaryDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("overtime-loop-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Runs one test of this binary in a test process of its own, for what must not touch the
/// shared one: a subreaper (which reaps and, at shutdown, kills every child of the process,
/// other suites' included), or a supervisor killed with SIGKILL.
///
/// The other side is a test enabled only there (`.enabled(if: ChildTestProcess.runs(name))`)
/// and finds `directory` in `ChildTestProcess.directory`. It writes its output to
/// `directory/log`.
enum ChildTestProcess {
    static let nameVariable = "OVERTIME_LOOP_TEST_SIDE"
    static let directoryVariable = "OVERTIME_LOOP_TEST_DIRECTORY"

    /// True in the test process started for the test `name`.
    static func runs(_ name: String) -> Bool {
        ProcessInfo.processInfo.environment[nameVariable] == name
    }

    /// The directory the starting test gave.
    static var directory: String {
        ProcessInfo.processInfo.environment[directoryVariable] ?? "/nonexistent"
    }

    /// Starts this test binary running only the test function `name` (Swift Testing's
    /// `--filter`), its output in `directory/log`. Call on the loop thread.
    static func start(_ loop: EventLoop, name: String, directory: String,
                      onExit: @escaping (ChildExit) -> Void) throws -> ChildProcess {
        let log = try Descriptors.openForWriting("\(directory)/log", append: false)
        defer { Descriptors.close(log) }
        let null = try Descriptors.openNull(forWriting: false)
        defer { Descriptors.close(null) }
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        let request = SpawnRequest(
            arguments: ["/proc/self/exe", "--testing-library", "swift-testing", "--filter", "\(name)\\(\\)"],
            baseEnvironment: EnvironmentBlock(environment),
            environment: ["\(nameVariable)=\(name)", "\(directoryVariable)=\(directory)"],
            workingDirectory: nil, descriptors: [null, log, log])
        return try ChildProcess(loop: loop, request: request, onExit: onExit)
    }

    /// Runs the test `name` in a test process of its own and expects it to pass: exit 0, and
    /// the file `done` written at its end (a filter that matched nothing would pass too).
    static func expectPasses(_ name: String) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let exit = Shared<ChildExit?>(nil)
        let started = await onLoop(loop) { () -> String? in
            do {
                _ = try start(loop, name: name, directory: directory) { how in exit.update { $0 = how } }
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(started == nil)
        #expect(await eventually { exit.value != nil })
        #expect(exit.value == .exited(0), "\(log(in: directory))")
        #expect(access("\(directory)/done", F_OK) == 0, "\(log(in: directory))")
    }

    /// Marks the other side's test as having run to its end.
    static func finish() throws {
        try Data("done\n".utf8).write(to: URL(fileURLWithPath: "\(directory)/done"))
    }

    /// The other side's output, for a failure message.
    static func log(in directory: String) -> String {
        String(decoding: Descriptors.readWholeFile("\(directory)/log") ?? [], as: UTF8.self)
    }
}
