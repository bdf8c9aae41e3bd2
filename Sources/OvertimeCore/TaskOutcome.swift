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
    /// What its cancel said beyond the reason: for a `timeout`, what went quiet.
    public var cancelWhy: String?
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
    /// Its peak memory and CPU time (DESIGN §7).
    public var usage: ResourceUsage = ResourceUsage()
    /// How many of its processes the kernel's OOM killer killed, from its memory cgroup's
    /// counter; nil where it had none (nothing counts them then).
    public var oomKills: Int?
    /// Without a counter: it died of a SIGKILL nobody here sent while its memory, last
    /// sampled, was within a tenth of its `memory-max`. Evidence, not proof.
    public var likelyOOM = false
    /// When it died of a signal: whether Overtime sent it (its cancel's SIGTERM, SIGKILL
    /// after grace), passed it on (a signal the supervisor received), or neither.
    public var signalSender: SignalSender?
    /// The phase it named last (docs/hangs.md); nil when it named none.
    public var phase: String?
    /// Times it was marked stalled under `--on-stall warn`.
    public var stalls = 0

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

    /// What happened, in one word (DESIGN §7's outcomes): the OOM killer's work is `oom`
    /// whatever followed it; Overtime's SIGKILL after grace is `killed`; a signal it did not
    /// send is `signal`.
    public var kind: OutcomeKind {
        if case .failedToStart = termination { return .failedToStart }
        if succeeded { return .succeeded }
        if let oomKills, oomKills > 0 { return .oom }
        if killed { return .killed }
        // Cancelled, then killed by someone else's SIGKILL before the end of grace: not an
        // end within grace, and not Overtime's doing.
        if cancelReason != nil, termination == .signaled(.kill), signalSender != .overtime { return .signal }
        if cancelReason != nil { return .cancelled }
        if case .signaled = termination, signalSender != .overtime { return .signal }
        return .failed
    }

    /// The exit code of DESIGN §4, the one GNU `timeout` users expect:
    /// 137 when SIGKILLed, 124 when cancelled for a limit (timeout, deadline, revoked, memory), the
    /// child's own status otherwise (128+N for a death by signal N), 126/127 when it could
    /// not be started. After Ctrl-C, a task that died of the SIGTERM of its cancel gives
    /// 130, as a shell user expects of Ctrl-C, rather than 143.
    public var exitCode: Int32 {
        if case let .failedToStart(failure) = termination { return failure.exitCode }
        // A cancelled task that died of SIGKILL did not end within grace, whoever sent it
        // (Overtime after grace, or the OOM killer at the hard limit during a memory cancel).
        if killed || (cancelReason != nil && termination == .signaled(.kill)) { return 128 + Signal.kill.rawValue }
        if interrupted, cancelReason == .user, termination == .signaled(.terminate) { return 128 + Signal.interrupt.rawValue }
        switch cancelReason {
        case .timeout?, .deadline?, .revoked?, .memory?: return 124
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

/// The one-word outcomes of DESIGN §7, as reports name them.
public enum OutcomeKind: String, Sendable, Equatable, CaseIterable {
    /// Exited 0, not cancelled.
    case succeeded
    /// Exited non-zero on its own (or died of a signal Overtime sent it some other way).
    case failed
    /// Overtime cancelled it and it ended within grace.
    case cancelled
    /// Overtime's SIGKILL after grace ended it.
    case killed
    /// The kernel's OOM killer killed a process of it.
    case oom
    /// It died of a signal Overtime did not send.
    case signal
    /// Its command could not be started.
    case failedToStart = "failed-to-start"
}

/// Who sent the signal a task died of.
public enum SignalSender: String, Sendable, Equatable {
    /// Overtime: its cancel's SIGTERM, or SIGKILL after grace or at shutdown.
    case overtime
    /// A signal the supervisor received and passed on (SIGHUP, SIGUSR1, …).
    case forwarded
    /// Someone else: `kill` from outside, the OOM killer, a crash (SIGSEGV, SIGABRT).
    case outside
}

/// A task's peak memory and CPU time. From its cgroup where it had one (its memory
/// cgroup's high-water mark, its CPU counters), else from what was sampled in /proc and
/// what the reaper's `wait4` reported for the leader and the children it waited for.
public struct ResourceUsage: Sendable, Equatable {
    /// Bytes; nil when nothing measured it.
    public var peakMemory: UInt64?
    public var cpuUser: Duration?
    public var cpuSystem: Duration?
    /// Where `peakMemory` came from.
    public var memorySource: MemorySource?

    public enum MemorySource: String, Sendable, Equatable {
        /// The memory cgroup's own high-water mark: every process of the task, exactly.
        case cgroup
        /// The largest sum of its processes' resident memory that was sampled (or the
        /// largest single process the reaper saw, if that was more).
        case sampled
        /// The largest resident set among the leader and the children it waited for, as
        /// `wait4` reports it (what `/usr/bin/time -v` calls its maximum resident set).
        case reaper
    }

    public init(peakMemory: UInt64? = nil, cpuUser: Duration? = nil, cpuSystem: Duration? = nil, memorySource: MemorySource? = nil) {
        self.peakMemory = peakMemory
        self.cpuUser = cpuUser
        self.cpuSystem = cpuSystem
        self.memorySource = memorySource
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
