// Support for the end-to-end tests of the control socket (issue 5, "Control socket";
// docs/control.md): `overtime ctl` run as a real process, a raw socket client for what
// `ctl` would never send, a Python task that records every message it reads on fd 3, a
// throw-away second user, and small file-system probes.
//
// Builds on CLISupport.swift (CLIScratch, CLIProcess, CLIResult, CLIJSON) and
// CLIBatchSupport.swift (CLIBatchWorker.python, CLIBatchFixture). Every helper type here is
// prefixed `CLICtl`.
//
// Supervisors are started with `CLIProcess` (and so take a `CLIGate` permit); the `ctl`
// clients a test runs while its supervisor holds a permit must not wait for one, or eight
// such tests at once would deadlock: `CLICtlSpawn` runs them outside the gate.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// MARK: - Processes outside the gate

/// A helper process (`overtime ctl`, `setpriv …`, a shell): stdin from /dev/null (never a
/// terminal), stdout and stderr to files in the scratch directory, readable while it runs.
final class CLICtlSpawn: @unchecked Sendable {
    let executable: String
    let arguments: [String]
    private let environment: [String: String]?
    let stdoutPath: String
    let stderrPath: String
    private(set) var pid: Int32 = 0
    private var waitStatus: Int32?
    private var startedAt = ContinuousClock.now

