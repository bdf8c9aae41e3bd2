import OvertimeLoop
import OvertimeProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How the engine Overtime runs in warns of its end (DESIGN §8): Slurm's
/// `sbatch --signal=B:USR1@60` sends the batch shell SIGUSR1 sixty seconds before the job's
/// time limit. With a warning set, that signal becomes an `expiring` message to every task
/// instead of being passed on.
public struct EngineWarning: Sendable, Equatable {
    /// The signal the engine sends.
    public var signal: Signal
    /// How long the engine leaves after it (`--warn-lead`); nil: ask Slurm, else the default.
    public var lead: Duration?
    /// The Slurm job Overtime runs in (`SLURM_JOB_ID`), whose end time Slurm knows.
    public var slurmJobID: String?

    public init(signal: Signal, lead: Duration? = nil, slurmJobID: String? = nil) {
        self.signal = signal
        self.lead = lead
        self.slurmJobID = slurmJobID
    }

    /// The signals that cannot be the warning: Overtime's own (SIGINT, SIGTERM), those no
    /// process can catch (SIGKILL, SIGSTOP), and SIGCHLD, which the reaper needs.
    public static let refusedSignals = Signal.refusedAsEngineWarning
}

/// What a command run for the engine (`squeue`, `scontrol`) did.
public struct EngineCommandResult: Sendable {
    public var arguments: [String]
    /// How it ended; nil when it could not start or was cut at its time limit (`failure`
    /// says which).
    public var exit: ChildExit?
    /// Its standard output and error, at most 64 KiB each.
    public var output: String
    public var errorOutput: String
    public var failure: String?

    /// It ran and exited 0.
    public var succeeded: Bool { exit == .exited(0) }

    /// What went wrong, in a few words, for a note: `squeue: exited 1: invalid job id`.
    public var problem: String {
        let name = arguments.first ?? "command"
        if let failure { return "\(name): \(failure)" }
        let how = switch exit {
        case let .exited(code)?: "exited \(code)"
        case let .signaled(signal)?: "died of \(Signal(rawValue: signal).name)"
        case nil: "did not run"
        }
        let said = errorOutput.split(separator: "\n").first.map { ": " + $0 } ?? ""
        return "\(name): \(how)\(said)"
    }
}

/// Runs a short command of the engine's as a child of the loop (reaped by its reaper, so
/// the orphan reaper of `adoptOrphans` cannot take its status), its output in unlinked
/// temporary files, cut with SIGKILL at its time limit: the loop never waits on it.
/// Loop-thread only.
final class EngineCommand {
    private var child: ChildProcess?
    private let timer: LoopTimer
    private let outputFD: Int32
    private let errorFD: Int32
    private let arguments: [String]
    private var cut = false
    private var done: ((EngineCommandResult) -> Void)?
    /// Keeps itself alive until the command is over.
    private var selfReference: EngineCommand?

    /// Starts `arguments` (looked up on the inherited PATH) and calls `done` once, on the
    /// loop thread, when it has exited or was cut at `limit`.
    static func run(_ arguments: [String], limit: Duration, loop: EventLoop, environment: EnvironmentBlock,
                    input: Int32?, done: @escaping (EngineCommandResult) -> Void) {
        guard let out = temporaryFile(), let err = temporaryFile() else {
            done(EngineCommandResult(arguments: arguments, exit: nil, output: "", errorOutput: "",
                                     failure: "no temporary file for its output: \(String(cString: strerror(errno)))"))
            return
        }
        let command = EngineCommand(arguments: arguments, timer: LoopTimer(loop: loop), outputFD: out, errorFD: err, done: done)
        let request = SpawnRequest(arguments: arguments, baseEnvironment: environment, environment: [],
                                   workingDirectory: nil, descriptors: [input ?? -1, out, err])
        do {
            command.child = try ChildProcess(loop: loop, request: request) { [command] exit in command.exited(exit) }
        } catch {
            command.finish(EngineCommandResult(arguments: arguments, exit: nil, output: "", errorOutput: "",
                                               failure: error.step == .exec ? "could not run it: \(error)" : "\(error)"))
            return
        }
        command.selfReference = command
        command.timer.schedule(inNanoseconds: limit.nanoseconds) { [command] in
            command.cut = true
            _ = command.child?.signalGroup(SIGKILL)
        }
    }

