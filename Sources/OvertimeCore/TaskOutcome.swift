import OvertimeProtocol

/// How the process ended, as the kernel reported it.
public enum Termination: Sendable, Equatable {
    /// It exited with this status.
    case exited(Int32)
    /// It died of this signal.
    case signaled(Signal)
    /// It never ran: the command could not be started.
    case failedToStart(SpawnFailure)
}

/// Why a command could not be started.
public struct SpawnFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The errno from exec (or from preparing it).
    public var errno: Int32
    /// What happened, e.g. "no-such-cmd: command not found".
    public var message: String
    /// True when a step before exec failed (the working directory, a user or group switch,
    /// a resource limit), not the command itself.
    public var beforeExec: Bool

    public init(errno: Int32, message: String, beforeExec: Bool = false) {
        self.errno = errno
        self.message = message
        self.beforeExec = beforeExec
    }

    public var description: String { message }

    /// GNU `timeout`'s codes: 127 not found, 126 found but not executable, 125 anything else
    /// (Overtime itself could not do it: a working directory that is not there, a user it
    /// could not switch to, out of descriptors).
    public var exitCode: Int32 {
        if beforeExec { return 125 }
        switch errno {
        case ErrorNumber.ENOENT, ErrorNumber.ENOTDIR: return 127
        case ErrorNumber.EACCES, ErrorNumber.EPERM, ErrorNumber.ENOEXEC, ErrorNumber.EISDIR,
             ErrorNumber.ETXTBSY, ErrorNumber.ELOOP, ErrorNumber.ENAMETOOLONG, ErrorNumber.E2BIG:
            return 126
        default: return 125
        }
    }
}

/// Everything known about a task once it is over.
public struct TaskOutcome: Sendable, Equatable {
    public var task: TaskRef
    /// The process id it had, if it started.
    public var pid: Int32?
    public var termination: Termination
    /// Set when Overtime cancelled it (even if it then exited on its own).
    public var cancelReason: CancelReason?
    /// True when Overtime's SIGKILL is what ended it.
    public var killed: Bool
    /// From start to exit.
    public var elapsed: Duration
    /// The last progress it reported, fields merged.
    public var lastProgress: Progress?
    /// The last `result` value it sent.
    public var result: JSONValue?
    /// Lines on its channel that were refused.
    public var protocolErrors: Int
    /// Whether it reported `ready`.
    public var wasReady: Bool
    /// Its `user` cancel came from Ctrl-C (SIGINT to the supervisor).
    public var interrupted: Bool

    public init(task: TaskRef, pid: Int32?, termination: Termination, cancelReason: CancelReason?, killed: Bool,
                elapsed: Duration, lastProgress: Progress?, result: JSONValue?, protocolErrors: Int, wasReady: Bool,
                interrupted: Bool = false) {
        self.task = task
        self.pid = pid
        self.termination = termination
        self.cancelReason = cancelReason
        self.killed = killed
        self.elapsed = elapsed
        self.lastProgress = lastProgress
        self.result = result
        self.protocolErrors = protocolErrors
        self.wasReady = wasReady
        self.interrupted = interrupted
    }

    /// Exited 0 and was not cancelled.
    public var succeeded: Bool {
        termination == .exited(0) && cancelReason == nil
    }

    /// The exit code of DESIGN §4, the one GNU `timeout` users expect:
    /// 137 when SIGKILLed, 124 when cancelled for time (timeout, deadline, revoked), the
    /// child's own status otherwise (128+N for a death by signal N), 126/127 when it could
    /// not be started. After Ctrl-C, a task that died of the SIGTERM of its cancel gives
    /// 130, as a shell user expects of Ctrl-C, rather than 143.
    public var exitCode: Int32 {
        if case let .failedToStart(failure) = termination { return failure.exitCode }
        if killed { return 128 + Signal.kill.rawValue }
        if interrupted, cancelReason == .user, termination == .signaled(.terminate) { return 128 + Signal.interrupt.rawValue }
        switch cancelReason {
        case .timeout?, .deadline?, .revoked?: return 124
        default: return preservedStatus
        }
    }

    /// The child's own status, whatever happened (`--preserve-status`).
    public var preservedStatus: Int32 {
        switch termination {
        case let .exited(code): return code
        case let .signaled(signal): return 128 + signal.rawValue
        case let .failedToStart(failure): return failure.exitCode
        }
    }
}

/// The errno values Overtime reasons about, named without importing Glibc into pure code.
package enum ErrorNumber {
    package static let EPERM: Int32 = 1
    package static let ENOENT: Int32 = 2
    package static let E2BIG: Int32 = 7
    package static let ENOEXEC: Int32 = 8
    package static let EACCES: Int32 = 13
    package static let ENOTDIR: Int32 = 20
    package static let EISDIR: Int32 = 21
    package static let ETXTBSY: Int32 = 26
    package static let ENAMETOOLONG: Int32 = 36
    package static let ELOOP: Int32 = 40
}