    init(_ arguments: [String], executable: String = CLIBinary.path, environment: [String: String]? = nil,
         in scratch: CLIScratch) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        let tag = UUID().uuidString.prefix(8)
        stdoutPath = scratch.path("ctl-\(tag).stdout")
        stderrPath = scratch.path("ctl-\(tag).stderr")
    }

    func start() throws {
        var childEnds: [Int32] = []
        defer { childEnds.forEach { _ = close($0) } }
        for path in [stdoutPath, stderrPath] {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw CLIFailure("open \(path): errno \(errno)") }
            childEnds.append(fd)
        }
        startedAt = ContinuousClock.now
        let child = try CLISpawn.start([executable] + arguments, environment: environment ?? ProcessInfo.processInfo.environment,
                                       stdout: childEnds[0], stderr: childEnds[1])
        pid = child
    }

    /// What it has written to stdout so far.
    var stdoutSoFar: String {
        String(decoding: FileManager.default.contents(atPath: stdoutPath) ?? Data(), as: UTF8.self)
    }

    /// True once it has exited (reaping it).
    var hasExited: Bool {
        if waitStatus != nil { return true }
        var status: Int32 = 0
        let rc = waitpid(pid, &status, WNOHANG)
        if rc == pid { waitStatus = status; return true }
        if rc == -1, errno != EINTR { waitStatus = -1; return true }
        return false
    }

    /// Waits for exit (SIGKILL after `timeout`) and collects what it wrote.
    func finish(timeout: Duration = .seconds(20)) async -> CLIResult {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        var timedOut = false
        while !hasExited {
            if clock.now >= end {
                timedOut = true
                waitStatus = CLIResult.killAndReap(pid)
                break
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return CLIResult(waitStatus: waitStatus ?? -1,
                         stdoutData: FileManager.default.contents(atPath: stdoutPath) ?? Data(),
                         stderrData: FileManager.default.contents(atPath: stderrPath) ?? Data(),
                         wall: clock.now - startedAt, timedOut: timedOut)
    }

    /// Kills it if it still runs (cleanup after a failed expectation).
    func killIfRunning() {
        if !hasExited { _ = kill(pid, SIGKILL); _ = waitpid(pid, nil, 0); waitStatus = -1 }
    }
}

// MARK: - overtime ctl

enum CLICtl {
    /// `overtime ctl ARGS...`, to the end, as this test's user (or as `user`).
    static func ctl(_ arguments: [String], in scratch: CLIScratch, environment: [String: String]? = nil,
                    as user: CLICtlUser? = nil, timeout: Duration = .seconds(20)) async throws -> CLIResult {
        let process: CLICtlSpawn
        if let user {
            process = CLICtlSpawn(user.setprivArguments + [CLIBinary.path, "ctl"] + arguments, executable: CLICtlUser.setpriv,
                                  environment: environment ?? user.environment, in: scratch)
        } else {
            process = CLICtlSpawn(["ctl"] + arguments, environment: environment, in: scratch)
        }
        try process.start()
        return await process.finish(timeout: timeout)
    }

    /// `overtime ctl --socket PATH ARGS...`.
    static func ctl(socket: String, _ arguments: [String], in scratch: CLIScratch, as user: CLICtlUser? = nil) async throws -> CLIResult {
        try await ctl(["--socket", socket] + arguments, in: scratch, as: user)
    }

    /// `overtime ctl --socket PATH status --json`, its `tasks` parsed.
    static func status(_ socket: String, in scratch: CLIScratch) async throws -> [[String: Any]] {
        let r = try await ctl(socket: socket, ["status", "--json"], in: scratch)
        guard r.status == 0 else { throw CLIFailure("ctl status --json failed: \(r)") }
        let reply = try CLIJSON.object(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        guard CLIJSON.bool(reply["ok"]) == true, let tasks = reply["tasks"] as? [[String: Any]] else {
            throw CLIFailure("status --json is not {ok:true,tasks:[...]}: \(r.stdout)")
        }
        return tasks
    }

    /// Polls until something listens at `path`; false after `timeout`.
    static func waitForSocket(_ path: String, timeout: Duration = .seconds(10)) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            if CLICtlFS.probe(path) == .live { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return CLICtlFS.probe(path) == .live
    }

    /// Polls `condition` until true; false after `timeout`.
    static func waitUntil(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return try await condition()
    }

    /// The test's environment without variables a supervisor or the default socket
    /// directory would read from it.
    static let baseEnvironment: [String: String] = {
        var env = CLIBatchFixture.environment
        env.removeValue(forKey: "XDG_RUNTIME_DIR")
        return env
    }()

    /// A runtime directory of the test's own (`XDG_RUNTIME_DIR`, mode 0700) in `scratch`:
    /// the environment that points at it, and the socket directory supervisors make in it.
    static func runtimeDirectory(in scratch: CLIScratch) throws -> (xdg: String, environment: [String: String], sockets: String) {
        let xdg = try CLICtlFS.directory("xdg", in: scratch, mode: 0o700)
        return (xdg, environment(xdg: xdg), xdg + "/overtime")
    }

    /// The environment with `XDG_RUNTIME_DIR` set to `directory`.
    static func environment(xdg directory: String) -> [String: String] {
        var env = baseEnvironment
        env["XDG_RUNTIME_DIR"] = directory
        return env
    }
}

// MARK: - A task that records what it reads on fd 3

/// `python3 recorder.py LOG GO CODE [heartbeat]`: appends every message it reads on fd 3
/// to LOG as a JSON line (with `t`, its CLOCK_MONOTONIC time), after a first line
/// `{"type":"started","pid":…}`. Exits CODE when the file GO appears (`{"type":"go"}`),
/// or after a `cancel` message and the SIGTERM that follows (`{"type":"term"}`), so that
/// how it ended is decided by the supervisor's exit-code rules alone. With `heartbeat` it
/// sends a heartbeat every 50 ms (which would move its deadline, unless revoked).
enum CLICtlRecorder {
    static let body = #"""
    catch_term()
    log, go, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
    beat = len(sys.argv) > 4 and sys.argv[4] == "heartbeat"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    def rec(obj):
        obj["t"] = time.monotonic()
        os.write(fd, (json.dumps(obj) + "\n").encode())
    rec({"type": "started", "pid": os.getpid()})
    eof = False
    while True:
        if os.path.exists(go):
            rec({"type": "go"})
            sys.exit(code)
        if beat and not eof:
            try:
                send({"type": "heartbeat"})
            except OSError:
                eof = True
        if eof:
            time.sleep(0.05)
            continue
        m = recv(0.05)
        if m is None:
            r, _, _ = select.select([3], [], [], 0)
            if r:
                chunk = os.read(3, 65536)
                if chunk:
                    _buf += chunk
                else:
                    eof = True
            continue
        rec(m)
        if m.get("type") == "cancel":
            await_term(5)
            rec({"type": "term"})
            sys.exit(code)
    """#

    /// Writes the recorder into `scratch`; returns its path.
    static func install(in scratch: CLIScratch) throws -> String {
        try scratch.python("recorder.py", body)
    }

    /// The lines LOG holds so far, parsed (a torn last line is left out).
    static func lines(_ path: String) -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? CLIJSON.object(String($0)) }
    }

    static func messages(_ path: String, type: String) -> [[String: Any]] {
        lines(path).filter { $0["type"] as? String == type }
    }
}

/// One `overtime run` of the recorder under test, with its control socket in the scratch
/// directory.
final class CLICtlRunFixture: @unchecked Sendable {
    let scratch: CLIScratch
    let socket: String
    let log: String
    let go: String
    let recorder: String
    private(set) var process: CLIProcess?

    /// - Parameter socketPath: where the control socket goes (default: `ctl.sock` in the
    ///   scratch directory).
    init(socketPath: ((CLIScratch) throws -> String)? = nil) throws {
        scratch = try CLIScratch()
        socket = try socketPath?(scratch) ?? scratch.path("ctl.sock")
        log = scratch.path("fd3.log")
        go = scratch.path("go")
        recorder = try CLICtlRecorder.install(in: scratch)
    }

    /// Starts `overtime run --control SOCKET --name job OPTIONS -- python3 recorder …`, and
    /// waits until the socket listens and the task has started.
    func start(_ options: [String], code: Int = 0, heartbeat: Bool = false) async throws {
        let command = [CLIBatchWorker.python, recorder, log, go, String(code)] + (heartbeat ? ["heartbeat"] : [])
        let p = CLIProcess(["run", "--control", socket, "--name", "job"] + options + ["--"] + command,
                           environment: CLICtl.baseEnvironment, in: scratch)
        try await p.start()
        process = p
        guard await CLICtl.waitForSocket(socket) else {
            throw CLIFailure("no control socket at \(socket): \(await p.finish(timeout: .seconds(1)))")
        }
        guard await CLICtl.waitUntil({ !CLICtlRecorder.messages(self.log, type: "started").isEmpty }) else {
            throw CLIFailure("the task never started: \(await p.finish(timeout: .seconds(1)))")
        }
    }

    /// Lets the task exit on its own (it exits with its code once GO exists).
    func release() throws {
        try scratch.write("go", "go\n")
    }

    func finish(timeout: Duration = .seconds(30)) async throws -> CLIResult {
        guard let process else { throw CLIFailure("not started") }
        return await process.finish(timeout: timeout)
    }

    func ctl(_ arguments: [String]) async throws -> CLIResult {
        try await CLICtl.ctl(socket: socket, arguments, in: scratch)
    }

    /// Messages of `type` the task read on fd 3 so far.
    func seen(_ type: String) -> [[String: Any]] {
        CLICtlRecorder.messages(log, type: type)
    }

    /// Polls until the task has read `count` messages of `type`; the `count`-th, or nil.
    func waitSeen(_ type: String, count: Int = 1, timeout: Duration = .seconds(10)) async -> [String: Any]? {
        _ = await CLICtl.waitUntil(timeout: timeout) { seen(type).count >= count }
        let all = seen(type)
        return all.count >= count ? all[count - 1] : nil
    }
}

// MARK: - A raw client

/// A non-blocking connection to a control socket for requests `ctl` would never send.
/// Every wait polls and sleeps, so no test thread blocks.
final class CLICtlClient: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    private(set) var atEnd = false

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CLIFailure("socket: errno \(errno)") }
        guard CLICtlFS.connect(fd, path) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw CLIFailure("connect \(path): \(String(cString: strerror(e)))")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { Glibc.close(fd) }

    /// Sends all of `bytes`; false when the peer went away or it took longer than `timeout`.
    func send(_ bytes: [UInt8], timeout: Duration = .seconds(20)) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { offset += n; continue }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                if clock.now >= end { return false }
                try? await Task.sleep(for: .milliseconds(1))
                continue
            }
            return false
        }
        return true
    }

    func send(_ text: String) async -> Bool {
        await send(Array(text.utf8))
    }

    /// Reads what is there now into the buffer; false at end of stream or error.
    @discardableResult
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 { buffer.append(contentsOf: chunk[0..<n]); continue }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { return true }
            atEnd = true
            return false
        }
    }

    /// The next line (without its newline), or nil at end of stream or after `timeout`.
    func readLine(timeout: Duration = .seconds(10)) async -> String? {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return String(decoding: line, as: UTF8.self)
            }
            if atEnd || clock.now >= end { return nil }
            if fill() { try? await Task.sleep(for: .milliseconds(2)) }
        }
    }

    /// The next line parsed as a JSON object.
    func readReply(timeout: Duration = .seconds(10)) async throws -> [String: Any] {
        guard let line = await readLine(timeout: timeout) else {
            throw CLIFailure(atEnd ? "the supervisor closed the connection" : "no reply within \(timeout)")
        }
        return try CLIJSON.object(line)
    }

    /// Sends one request line and reads one reply.
    func request(_ line: String) async throws -> [String: Any] {
        guard await send(line + "\n") else { throw CLIFailure("could not send \(line.prefix(80))") }
        return try await readReply()
    }

    /// Closes the connection now (a client that vanishes).
    func shutdownBoth() {
        _ = shutdown(fd, Int32(SHUT_RDWR))
    }
}

// MARK: - Files and sockets

enum CLICtlFS {
    enum Probe: Equatable { case free, live, stale, notASocket }

    static func connect(_ fd: Int32, _ path: String) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "test path too long: \(path)")
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// What is at `path`, found the way a client would.
    static func probe(_ path: String) -> Probe {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .free }
        guard info.st_mode & S_IFMT == S_IFSOCK else { return .notASocket }
        // Non-blocking: a listener whose backlog is full (its loop busy) makes a blocking
        // connect wait, and this runs on one of the test process's few shared threads.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        defer { Glibc.close(fd) }
        if connect(fd, path) == 0 { return .live }
        return errno == ECONNREFUSED ? .stale : .live
    }

    /// Leaves a socket file at `path` with nobody listening: what a supervisor that died
    /// leaves behind.
    static func makeStaleSocket(_ path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let e = errno
        Glibc.close(fd)
        guard rc == 0 else { throw CLIFailure("bind \(path): \(String(cString: strerror(e)))") }
    }

    /// A stale socket made `age` ago (its modification time set back): one a supervisor
    /// that died left, as `ctl` finds it later.
    static func makeOldStaleSocket(_ path: String, age: Duration = .seconds(60)) throws {
        try makeStaleSocket(path)
        let then = Date().addingTimeInterval(-Double(age.components.seconds))
        try FileManager.default.setAttributes([.modificationDate: then], ofItemAtPath: path)
    }

    /// Permission bits, type and owner of `path` (not following a symlink).
    static func info(_ path: String) -> (mode: UInt32, type: UInt32, uid: UInt32)? {
        var s = stat()
        guard lstat(path, &s) == 0 else { return nil }
        return (UInt32(s.st_mode) & 0o7777, UInt32(s.st_mode) & UInt32(S_IFMT), s.st_uid)
    }

    static func chmod(_ path: String, _ mode: mode_t) throws {
        guard Glibc.chmod(path, mode) == 0 else { throw CLIFailure("chmod \(path): errno \(errno)") }
    }

    /// Makes `name` in `scratch`, mode `mode` exactly (umask aside); returns its path.
    static func directory(_ name: String, in scratch: CLIScratch, mode: mode_t) throws -> String {
        let path = scratch.path(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try chmod(path, mode)
        return path
    }

    /// A path exactly `length` bytes long: `directory/sss…` (the directory is created).
    static func path(length: Int, in directory: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let name = length - directory.utf8.count - 1
        guard name >= 1, name <= 255 else { throw CLIFailure("cannot make a \(length)-byte path in \(directory)") }
        return directory + "/" + String(repeating: "s", count: name)
    }

    static func isAlive(_ pid: Int32) -> Bool {
        pid > 0 && !CLIProcessTable.isDead(pid)
    }

    static func entries(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }
}

// MARK: - A second user

/// A throw-away local user (`useradd -M -s /usr/sbin/nologin overtime-ctl-test-XXXXXXXX`),
/// for tests of who may use a socket. `delete()` removes it (and its /tmp/overtime-UID).
final class CLICtlUser: @unchecked Sendable {
    static let setpriv = "/usr/bin/setpriv"
    let name: String
    let uid: UInt32
    let gid: UInt32

    enum Unavailable: Error, CustomStringConvertible {
        case notRoot, missing(String), failed(String)
        var description: String {
            switch self {
            case .notRoot: "the tests do not run as root, so they cannot create a user"
            case let .missing(tool): "\(tool) is not installed"
            case let .failed(why): why
            }
        }
    }

    private init(name: String, uid: UInt32, gid: UInt32) {
        self.name = name
        self.uid = uid
        self.gid = gid
    }

    /// Creates the user, retrying while another test holds /etc/passwd's lock.
    static func create() async throws(Unavailable) -> CLICtlUser {
        guard geteuid() == 0 else { throw .notRoot }
        for tool in ["/usr/sbin/useradd", "/usr/sbin/userdel", setpriv] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw .missing(tool)
        }
        let name = "overtime-ctl-test-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        var lastError = ""
        for _ in 0..<40 {
            let (status, output) = await runTool("/usr/sbin/useradd", ["-M", "-s", "/usr/sbin/nologin", name])
            if status == 0, let entry = Self.passwordEntry(name) {
                return CLICtlUser(name: name, uid: entry.uid, gid: entry.gid)
            }
            lastError = "useradd exited \(status): \(output)"
            try? await Task.sleep(for: .milliseconds(100))  // /etc/passwd locked by a parallel test
        }
        throw .failed(lastError)
    }

    /// Deletes the user (retrying on a locked /etc/passwd) and its fallback socket directory.
    func delete() async {
        try? FileManager.default.removeItem(atPath: "/tmp/overtime-\(uid)")
        for _ in 0..<40 {
            let (status, _) = await Self.runTool("/usr/sbin/userdel", [name])
            if status == 0 || Self.passwordEntry(name) == nil { return }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// `name`'s uid, gid and home, read with getpwnam_r: tests run in parallel threads, and
    /// getpwnam's one static buffer let one test read another's user (a uid that was not
    /// its own, once, in a full run).
    static func passwordEntry(_ name: String) -> (uid: UInt32, gid: UInt32, home: String)? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, let found = result else { return nil }
        return (found.pointee.pw_uid, found.pointee.pw_gid, String(cString: found.pointee.pw_dir))
    }

    /// `setpriv` arguments that run the rest as this user, with no supplementary groups.
    var setprivArguments: [String] {
        ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups"]
    }

    /// A plain environment for this user's processes (no XDG_RUNTIME_DIR: the fallback
    /// directory /tmp/overtime-UID is theirs alone).
    var environment: [String: String] {
        var env = CLICtl.baseEnvironment
        env["HOME"] = "/"
        env["USER"] = name
        env["LOGNAME"] = name
        return env
    }

    private static func runTool(_ tool: String, _ arguments: [String]) async -> (Int32, String) {
        guard let scratch = try? CLIScratch() else { return (-1, "no scratch directory") }
        let p = CLICtlSpawn(arguments, executable: tool, in: scratch)
        do { try p.start() } catch { return (-1, "\(error)") }
        let r = await p.finish(timeout: .seconds(20))
        return (r.status, r.stderr + r.stdout)
    }
}
