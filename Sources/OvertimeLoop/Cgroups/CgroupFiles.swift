#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The system calls the cgroup code makes on the cgroup filesystem, each through
/// `Syscall.retrying`: its directories made and removed, its files opened, read and written.
/// A failure is a `SystemError`, or its errno where the caller only needs to know which.
enum CgroupFiles {
    static func isWritable(_ path: String) -> Bool {
        (try? Syscall.retrying("access \(path)") { access(path, W_OK) }) != nil
    }

    /// Makes a cgroup directory; one there already will do (made by another thread, or by
    /// an earlier run of the same name).
    static func makeDirectory(_ path: String, _ operation: @autoclosure () -> String) throws(SystemError) {
        do throws(SystemError) {
            try Syscall.retrying(operation()) { mkdir(path, 0o755) }
        } catch where error.errno == EEXIST {
        }
    }

    /// Removes an empty cgroup directory.
    /// - Returns: 0, or the errno (EBUSY while a process is still in it, ENOENT when gone).
    @discardableResult
    static func removeDirectory(_ path: String) -> Int32 {
        failure(of: { () throws(SystemError) in try Syscall.retrying("remove \(path)") { rmdir(path) } })
    }

    /// Opens a cgroup file, close-on-exec.
    static func openFile(_ path: String, _ flags: Int32) throws(SystemError) -> Int32 {
        try Syscall.retrying("open \(path)") { open(path, flags | O_CLOEXEC) }
    }

    /// Writes `text` to a cgroup file; 0, or the errno.
    @discardableResult
    static func write(_ text: String, to path: String) -> Int32 {
        let fd: Int32
        do throws(SystemError) {
            fd = try openFile(path, O_WRONLY)
        } catch {
            return error.errno
        }
        defer { Descriptors.close(fd) }
        return write(text, toDescriptor: fd)
    }

    /// Writes `text` to an open cgroup file (each write one record); 0, or the errno.
    static func write(_ text: String, toDescriptor fd: Int32) -> Int32 {
        failure(of: { () throws(SystemError) in try Descriptors.writeAll(fd, Array(text.utf8)) })
    }

    /// Writes `text` from the start of a cgroup file kept open (a reset, a kill); 0, or the
    /// errno (EIO when the kernel took part of it).
    static func rewrite(_ text: String, atStartOf fd: Int32) -> Int32 {
        let bytes = Array(text.utf8)
        do throws(SystemError) {
            let written = try Syscall.retrying("write \(text)") { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
            return written == bytes.count ? 0 : EIO
        } catch {
            return error.errno
        }
    }

    /// Reads a cgroup file kept open from its start (the kernel makes its text afresh for
    /// each read) into `buffer`: how many bytes, or nil when the read fails.
    static func readFromStart(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        try? Syscall.retrying("read a cgroup file") { pread(fd, buffer.baseAddress, buffer.count, 0) }
    }

    /// A cgroup file's whole text, read again from its start.
    static func readFromStart(_ fd: Int32) -> [UInt8]? {
        withUnsafeTemporaryAllocation(byteCount: 1024, alignment: 1) { buffer -> [UInt8]? in
            guard let n = readFromStart(fd, into: buffer) else { return nil }
            return Array(buffer.prefix(n))
        }
    }

    /// Sends `signal` to `pid`; whether it was sent.
    static func sendSignal(_ signal: Int32, to pid: Int32) -> Bool {
        (try? Syscall.retrying("signal \(pid)") { kill(pid, signal) }) != nil
    }

    /// 0 when `body` succeeds, else its error's errno.
    private static func failure(of body: () throws(SystemError) -> Void) -> Int32 {
        do throws(SystemError) {
            try body()
            return 0
        } catch {
            return error.errno
        }
    }
}
