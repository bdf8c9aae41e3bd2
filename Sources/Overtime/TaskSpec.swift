import Synchronization

/// Where a task's standard output or error goes.
public enum OutputTarget: Sendable {
    /// The supervisor's own descriptor (what `overtime run` does).
    case inherit
    /// `/dev/null`.
    case discard
    /// A file, created if missing. The task writes to it directly, so every byte it wrote
    /// is there even if it (or the supervisor) is killed.
    case file(path: String, append: Bool)
    /// A pipe the supervisor drains to the end; each chunk goes to the handler, on the
    /// supervisor's loop thread, before the task's `exited` event.
    case capture(@Sendable ([UInt8]) -> Void)
    /// Like `capture`, through a pseudo-terminal instead of a pipe: the task sees a terminal,
    /// so it line-buffers and colours its output as it would if run directly, with the
    /// window size of the terminal at `sizeFrom` (kept in step when SIGWINCH is passed on).
    /// Set on both stdout and stderr, the two share one terminal, as they would on a real
    /// one, and everything goes to stdout's handler. Where no pseudo-terminal can be opened,
    /// a pipe as for `capture`. While `valve` is held, no more is read (see `OutputValve`).
    case terminal(sizeFrom: Int32, valve: OutputValve? = nil, @Sendable ([UInt8]) -> Void)
}

/// A consumer's hold on the output it is handed (`OutputTarget.terminal`): while held, the
/// supervisor reads no more of the task's output, so the task waits on its own full
/// terminal or pipe — as it would writing to a slow terminal directly — and the
/// supervisor's loop, with every deadline and signal, goes on. A display that cannot write
/// as fast as a task prints holds it, and releases it once it has caught up.
/// Hold and release from any thread.
public final class OutputValve: Sendable {
    private let state = Mutex<(held: Bool, onRelease: [@Sendable () -> Void])>((false, []))

    public init() {}

    /// Stops the reading at the next chunk.
    public func hold() {
        state.withLock { $0.held = true }
    }

    /// Lets reading go on.
    public func release() {
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            guard state.held else { return [] }
            state.held = false
            defer { state.onRelease.removeAll() }
            return state.onRelease
        }
        for resume in waiting { resume() }
    }

    public var isHeld: Bool { state.withLock { $0.held } }

    /// Calls `resume` at the next release; false (and nothing registered) when not held.
    func whenReleased(_ resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard state.held else { return false }
            state.onRelease.append(resume)
            return true
        }
    }
}

/// Where a task's standard input comes from.
public enum InputSource: Sendable {
    case inherit
    case null
}

/// Everything needed to start one task.
public struct TaskSpec: Sendable {
    /// Shown in events and reports, and given to the task as `OVERTIME_TASK`.
    public var name: String
    /// argv, run directly (never through a shell); the command is found on `PATH`.
    public var arguments: [String]
    /// Variables to set on top of the inherited environment.
    public var environment: [String: String]
    /// When false the task starts from an empty environment (plus `environment` and the
    /// `OVERTIME_*` variables).
    public var inheritEnvironment: Bool
    public var workingDirectory: String?
    public var policy: BudgetPolicy
    public var stdin: InputSource
    public var stdout: OutputTarget
    public var stderr: OutputTarget
    /// The user, group, resource limits and nice value the task runs with.
    public var isolation: TaskIsolation
    /// The readiness protocols the task may also speak (DESIGN §3b).
    public var readiness: Readiness = Readiness()
    /// Its memory watchdog (DESIGN §7).
    public var memory: MemoryPolicy = .none
    /// Run before a `timeout` or `memory` cancel (DESIGN §7).
    public var diagnose: DiagnoseCommand?
    /// A directory put on the task's PYTHONPATH after its own entries: Overtime's bundled
    /// Python bridge (`PythonBridge.besideExecutable()`), so that its bars report with no
    /// library installed in its environment. Nil: PYTHONPATH is left as the task has it.
    public var pythonBridge: String?

    public init(
        name: String? = nil,
        arguments: [String],
        environment: [String: String] = [:],
        inheritEnvironment: Bool = true,
        workingDirectory: String? = nil,
        policy: BudgetPolicy = .default,
        stdin: InputSource = .inherit,
        stdout: OutputTarget = .inherit,
        stderr: OutputTarget = .inherit,
        isolation: TaskIsolation = .none
    ) {
        self.name = name ?? TaskSpec.defaultName(for: arguments)
        self.arguments = arguments
        self.environment = environment
        self.inheritEnvironment = inheritEnvironment
        self.workingDirectory = workingDirectory
        self.policy = policy
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.isolation = isolation
    }

    /// A task with `settings` (a job file's task, or `overtime run`'s options), its output
    /// and input as given. `pythonBridge` is the bridge's directory, for settings that have
    /// it on.
    public init(name: String? = nil, arguments: [String], settings: TaskSettings, pythonBridge: String?,
                stdin: InputSource = .inherit, stdout: OutputTarget = .inherit, stderr: OutputTarget = .inherit) {
        self.init(name: name, arguments: arguments, environment: settings.environment, inheritEnvironment: settings.inheritEnvironment,
                  workingDirectory: settings.workingDirectory, policy: settings.policy, stdin: stdin, stdout: stdout, stderr: stderr,
                  isolation: settings.isolation)
        readiness = settings.readiness
        memory = settings.memory
        diagnose = settings.diagnose
        self.pythonBridge = settings.pythonBridge ? pythonBridge : nil
    }

    /// Its settings, as a job file or `overtime run`'s options give them (a batch's pools
    /// and retries are not the task's to know: none).
    public var settings: TaskSettings {
        TaskSettings(environment: environment, workingDirectory: workingDirectory, policy: policy, resources: [:], retry: .none,
                     inheritEnvironment: inheritEnvironment, isolation: isolation, readiness: readiness, memory: memory,
                     diagnose: diagnose, pythonBridge: pythonBridge != nil)
    }

    /// The command's base name (`/usr/bin/python3` → `python3`); for a command run through
    /// `env` (`env -u X PYTHONHASHSEED=0 python3 train.py`), the one `env` runs, as that is
    /// the program a person means.
    public static func defaultName(for arguments: [String]) -> String {
        guard let command = arguments.first, !command.isEmpty else { return "task" }
        let name = command.split(separator: "/").last.map(String.init) ?? command
        guard name == "env" else { return name }
        var rest = arguments.dropFirst()
        while let word = rest.first {
            if word == "--" { rest = rest.dropFirst(); break }
            if word.hasPrefix("-") {
                // The options that take a separate value: -u NAME, -C DIR, -S STRING.
                rest = rest.dropFirst(["-u", "-C", "-S", "--unset", "--chdir", "--split-string"].contains(word) ? 2 : 1)
            } else if word.contains("=") {
                rest = rest.dropFirst()
            } else {
                break
            }
        }
        guard let program = rest.first, !program.isEmpty else { return name }
        return defaultName(for: [program])
    }
}