    private init(arguments: [String], timer: LoopTimer, outputFD: Int32, errorFD: Int32, done: @escaping (EngineCommandResult) -> Void) {
        self.arguments = arguments
        self.timer = timer
        self.outputFD = outputFD
        self.errorFD = errorFD
        self.done = done
    }

    private func exited(_ exit: ChildExit) {
        let result = EngineCommandResult(arguments: arguments, exit: cut ? nil : exit, output: Self.readBack(outputFD),
                                         errorOutput: Self.readBack(errorFD), failure: cut ? "cut at its time limit" : nil)
        finish(result)
    }

    private func finish(_ result: EngineCommandResult) {
        timer.close()
        Descriptors.close(outputFD)
        Descriptors.close(errorFD)
        let done = self.done
        self.done = nil
        selfReference = nil
        done?(result)
    }

    /// A file of our own, already unlinked: it goes when its descriptor closes.
    private static func temporaryFile() -> Int32? {
        let directory = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((directory + "/overtime-engine-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // a task spawned meanwhile must not inherit it
        unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        return fd
    }

    private static func readBack(_ fd: Int32) -> String {
        var bytes = [UInt8](repeating: 0, count: 64 * 1024)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return String(decoding: bytes.prefix(max(0, n)), as: UTF8.self)
    }
}

/// Reading a Slurm job's end time.
public enum SlurmEndTime {
    /// The time limit for `squeue` and `scontrol`: a slurmctld that does not answer in this
    /// long costs the task its warning's precision, not the warning (the default follows).
    public static let queryLimit = Duration.seconds(3)

    /// `squeue -h -j ID -o %e` prints `2026-03-01T12:34:56` (local time); `Unknown`, `N/A`
    /// or anything else is nil.
    public static func parse(_ text: String) -> Int? {
        let trimmed = text.split(whereSeparator: { $0 == "\n" || $0 == " " }).first ?? ""
        // Six numbers, fixed widths: YYYY-MM-DD T HH:MM:SS.
        let shape = Array("dddd-dd-ddTdd:dd:dd".utf8)
        let bytes = Array(trimmed.utf8)
        guard bytes.count == shape.count else { return nil }
        var numbers: [Int32] = []
        var current: Int32 = 0
        for (byte, expected) in zip(bytes, shape) {
            if expected == UInt8(ascii: "d") {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                current = current * 10 + Int32(byte - UInt8(ascii: "0"))
            } else {
                guard byte == expected else { return nil }
                numbers.append(current)
                current = 0
            }
        }
        numbers.append(current)
        var parts = tm()
        parts.tm_year = numbers[0] - 1900
        parts.tm_mon = numbers[1] - 1
        parts.tm_mday = numbers[2]
        parts.tm_hour = numbers[3]
        parts.tm_min = numbers[4]
        parts.tm_sec = numbers[5]
        parts.tm_isdst = -1  // Slurm prints local time; mktime knows whether DST holds then
        let seconds = mktime(&parts)
        return seconds == -1 ? nil : Int(seconds)
    }

    /// The `EndTime=` field of `scontrol show job ID`.
    public static func parseScontrol(_ text: String) -> Int? {
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) where word.hasPrefix("EndTime=") {
            return parse(String(word.dropFirst("EndTime=".count)))
        }
        return nil
    }

    /// The wall clock now, in seconds: a job's end time is a date, so only the wall clock
    /// can say how far it is (the monotonic clock rules everything else).
    static func wallNow() -> Int {
        Int(time(nil))
    }
}
