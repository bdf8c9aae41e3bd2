// Support for the end-to-end tests of the `overtime` binary: find it, run it as a real
// process with real descriptors, and look at what a user would see (stdout, stderr, the exit
// code). Every helper type is prefixed `CLI` so it cannot clash with other test files.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - The binary

/// The built `overtime` executable: the `overtime` file next to the running test executable
/// (the build products directory), or in a directory above it. `CLI_OVERTIME_BINARY`
/// overrides the search.
enum CLIBinary {
    static let path: String = locate()

    private static func locate() -> String {
        if let explicit = ProcessInfo.processInfo.environment["CLI_OVERTIME_BINARY"], !explicit.isEmpty {
            return explicit
        }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
        for _ in 0..<6 {
            let candidate = directory.appendingPathComponent("overtime").path
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
               FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate
            }
            directory = directory.deletingLastPathComponent()
        }
        return "/nonexistent/overtime (not found beside \(exe))"
    }
}

// MARK: - A scratch directory per test

/// A fresh temporary directory for one test's scripts and marker files, removed afterwards.
final class CLIScratch: @unchecked Sendable {
    let url: URL

    init() throws {
        url = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("overtime-cli-tests")
            .appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    /// Writes a file; returns its path.
    @discardableResult
    func write(_ name: String, _ text: String, mode: Int = 0o644) throws -> String {
        let p = path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: p))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: p)
        return p
    }

    /// A Python child: the shared prelude (fd-3 helpers), then `body`. Returns its path.
    func python(_ name: String, _ body: String) throws -> String {
        try write(name, CLIChild.pythonPrelude + "\n" + body)
    }

    func read(_ name: String) -> String? {
        try? String(contentsOfFile: path(name), encoding: .utf8)
    }

    /// Polls until the file `name` exists (children write marker files atomically: a
    /// temporary name, then rename). Returns its content, or nil after `timeout`.
    func waitForFile(_ name: String, timeout: Duration = .seconds(10)) async -> String? {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            if let text = read(name) { return text }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return read(name)
    }
}

// MARK: - Child scripts

enum CLIChild {
    /// Helpers for Python children: `send` a message on fd 3, `recv` one (None at EOF or on
    /// timeout), `sendraw` bytes, and `note` a marker file atomically.
    static let pythonPrelude = #"""
    import os, sys, json, signal, time, select

    def sendraw(data):
        view = memoryview(data)
        while view:
            n = os.write(3, view)
            view = view[n:]

    def send(obj):
        sendraw((json.dumps(obj) + "\n").encode())

    _buf = b""
    def recv(timeout=None):
        global _buf
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in _buf:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                r, _, _ = select.select([3], [], [], left)
                if not r:
                    return None
            chunk = os.read(3, 65536)
            if not chunk:
                return None
            _buf += chunk
        line, _buf = _buf.split(b"\n", 1)
        return json.loads(line)

    def note(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)

    # SIGTERM follows the cancel message at once; a child that exits as soon as it reads
    # the message could meet the SIGTERM while exiting (Python restores default handlers
    # as it shuts down). Catch it, and wait for it before exiting.
    _terms = []
    def catch_term():
        signal.signal(signal.SIGTERM, lambda *a: _terms.append(1))
    def await_term(timeout=3):
        end = time.monotonic() + timeout
        while not _terms and time.monotonic() < end:
            time.sleep(0.01)
        return bool(_terms)

