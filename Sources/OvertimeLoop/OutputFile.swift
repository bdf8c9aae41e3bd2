#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file a user named for Overtime to write whole (`--report`, `--metrics-file`, `overtime
/// report -o`), looked at when it is named, before any task starts.
///
/// Only a regular file of ours is replaced: a path that does not exist yet, or a regular file
/// this user owns with no other name (hard link), is written to a temporary beside it that is
/// renamed over it, so a reader (node_exporter, a browser) sees the old file or the new one,
/// never half of one. Anything else is written through, as a shell's `>` would: a symlink's
/// target, a FIFO (which must have its reader already), a character device, a regular file
/// that is someone else's or has other names. A name of one of Overtime's own descriptors (`/dev/stdout`, `/dev/stderr`,
/// `/dev/fd/N`, `/proc/self/fd/N`) is written to that descriptor where it stands, as `-`
/// writes to stdout: never cut, never rewound. All of these are opened here, without waiting,
/// so a descriptor that is not open, or a target that cannot be written, is known before the
/// task runs, and no rename ever replaces a symlink, a device or a FIFO with a regular file.
public final class OutputFile: Sendable {
    public let path: String
    /// The descriptor written through, for anything but a regular file of ours.
    private let through: Int32?
    /// The descriptor of Overtime's that the path names (`/dev/stdout` names 1), if it does.
    public let inheritedDescriptor: Int32?

    /// Why a path cannot be written.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// It names a descriptor of Overtime's (`/dev/fd/N`, `/dev/stdout`) that was not
        /// given to it (EBADF).
        case descriptorNotGiven(Int32)
        /// It is a directory (EISDIR).
        case directory
        /// A FIFO nobody reads yet (ENXIO): its reader must start first.
        case fifoWithoutReader
        /// The directory the file would be made in cannot be written.
        case directoryNotWritable(String, SystemError)
        /// Anything else the system refused.
        case failed(SystemError)

        /// The errno in words, and a hint where one helps: "Permission denied (in /srv)".
        public var reason: String {
            switch self {
            case let .descriptorNotGiven(fd): Self.words(EBADF) + " (descriptor \(fd): none was given to overtime)"
            case .directory: Self.words(EISDIR)
            case .fifoWithoutReader: Self.words(ENXIO) + " (a FIFO nobody reads yet: start its reader first)"
            case let .directoryNotWritable(directory, error): error.reason + " (in \(directory))"
            case let .failed(error): error.reason
            }
        }

        public var description: String { reason }

        private static func words(_ code: Int32) -> String { String(cString: strerror(code)) }
    }

    /// - Throws: `Refusal` when the path is a directory, its directory does not exist or
    ///   cannot be written, or what it names cannot be opened for writing.
    public init(path: String) throws(Refusal) {
        self.path = path
        inheritedDescriptor = Self.descriptorNamed(by: path)
        if let inheritedDescriptor {
            // Only one the user gave: every descriptor Overtime makes is close-on-exec from
            // birth, and one inherited across exec cannot be.
            let flags = fcntl(inheritedDescriptor, F_GETFD)
            guard flags >= 0, flags & FD_CLOEXEC == 0 else {
                throw .descriptorNotGiven(inheritedDescriptor)
            }
            // Not open is the user's mistake here, not a bug of ours: said, not trapped on.
            let copy = fcntl(inheritedDescriptor, F_DUPFD_CLOEXEC, 3)
            guard copy >= 0 else { throw .failed(SystemError("duplicate descriptor \(inheritedDescriptor)", errno: errno)) }
            through = copy
            return
        }
        var info = stat()
        if lstat(path, &info) != 0 {
            let code = errno
            guard code == ENOENT else { throw .failed(SystemError("lstat", errno: code)) }
            through = nil
        } else if info.st_mode & S_IFMT == S_IFDIR {
            throw .directory
        } else if Self.isOurs(info) {
            through = nil
        } else {
            // Never waiting: a FIFO with no reader yet is refused (ENXIO) rather than waited
            // on, since the wait could not be interrupted. Blocking again once open.
            let fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                let code = errno
                throw code == ENXIO ? .fifoWithoutReader : .failed(SystemError("open", errno: code))
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            through = fd
            return
        }
        let directory = Self.directory(of: path)
        guard access(directory, W_OK) == 0 else { throw .directoryNotWritable(directory, SystemError("access", errno: errno)) }
    }

    deinit {
        if let through { Descriptors.close(through) }
    }

    /// Whether the path is a regular file of ours (or none yet), replaced on each write;
    /// otherwise it is written through.
    public var isReplaced: Bool { through == nil }

    /// Writes `bytes` as the file's whole content. Blocks until written: call it off the
    /// loop's thread.
    /// - Returns: nil when written; otherwise why not.
    public func write(_ bytes: [UInt8]) -> SystemError? {
        writeReturningErrno(bytes).map { SystemError("write \(path)", errno: $0) }
    }

    private func writeReturningErrno(_ bytes: [UInt8]) -> Int32? {
        if let through { return writeWhole(through, bytes) }
        // Replaced whole, whatever stands there now: a symlink planted since the start is
        // replaced, never followed (the temporary is made with O_EXCL and O_NOFOLLOW).
        return Descriptors.replaceFile(path, with: bytes, temporary: path + ".tmp-\(getpid())")
    }

    /// A regular file this user owns, under this one name: replacing it loses nothing of
    /// anyone else's.
    private static func isOurs(_ info: stat) -> Bool {
        info.st_mode & S_IFMT == S_IFREG && info.st_uid == geteuid() && info.st_nlink == 1
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The descriptor `path` names: `/dev/fd/N` or `/proc/self/fd/N`, or a symlink to one
    /// (`/dev/stdout` is one to `/proc/self/fd/1`).
    private static func descriptorNamed(by path: String) -> Int32? {
        var name = path
        for _ in 0..<4 {
            for prefix in ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"] where name.hasPrefix(prefix) {
                return Int32(name.dropFirst(prefix.count))
            }
            var target = [CChar](repeating: 0, count: 4096)
            let n = readlink(name, &target, target.count - 1)
            guard n > 0 else { return nil }
            name = String(decoding: target[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return nil
    }

    /// Writes `bytes` through `fd`: a regular file is cut to them, a descriptor of Overtime's
    /// and anything else (a pipe, a terminal) take them where they stand.
    private func writeWhole(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        var info = stat()
        if inheritedDescriptor == nil, fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
            guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else { return errno }
        }
        do throws(SystemError) {
            try Descriptors.writeAll(fd, bytes)
            return nil
        } catch {
            return error.errno
        }
    }
}
