import CLibUV
import COvertime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Descriptor plumbing for spawning tasks. Every descriptor made here is close-on-exec from
/// birth, so a task only ever receives the ones handed to it explicitly.
public enum Descriptors {
    /// A connected Unix stream socket pair: (supervisor's end, task's end).
    public static func socketPair() throws(SystemError) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        try syscall("socketpair") {
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        }
        return (fds[0], fds[1])
    }

    /// `count` bytes from the kernel's random pool (getrandom(2): it waits only until the
    /// pool is first seeded, early in boot).
    public static func randomBytes(_ count: Int) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let start = filled
            let got = bytes.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in
                    try syscall("getrandom") { overtime_random_bytes(raw.baseAddress! + start, UInt(count - start)) }
                }
            }
            filled += try got.get()
        }
        return bytes
    }

    /// A pipe: (read end, write end).
    public static func pipe() throws(SystemError) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        try syscall("pipe2") { overtime_pipe_cloexec(&fds) }
        return (fds[0], fds[1])
    }

    /// A pseudo-terminal for a task's output: (the supervisor's reading end, the task's
    /// terminal). The task sees a terminal (so it line-buffers, as it would if run directly)
    /// of the size of `sizeFrom`'s; its bytes arrive as written.
    public static func outputTerminal(sizeFrom: Int32) throws(SystemError) -> (Int32, Int32) {
        var reader: Int32 = -1, terminal: Int32 = -1
        try syscall("open a pseudo-terminal") { overtime_open_output_terminal(sizeFrom, &reader, &terminal) }
        return (reader, terminal)
    }

    /// Gives the pseudo-terminal read at `reader` the size of terminal `from`.
    static func copyWindowSize(from: Int32, to reader: Int32) {
        _ = overtime_copy_window_size(from, reader)
    }

    /// Opens a file for a task's output (created 0644; appended or truncated).
    public static func openForWriting(_ path: String, append: Bool) throws(SystemError) -> Int32 {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC)
        return try syscall("open \(path)") { open(path, flags, 0o644) }
    }

    /// The magic number of the filesystem `path` is on (statfs), or nil.
    public static func filesystemType(_ path: String) -> Int? {
        let type = overtime_filesystem_type(path)
        return type < 0 ? nil : type
    }

    /// A close-on-exec copy of `fd`.
    public static func duplicate(_ fd: Int32) throws(SystemError) -> Int32 {
        try Syscall.retrying("duplicate descriptor \(fd)") { fcntl(fd, F_DUPFD_CLOEXEC, 3) }
    }

    /// Opens `/dev/null` (for a task's stdin, or output nobody wants).
    public static func openNull(forWriting: Bool) throws(SystemError) -> Int32 {
        try syscall("open /dev/null") { open("/dev/null", (forWriting ? O_WRONLY : O_RDONLY) | O_CLOEXEC) }
    }

    /// True when `path` names a directory (exec says only "permission denied" for one).
    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// The names in `directory` without `.` and `..`, at most `limit` of them (in the order
    /// the directory gives them), or nil when it cannot be opened.
    public static func directoryEntries(_ directory: String, limit: Int = .max) -> [String]? {
        guard let dir = opendir(directory) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while names.count < limit, let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// A whole file's bytes (a journal, a /proc file), or nil when it cannot be opened.
    /// A read error ends it early: what was read so far.
    public static func readWholeFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return readToEnd(fd, path)
    }

    /// A regular file's last `limit` bytes (all of a smaller one), or nil when it cannot be
    /// opened or is no regular file: what a log of gigabytes ends with, without reading it
    /// whole. A FIFO or a device put where a log was is neither waited for nor read.
    public static func readFileTail(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let size = lseek(fd, 0, SEEK_END)
        guard size >= 0, lseek(fd, max(0, size - off_t(limit)), SEEK_SET) >= 0 else { return nil }
        var bytes = readToEnd(fd, path)
        // A file that grew meanwhile (a run still going) gives no more than asked.
        if bytes.count > limit { bytes.removeFirst(bytes.count - limit) }
        return bytes
    }

    /// `path` made absolute with every symlink, `.` and `..` resolved; nil when it does not exist.
    public static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func readToEnd(_ fd: Int32, _ path: String) -> [UInt8] {
        var result: [UInt8] = []
        // Most files read here (/proc, cgroup files) are a line or a page: a small first
        // chunk, grown for the rare large one.
        var chunk = [UInt8](repeating: 0, count: 4096)
        while let n = try? Syscall.retrying("read \(path)", { chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }), n > 0 {
            result.append(contentsOf: chunk[0..<n])
            if n == chunk.count, chunk.count < 64 * 1024 { chunk = [UInt8](repeating: 0, count: 64 * 1024) }
        }
        return result
    }

    /// Writes `bytes` to `path` whole: into `temporary` first, then renamed over `path`, so
    /// that a reader sees the old file or the new one, never half of one (a report, a
    /// summary, a metrics page that node_exporter reads at any moment).
    /// - Returns: nil when written; else the errno of the step that failed, the temporary
    ///   file removed. A close that fails counts (some filesystems, NFS or a quota, say
    ///   "no space" only then).
    ///
    /// The temporary file is made new (O_EXCL, O_NOFOLLOW): in a directory others may write
    /// (a group-writable textfile collector directory), a file or symlink planted at its
    /// predictable name is removed, never written through.
    public static func replaceFile(_ path: String, with bytes: [UInt8], temporary: String, mode: mode_t = 0o644) -> Int32? {
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        var fd = open(temporary, flags, mode)
        if fd < 0, errno == EEXIST, unlink(temporary) == 0 { fd = open(temporary, flags, mode) }
        guard fd >= 0 else { return errno }
        var code: Int32 = 0
        do throws(SystemError) {
            try writeAll(fd, bytes)
        } catch {
            code = error.errno
        }
        if systemClose(fd) != 0, code == 0 { code = errno }
        if code == 0, rename(temporary, path) != 0 { code = errno }
        guard code != 0 else { return nil }
        unlink(temporary)
        return code
    }

    public static func close(_ fd: Int32) {
        _ = systemClose(fd)  // after close, even EINTR leaves fd closed on Linux: never retry
    }

    /// Writes every byte of `bytes` to `fd`, however many calls that takes (a pipe or a
    /// terminal takes part of a large write at a time), retrying EINTR. It blocks while the
    /// reader does not read: call it off the loop's thread, or on a regular file. A
    /// descriptor someone else made non-blocking (EAGAIN) is waited on until it takes more.
    /// - Parameter suppressingSIGPIPE: send(2) with MSG_NOSIGNAL rather than write(2), for
    ///   a socket whose peer may have gone: EPIPE is thrown instead of SIGPIPE raised.
    /// - Throws: `SystemError` with the errno of the call that failed (ENOSPC for one that
    ///   made no progress without saying why); the bytes before it are out. A closed or bad
    ///   descriptor is an ordinary error here, not a trap: the caller's to give up on.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, suppressingSIGPIPE: Bool = false) throws(SystemError) {
        let operation = suppressingSIGPIPE ? "send" : "write"
        var offset = 0
        while offset < bytes.count {
            let start = bytes.baseAddress! + offset, count = bytes.count - offset
            let n: Int
            do throws(SystemError) {
                n = try Syscall.retrying(operation) {
                    suppressingSIGPIPE ? send(fd, start, count, Int32(MSG_NOSIGNAL)) : write(fd, start, count)
                }
            } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
                var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&entry, 1, 100)
                continue
            }
            guard n > 0 else { throw SystemError(operation, errno: ENOSPC) }
            offset += n
        }
    }

    /// `writeAll` for an array.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], suppressingSIGPIPE: Bool = false) throws(SystemError) {
        // withUnsafeBytes rethrows untyped: the error comes out through a Result.
        try bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try writeAll(fd, raw, suppressingSIGPIPE: suppressingSIGPIPE) }
        }.get()
    }

    /// Sends `bytes` without blocking and without SIGPIPE. Returns the count written (0 when
    /// the peer's buffer is full) or nil when the peer is gone.
    ///
    /// A descriptor that is not a socket (a standard stream that is a pipe, as a job step's
    /// under srun is) is written with write(2) instead: the loop opened it non-blocking, and
    /// a reader gone is EPIPE where SIGPIPE is ignored (the CLI ignores it).
    static func sendNonBlocking(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int? {
        do throws(SystemError) {
            return try Syscall.retrying("send") {
                send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
        } catch where error.errno == ENOTSOCK {
            do throws(SystemError) {
                return try Syscall.retrying("write") { systemWrite(fd, bytes.baseAddress, bytes.count) }
            } catch {
                return error.errno == EAGAIN || error.errno == EWOULDBLOCK ? 0 : nil
            }
        } catch {
            return error.errno == EAGAIN || error.errno == EWOULDBLOCK ? 0 : nil
        }
    }
}
