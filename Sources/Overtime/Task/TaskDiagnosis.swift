import OvertimeLoop
import OvertimeProtocol

/// The task's diagnose command (DESIGN §7) while it runs, and the lines around it in the
/// task's stderr, its log, or its output handler. Owns that process and its notes, and
/// ends them in `cut` or `exited`. Loop-thread only.
final class TaskDiagnosis {
    private let spec: TaskSpec
    private unowned let core: SupervisorState
    private let output: TaskOutput
    private var running: (process: ChildProcess, notes: DiagnosisNotes, startedAt: MonotonicInstant)?

    init(spec: TaskSpec, core: SupervisorState, output: TaskOutput) {
        self.spec = spec
        self.core = core
        self.output = output
    }

    /// Starts the command against the still-running leader `pid`, outside the task's
    /// cgroup and group, so the cancel that follows does not kill it too. Returns false
    /// when it did not start (the cancel is then due at once).
    /// - Parameter reason: the cancel due; nil when the task stalled and goes on (`--on-stall warn`).
    func start(pid: Int32, due reason: CancelReason?, loop: EventLoop, onExit: @escaping (ChildExit) -> Void) -> Bool {
        guard let diagnose = spec.diagnose, let opened = try? openOutput() else { return false }
        let (output, notes) = opened
        defer { Descriptors.close(output) }
        let command = diagnose.command(pid: pid)
        let why = reason.map { "\($0.rawValue) due; diagnosing first" } ?? "stalled; diagnosing, and it goes on"
        notes.write("overtime: \(notedName): \(why) (at most \(DurationText.format(diagnose.limit))): \(command)\n")
        let request = SpawnRequest(arguments: ["/bin/sh", "-c", command], baseEnvironment: core.inheritedEnvironment,
                                   environment: ["OVERTIME_TASK_PID=\(pid)", "OVERTIME_TASK=\(spec.name)"],
                                   workingDirectory: spec.workingDirectory,
                                   descriptors: [core.nullInput ?? -1, output, output])
        do {
            running = (try ChildProcess(loop: loop, request: request, onExit: onExit), notes, MonotonicInstant.now())
            return true
        } catch {
            notes.write("overtime: \(notedName): the diagnose command could not start: \(error)\n")
            notes.close()
            return false
        }
    }

    /// Where the command writes (its descriptor, closed once it is spawned), and where the
    /// lines around it go (a descriptor of their own, closed once it has exited). A log is
    /// appended to, as the task's own logs are opened.
    private func openOutput() throws(SystemError) -> (output: Int32, notes: DiagnosisNotes) {
        let output: Int32
        switch spec.stderr {
        case .inherit: output = try Descriptors.duplicate(2)
        case .discard: output = try Descriptors.openNull(forWriting: true)
        case let .file(path, _): output = try Descriptors.openForWriting(path, append: true)
        case let .capture(sink), let .terminal(_, _, sink):
            var writeEnd: [Int32] = []
            output = try self.output.pipe(into: sink, valve: nil, passing: &writeEnd)
        }
        do {
            return (output, DiagnosisNotes(fd: try Descriptors.duplicate(output)))
        } catch {
            Descriptors.close(output)
            throw error
        }
    }

    /// The task's name as the lines show it: they go to its stderr, a terminal perhaps, and
    /// a name (by default its command's base name) may hold anything.
    private var notedName: String { JobFileText.printable(spec.name, limit: .max) }

    /// The command exited by itself. Returns false when it was cut already (said then).
    func exited(_ exit: ChildExit) -> Bool {
        guard let running else { return false }
        self.running = nil
        let how = switch exit {
        case let .exited(code): "exited \(code)"
        case let .signaled(signal): "died of \(Signal(rawValue: signal).name)"
        }
        running.notes.write("overtime: \(notedName): the diagnose command \(how) after \(DurationText.format(MonotonicInstant.now() - running.startedAt))\n")
        running.notes.close()
        return true
    }

    /// The diagnosis must stop (its limit passed, a cancel that cannot wait came, the task
    /// ended): SIGKILL to it, said now (the task, and the supervisor, may be gone before its
    /// exit is heard).
    func cut(_ end: TaskMachine.DiagnosisEnd) {
        guard let running else { return }   // it ended by itself: said already
        self.running = nil
        running.process.signalGroup(Signal.kill.rawValue)
        let why = switch end {
        case .limitReached: "at its limit"
        case .preempted: "a cancel that could not wait came"
        case .taskEnded, .finished: "the task ended"
        }
        running.notes.write("overtime: \(notedName): the diagnose command was cut (\(why)) after \(DurationText.format(MonotonicInstant.now() - running.startedAt))\n")
        running.notes.close()
    }
}