    def writeall(fd, data):
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    """#

    /// A POSIX sh fragment that writes `text` to `file` atomically.
    static func shNote(_ file: String, _ text: String) -> String {
        "printf '%s\\n' \"\(text)\" > '\(file).tmp' && mv '\(file).tmp' '\(file)'"
    }
}

// MARK: - Running overtime

/// Starts a test's child process as a shell would: stdin from /dev/null, stdout and stderr
/// on the given descriptors, every signal at its default, `blockedSignals` blocked, and no
/// other descriptor (so concurrent tests never inherit each other's pipe ends).
enum CLISpawn {
    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc
    /// module does not declare.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    /// - Parameter argv: the command first; it is run by path, not looked up.
    static func start(_ argv: [String], environment: [String: String], stdout: Int32, stderr: Int32,
                      blockedSignals: [Int32] = []) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        if let closeFrom { _ = closeFrom(&actions, 3) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        for signal in blockedSignals { sigaddset(&mask, signal) }
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in 1..<32 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaults, Int32(signal)) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, argv[0], &actions, &attributes, cArgs, cEnv)
        guard rc == 0 else { throw CLIFailure("posix_spawn \(argv[0]): errno \(rc)") }
        return pid
    }
}

/// Where the overtime process's stdout and stderr go: regular files (read after exit), or
/// pipes drained concurrently by threads.
enum CLIOutputMode: Sendable {
    case files
    case pipes
    /// Pipes nobody reads until `finish` (a paused pager, `| (sleep 30; cat)`): overtime's
    /// writes fill them and would block.
    case stalledPipes
    /// stdout and stderr on one pseudo-terminal whose screen nobody reads until `finish`
    /// (Ctrl-S, a suspended ssh client).
    case stalledTerminal
}

/// What a finished run of the binary showed.
struct CLIResult: Sendable, CustomStringConvertible {
    /// The exit code; when overtime itself died of a signal, 128 + the signal.
    var status: Int32
    /// Overtime itself died of a signal (never expected).
    var diedOfSignal: Bool
    var stdoutData: Data
    var stderrData: Data
    /// Wall time from start to exit, as the test saw it.
    var wall: Duration
    /// The test gave up waiting and killed it.
    var timedOut: Bool

    var stdout: String { String(decoding: stdoutData, as: UTF8.self) }
    var stderr: String { String(decoding: stderrData, as: UTF8.self) }

    /// From a `waitpid` status (-1: lost), as a shell reports it: the exit code, or 128 + N
    /// for a death by signal N (WIFSIGNALED / WTERMSIG / WEXITSTATUS, spelled out: they are
    /// C macros).
    init(waitStatus status: Int32, stdoutData: Data, stderrData: Data, wall: Duration, timedOut: Bool) {
        let signalNumber = status & 0x7f
        diedOfSignal = status != -1 && signalNumber != 0 && signalNumber != 0x7f
        self.status = status == -1 ? -1 : (diedOfSignal ? 128 + signalNumber : (status >> 8) & 0xff)
        self.stdoutData = stdoutData
        self.stderrData = stderrData
        self.wall = wall
        self.timedOut = timedOut
    }

    /// SIGKILLs `pid` and reaps it (a test gave up waiting); its wait status.
    static func killAndReap(_ pid: Int32) -> Int32 {
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        return status
    }

    var stderrLines: [String] {
        stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    var stdoutLines: [String] {
        stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    /// The `--json` report: the last line on stdout, parsed.
    func report() throws -> [String: Any] {
        guard let last = stdoutLines.last else { throw CLIFailure("no report on stdout") }
        return try CLIJSON.object(last)
    }

    var description: String {
        let tail = { (s: String) -> String in s.count > 1500 ? "…" + String(s.suffix(1500)) : s }
        return "exit \(status)\(diedOfSignal ? " (overtime died of a signal)" : "")\(timedOut ? " (TIMED OUT, killed by the test)" : ""), "
            + "wall \(wall)\n--- stdout:\n\(tail(stdout))\n--- stderr:\n\(tail(stderr))"
    }
}

struct CLIFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

enum CLIJSON {
    static func object(_ line: String) throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: Data(line.utf8), options: [.fragmentsAllowed])
        guard let object = value as? [String: Any] else { throw CLIFailure("not a JSON object: \(line)") }
        return object
    }

    static func int(_ value: Any?) -> Int? {
        (value as? NSNumber)?.intValue
    }

    static func double(_ value: Any?) -> Double? {
        (value as? NSNumber)?.doubleValue
    }

    /// JSON `true`/`false` only (not 0/1).
    static func bool(_ value: Any?) -> Bool? {
        guard let number = value as? NSNumber else { return nil }
        let type = String(cString: number.objCType)
        guard type == "c" || type == "B" else { return nil }
        return number.boolValue
    }

    static func isNull(_ value: Any?) -> Bool {
        value is NSNull
    }
}

/// Reads a descriptor to its end on a thread of its own.
final class CLIDrain: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var done = false

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            // read(2) to 0, or to an error: a pseudo-terminal's controller reads EIO once
            // the other side is closed, where Foundation's readDataToEndOfFile would trap.
            var bytes = Data()
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(handle.fileDescriptor, &chunk, chunk.count)
                if n > 0 { bytes.append(contentsOf: chunk[0..<n]) } else if n < 0, errno == EINTR { continue } else { break }
            }
            lock.withLock {
                data = bytes
                done = true
            }
        }
    }

    private func snapshot() -> (Bool, Data) {
        lock.withLock { (done, data) }
    }

    func finish(timeout: Duration) async -> Data {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while true {
            let (isDone, bytes) = snapshot()
            if isDone || clock.now >= end { return bytes }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Limits how many overtime processes the CLI tests run at once. Suites run in parallel on
/// a shared 2-core machine; a pile of concurrent runs would only make timing noise.
actor CLIGate {
    static let shared = CLIGate(permits: 8)

    private var permits: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(permits: Int) { self.permits = permits }

    func acquire() async {
        if permits > 0 {
            permits -= 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty {
            permits += 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}

/// One run of the binary as a real process, started the way a shell starts a command:
/// stdin from /dev/null, stdout and stderr to files or pipes, an empty signal mask and
/// default signal actions, and no descriptor of the test process but those three.
///
/// Foundation's `Process` is not used: on Linux its children inherit a blocked SIGCHLD, which
/// is a separate case (see `CLIEntrypointTests`), not what a user's shell hands over.
final class CLIProcess: @unchecked Sendable {
    let arguments: [String]
    private let executable: String
    private let environment: [String: String]?
    private let output: CLIOutputMode
    private let blockedSignals: [Int32]
    private let stdoutPath: String
    private let stderrPath: String
    private var stdoutDrain: CLIDrain?
    private var stderrDrain: CLIDrain?
    /// The read ends of a stalled run, drained only from `finish`.
    private var stalledEnds: [Int32] = []
    private var startedAt = ContinuousClock.now
    private var holdsGate = false
    private(set) var pid: Int32 = 0
    private var waitStatus: Int32?

    /// - Parameters:
    ///   - arguments: the arguments after the executable, e.g. `["run", "--", "true"]`.
    ///   - executable: what to run (default: overtime itself; a shell for wrappers).
    ///   - environment: the complete environment (default: the test's own).
    ///   - blockedSignals: signals blocked in the new process's mask (default none).
    init(_ arguments: [String], executable: String = CLIBinary.path, environment: [String: String]? = nil,
         output: CLIOutputMode = .files, blockedSignals: [Int32] = [], in scratch: CLIScratch) {
        self.arguments = arguments
        self.executable = executable
        self.environment = environment
        self.output = output
        self.blockedSignals = blockedSignals
        let tag = UUID().uuidString.prefix(8)
        stdoutPath = scratch.path("overtime-\(tag).stdout")
        stderrPath = scratch.path("overtime-\(tag).stderr")
    }

    func start() async throws {
        await CLIGate.shared.acquire()
        holdsGate = true
        do {
            try spawn()
        } catch {
            await releaseGate()
            throw error
        }
    }

    /// Pipe ends are made close-on-exec in two steps (Swift's Glibc has no `pipe2`); spawns
    /// from these tests wait while that happens, so none inherits another test's pipe.
    private static let spawnLock = NSLock()

    private func spawn() throws {
        try Self.spawnLock.withLock { try spawnLocked() }
    }

    private func spawnLocked() throws {
        // Every descriptor made here is close-on-exec; posix_spawn's dup2 hands the child
        // only its own three, so concurrent tests never leak pipe ends into each other.
        var parentEnds: [Int32] = []
        var childEnds: [Int32] = []
        defer { childEnds.forEach { _ = close($0) } }
        switch output {
        case .files:
            for path in [stdoutPath, stderrPath] {
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw CLIFailure("open \(path): errno \(errno)") }
                childEnds.append(fd)
            }
        case .stalledTerminal:
            var controller: Int32 = -1
            var device: Int32 = -1
            guard openpty(&controller, &device, nil, nil, nil) == 0 else { throw CLIFailure("openpty: errno \(errno)") }
            for fd in [controller, device] { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            parentEnds.append(controller)
            childEnds += [device, dup(device)]
            _ = fcntl(childEnds[1], F_SETFD, FD_CLOEXEC)
        case .pipes, .stalledPipes:
            for _ in 0..<2 {
                var fds: [Int32] = [-1, -1]
                guard pipe(&fds) == 0 else { throw CLIFailure("pipe: errno \(errno)") }
                for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                parentEnds.append(fds[0])
                childEnds.append(fds[1])
            }
        }

        startedAt = ContinuousClock.now
        let child: pid_t
        do {
            child = try CLISpawn.start([executable] + arguments, environment: environment ?? ProcessInfo.processInfo.environment,
                                       stdout: childEnds[0], stderr: childEnds[1], blockedSignals: blockedSignals)
        } catch {
            parentEnds.forEach { _ = close($0) }
            throw error
        }
        pid = child
        if output == .stalledPipes || output == .stalledTerminal {
            stalledEnds = parentEnds
        } else if output == .pipes {
            stdoutDrain = CLIDrain(FileHandle(fileDescriptor: parentEnds[0], closeOnDealloc: true))
            stderrDrain = CLIDrain(FileHandle(fileDescriptor: parentEnds[1], closeOnDealloc: true))
        }
    }

    private func releaseGate() async {
        if holdsGate {
            holdsGate = false
            await CLIGate.shared.release()
        }
    }

    /// Sends `signal` to the overtime process itself (never after it was reaped).
    func signal(_ signal: Int32) {
        guard pid > 0, waitStatus == nil else { return }
        _ = kill(pid, signal)
    }

    /// What it has written on stderr so far (`.files` output only; empty otherwise).
    var stderrSoFar: String {
        guard case .files = output else { return "" }
        return FileManager.default.contents(atPath: stderrPath).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// Reaps the process if it has exited; true once it has.
    private func poll() -> Bool {
        if waitStatus != nil { return true }
        var status: Int32 = 0
        while true {
            let rc = waitpid(pid, &status, WNOHANG)
            if rc == pid {
                waitStatus = status
                return true
            }
            if rc == -1, errno == EINTR { continue }
            if rc == -1 {
                waitStatus = -1  // someone else reaped it; nothing more to learn
                return true
            }
            return false
        }
    }

    /// Waits for exit (killing it after `timeout`) and collects what it wrote. A stalled
    /// run's output starts to be read here.
    func finish(timeout: Duration = .seconds(30)) async -> CLIResult {
        if !stalledEnds.isEmpty {
            stdoutDrain = CLIDrain(FileHandle(fileDescriptor: stalledEnds[0], closeOnDealloc: true))
            // A terminal has one screen: stdout and stderr are both on it, read as stdout.
            stderrDrain = stalledEnds.count > 1 ? CLIDrain(FileHandle(fileDescriptor: stalledEnds[1], closeOnDealloc: true)) : nil
            stalledEnds = []
        }
        let clock = ContinuousClock()
        let end = clock.now + timeout
        var timedOut = false
        while !poll() {
            if clock.now >= end {
                timedOut = true
                waitStatus = CLIResult.killAndReap(pid)
                break
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let wall = clock.now - startedAt
        let out: Data, err: Data
        switch output {
        case .files:
            out = FileManager.default.contents(atPath: stdoutPath) ?? Data()
            err = FileManager.default.contents(atPath: stderrPath) ?? Data()
        case .pipes, .stalledPipes, .stalledTerminal:
            out = await stdoutDrain?.finish(timeout: .seconds(10)) ?? Data()
            err = await stderrDrain?.finish(timeout: .seconds(10)) ?? Data()
        }
        await releaseGate()
        return CLIResult(waitStatus: waitStatus ?? -1, stdoutData: out, stderrData: err, wall: wall, timedOut: timedOut)
    }
}

/// Runs `overtime ARGS...` to the end.
func cliRun(_ arguments: [String], in scratch: CLIScratch, environment: [String: String]? = nil,
            output: CLIOutputMode = .files, timeout: Duration = .seconds(30)) async throws -> CLIResult {
    let process = CLIProcess(arguments, environment: environment, output: output, in: scratch)
    try await process.start()
    return await process.finish(timeout: timeout)
}

// MARK: - Processes outside overtime

enum CLIProcessTable {
    /// True when `pid` no longer runs: gone, or a zombie nobody has reaped yet (PID 1 in
    /// these sandboxes does not reap orphans).
    static func isDead(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        // "pid (comm) S ...": the state follows the last ')'.
        guard let close = stat.lastIndex(of: ")") else { return true }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
        return state == "Z" || state == "X"
    }

    /// Polls until `pid` is dead; false if it still runs after `timeout`.
    static func waitDead(_ pid: Int32, timeout: Duration = .seconds(5)) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            if isDead(pid) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return isDead(pid)
    }
}

extension Duration {
    var cliSeconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}

