import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed system or libuv call: what was being done, and the errno behind it.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was being attempted, e.g. "socketpair for task 'train'".
    public var operation: String
    /// The positive errno (libuv's `UV_E*` codes are negated errnos on Unix).
    public var errno: Int32

    public init(_ operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String {
        "\(operation): \(reason)"
    }

    /// The errno in words: "No such file or directory".
    public var reason: String {
        String(cString: strerror(errno))
    }
}

/// The one way Overtime makes a plain system call: again while a signal interrupts it
/// (EINTR), and a failure as a typed `SystemError` carrying its errno. Every module above
/// the loop uses it rather than a retry loop of its own (OvertimeWorker, which never sees
/// the supervisor's code, keeps its own).
public enum Syscall {
    /// Runs `body`, a system call that reports failure as -1 with errno, until it returns
    /// anything but -1 or fails with something other than EINTR.
    /// - Returns: what `body` returned (a count, a descriptor, 0).
    /// - Throws: `SystemError(operation, errno:)` for the failure. EAGAIN, EPIPE and the
    ///   like are the caller's to handle (`catch` and look at `errno`).
    @discardableResult
    public static func retrying<T: FixedWidthInteger>(_ operation: @autoclosure () -> String, _ body: () -> T) throws(SystemError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            throw SystemError(operation(), errno: code)
        }
    }
}

/// `Syscall.retrying` for the loop's own descriptors, where codes that can only mean a bug
/// in Overtime (a bad descriptor, a bad address) stop the process at once rather than
/// travel on as ordinary errors.
@discardableResult
func syscall<T: FixedWidthInteger>(_ operation: @autoclosure () -> String, _ body: () -> T) throws(SystemError) -> T {
    do throws(SystemError) {
        return try Syscall.retrying(operation(), body)
    } catch {
        trapOnBug(error.errno, error.operation)
        throw error
    }
}

/// Checks a libuv return code (0 or positive is success, negative is `-errno`).
@discardableResult
func uvCheck(_ operation: @autoclosure () -> String, _ code: Int32) throws(SystemError) -> Int32 {
    if code >= 0 { return code }
    trapOnBug(-code, operation())
    throw SystemError(operation(), errno: -code)
}

private func trapOnBug(_ code: Int32, _ operation: String) {
    if code == EBADF || code == EFAULT {
        fatalError("\(operation): \(String(cString: strerror(code))) — a bug in Overtime")
    }
}
