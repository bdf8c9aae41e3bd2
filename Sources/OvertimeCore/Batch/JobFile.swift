import OvertimeProtocol

/// A batch of tasks for `overtime batch`, as read from a job file (docs/jobfile.md).
///
/// A `JobFile` that came out of `load` or `parse` is valid: names are unique, every
/// dependency names a task, there are no cycles, and every resource request fits its pool.
/// One built in code can be checked the same way with `validate(origin:)`.
public struct JobFile: Sendable, Equatable {
    /// How many tasks run at once when the file does not say.
    public static let defaultConcurrency = 4

    /// The most tasks running at once; at least 1.
    public var concurrency: Int
    /// The whole batch's time limit, from its start; nil for none. A task is not started
    /// when less than its `min-start` remains.
    public var deadline: Duration?
    /// The named pools tasks draw from (`gpu`, `mem_gb`).
    public var resources: [String: ResourcePool]
    /// The tasks, in file order, with `defaults` already merged in.
    public var tasks: [JobTask]
    /// Where the tasks run (DESIGN §8).
    public var executor: Executor = .local
    /// `warn-signal`, `warn-lead`: the engine's warning becomes `expiring` (DESIGN §8); the
    /// command line's `--warn-signal` and `$OVERTIME_WARN_SIGNAL` come first.
    public var warnSignal: Signal?
    public var warnLead: Duration?
    /// `metrics`, `metrics-file` (docs/metrics.md): the command line's `--metrics` and
    /// `--metrics-file` come first. The file's path is resolved against the job file's
    /// directory, as a `cwd` is.
    public var metrics: MetricsAddress?
    public var metricsFile: String?
    /// `stragglers` at the top level: for every sweep, array and peer group whose tasks do
    /// not give their own (docs/jobfile.md, Stragglers).
    public var stragglers: StragglerPolicy?

    /// A way to start a supervised task somewhere and hear its events.
    public enum Executor: String, Sendable, Equatable, CaseIterable {
        /// Here, as children of the batch's supervisor.
        case local
        /// Each task a job step of the Slurm allocation the batch runs in (`srun`), supervised
        /// on its node by `overtime run`.
        case srun
    }

    public init(
        concurrency: Int = JobFile.defaultConcurrency,
        deadline: Duration? = nil,
        resources: [String: ResourcePool] = [:],
        tasks: [JobTask]
    ) {
        self.concurrency = concurrency
        self.deadline = deadline
        self.resources = resources
        self.tasks = tasks
    }

    /// Parses and validates a job file's text.
    /// - Parameters:
    ///   - bytes: the file's content (UTF-8 JSON; a leading byte-order mark is skipped).
    ///   - origin: the file's path, named in every message.
    ///   - directory: what a relative `cwd` is resolved against (absolute).
    ///   - host: the account lookups, and the command lookup if commands are to be found now.
    /// - Throws: `JobFileError` listing every problem found.
    public static func parse(_ bytes: [UInt8], origin: String, directory: String, host: JobFileHost) throws(JobFileError) -> JobFile {
        var decoder = JobFileDecoder(baseDirectory: directory, host: host)
        guard let file = decoder.decode(bytes) else {
            throw JobFileError(origin: origin, problems: decoder.report.problems.all)
        }
        // What could not be read is reported; what was read is checked, once.
        var checker = JobFileChecker(report: decoder.report.problems)
        checker.check(file, reading: decoder.reading, commandProblem: host.commandProblem)
        let problems = checker.problems
        guard problems.isEmpty else {
            throw JobFileError(origin: origin, problems: problems)
        }
        return file
    }

    /// Checks what a scheduler relies on, for a job built in code, as a parsed file is
    /// checked: concurrency ≥ 1, at least one task, valid and unique names, known
    /// dependencies without cycles, valid pools and requests that fit them, and each
    /// `commandMadeBy` naming a task. Commands are not looked up.
    /// - Parameter origin: what to call the job in the error.
    /// - Throws: `JobFileError` listing every problem found.
    public func validate(origin: String = "job") throws(JobFileError) {
        var checker = JobFileChecker()
        checker.check(self)
        let problems = checker.problems
        if !problems.isEmpty {
            throw JobFileError(origin: origin, problems: problems)
        }
    }

    /// The task named `name`.
    public func task(named name: String) -> JobTask? {
        tasks.first { $0.name == name }
    }

    /// The variable that gives a task its share of `pool`: `OVERTIME_RESOURCE_GPU` for
    /// `gpu`, `OVERTIME_RESOURCE_MEM_GB` for `mem-gb` (upper case, `-` as `_`).
    public static func resourceVariable(forPool pool: String) -> String {
        let tail = pool.unicodeScalars.map { scalar -> String in
            scalar == "-" ? "_" : String(scalar).uppercased()
        }.joined()
        return "OVERTIME_RESOURCE_" + tail
    }
}

/// A named resource that tasks ask for a share of.
public enum ResourcePool: Sendable, Equatable {
    /// Specific things handed out by id, e.g. GPUs `["0", "1", "2", "3"]`. A task that asks
    /// for 2 gets two free ids, exported as `OVERTIME_RESOURCE_<POOL>=0,1` (and as
    /// `CUDA_VISIBLE_DEVICES` for a pool named `gpu`).
    case slots([String])
    /// An amount debited while a task runs and credited when it ends, e.g. `mem_gb: 64`.
    case count(Int)

    /// The most any one task can ask for: the number of slots, or the count.
    public var capacity: Int {
        switch self {
        case let .slots(ids): ids.count
        case let .count(total): total
        }
    }
}

/// One task of a job file, with the file's `defaults` merged in.
///
/// A file may hold a million tasks, nearly all alike but for their names and commands: what
/// a task shares with its neighbours (its budget, environment, retries, isolation) is kept in
/// one `TaskSettings` value that tasks with equal settings hold together, so a task costs
/// its name, its command and a reference. Each property reads and writes as a plain one.
public struct JobTask: Sendable, Equatable {
    /// Unique in the file; letters, digits, `-`, `_` and `.` (it names the task's log file).
    public var name: String
    /// argv, run directly (never through a shell), found on `PATH`.
    public var command: [String]
    /// What must happen to other tasks before this one starts, in file order.
    public var after: [Dependency]
    /// The earlier task that makes this task's command (`command-made-by`): its command is
    /// not looked up when the file is checked.
    public var commandMadeBy: String?
    /// What makes it a sweep (`matrix`) or an array (`array`): a task made once per element
    /// (`JobElements`). nil for a task run once. Held by reference: a plain task pays a
    /// pointer for it.
    public var sweep: Sweep? {
        get { sweepBox?.value }
        set { sweepBox = newValue.map(Shared.init) }
    }
    private var sweepBox: Shared<Sweep>?
    /// `peer-group`: the tasks it is compared with for stragglers (those naming the same
    /// group); nil: a sweep's elements are their sweep's group, any other task is in none.
    public var peerGroup: String? {
        get { peeringBox?.value.group }
        set { changePeering { $0.group = newValue } }
    }
    /// `stragglers` on the task: for its group, over the job file's own.
    public var stragglers: StragglerPolicy? {
        get { peeringBox?.value.stragglers }
        set { changePeering { $0.stragglers = newValue } }
    }
    /// Held by reference, as `sweep` is: a task that names neither pays a pointer.
    private var peeringBox: Shared<Peering>?
    private struct Peering: Sendable, Equatable {
        var group: String?
        var stragglers: StragglerPolicy?
    }
    /// The rest, shared with the tasks whose rest is equal.
    private(set) var shared: Shared<TaskSettings>

    /// Its budget, environment, isolation and the rest (each also a property of its own below).
    public var settings: TaskSettings {
        shared.value
    }

    /// Set on top of the inherited environment (`env`).
    public var environment: [String: String] {
        get { shared.value.environment }
        set { change(\.environment, to: newValue) }
    }
    /// Where it runs (`cwd`); absolute once parsed (a relative path in the file is resolved
    /// against the file's directory). nil: the supervisor's own directory.
    public var workingDirectory: String? {
        get { shared.value.workingDirectory }
        set { change(\.workingDirectory, to: newValue) }
    }
    /// `budget`, `window`, `max-runtime`, `grace`, `warn-before`, `require-advance`, `min-start`.
    public var policy: BudgetPolicy {
        get { shared.value.policy }
        set { change(\.policy, to: newValue) }
    }
    /// How much of each pool it needs while it runs, e.g. `["gpu": 2]`.
    public var resources: [String: Int] {
        get { shared.value.resources }
        set { change(\.resources, to: newValue) }
    }
    /// Whether and when a failed attempt is tried again.
    public var retry: RetryPolicy {
        get { shared.value.retry }
        set { change(\.retry, to: newValue) }
    }
    /// False when the task starts from an empty environment (`clean-env`).
    public var inheritEnvironment: Bool {
        get { shared.value.inheritEnvironment }
        set { change(\.inheritEnvironment, to: newValue) }
    }
    /// `user`, `group`, `limits`, `nice`.
    public var isolation: TaskIsolation {
        get { shared.value.isolation }
        set { change(\.isolation, to: newValue) }
    }
    /// `notify-socket`, `notify-fd`: the readiness protocols it may speak.
    public var readiness: Readiness {
        get { shared.value.readiness }
        set { change(\.readiness, to: newValue) }
    }
    /// `memory-max`, `memory-warn`: its memory watchdog (DESIGN §7).
    public var memory: MemoryPolicy {
        get { shared.value.memory }
        set { change(\.memory, to: newValue) }
    }
    /// `diagnose`, `diagnose-limit`: run before a timeout or memory cancel (DESIGN §7).
    public var diagnose: DiagnoseCommand? {
        get { shared.value.diagnose }
        set { change(\.diagnose, to: newValue) }
    }

    /// `python-bridge`: whether the task is handed Overtime's bundled Python bridge.
    public var pythonBridge: Bool {
        get { shared.value.pythonBridge }
        set { change(\.pythonBridge, to: newValue) }
    }

    public init(
        name: String,
        command: [String],
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        policy: BudgetPolicy = .default,
        after: [Dependency] = [],
        commandMadeBy: String? = nil,
        resources: [String: Int] = [:],
        retry: RetryPolicy = .none,
        inheritEnvironment: Bool = true,
        isolation: TaskIsolation = .none,
        readiness: Readiness = Readiness(),
        memory: MemoryPolicy = .none,
        diagnose: DiagnoseCommand? = nil,
        pythonBridge: Bool = true,
        sweep: Sweep? = nil
    ) {
        let settings = TaskSettings(environment: environment, workingDirectory: workingDirectory, policy: policy,
                                    resources: resources, retry: retry, inheritEnvironment: inheritEnvironment,
                                    isolation: isolation, readiness: readiness, memory: memory, diagnose: diagnose,
                                    pythonBridge: pythonBridge)
        self.init(name: name, command: command, after: after, commandMadeBy: commandMadeBy, settings: Shared(settings))
        self.sweep = sweep
    }

    init(name: String, command: [String], after: [Dependency], commandMadeBy: String?, settings: Shared<TaskSettings>) {
        self.name = name
        self.command = command
        self.after = after
        self.commandMadeBy = commandMadeBy
        shared = settings
    }

    private mutating func changePeering(_ change: (inout Peering) -> Void) {
        var peering = peeringBox?.value ?? Peering()
        change(&peering)
        peeringBox = peering == Peering() ? nil : Shared(peering)
    }

    /// A task's own copy of its settings, with one of them changed (the copy it shared is
    /// left as the other tasks have it).
    private mutating func change<Value>(_ setting: WritableKeyPath<TaskSettings, Value>, to value: Value) {
        var changed = shared.value
        changed[keyPath: setting] = value
        shared = Shared(changed)
    }
}

/// An immutable value held by reference, so that many holders share one copy.
final class Shared<Value: Sendable & Equatable>: Sendable, Equatable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }

    static func == (a: Shared, b: Shared) -> Bool {
        a === b || a.value == b.value
    }
}

/// "Start me after `task` has …".
public struct Dependency: Sendable, Equatable, Hashable {
    /// The name of the task waited for: a whole sweep or array by its name (every element).
    public var task: String
    public var condition: Condition
    /// Between two sweeps or arrays (`same-index`): each element waits for the element of
    /// `task` with the same index only (shard 7 after shard 7).
    public var sameIndex = false

    public enum Condition: String, Sendable, CaseIterable {
        /// …finished and succeeded (exit 0, not cancelled), after its last retry. The default.
        case success
        /// …finished, whatever the outcome (succeeded, failed, cancelled or skipped).
        case done
        /// …started and reported `ready` (it may still be running, e.g. a server).
        case ready
    }

    public init(task: String, condition: Condition = .success, sameIndex: Bool = false) {
        self.task = task
        self.condition = condition
        self.sameIndex = sameIndex
    }
}

/// Which failed attempts are run again, how often, and how long to wait in between.
///
/// What is retried is two sets rather than one enum with an exit code attached to one of its
/// cases: the classes (`on`) stay a plain, listable enum for messages and docs, and a single
/// exit status (`exit:3`) is a lookup in `exitStatuses`. A task whose exit 3 means "try
/// again" (a lock held, a mirror down) and whose exit 4 means "bad input" lists the one only.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts after the first one; 0 means no retry.
    public var maxRetries: Int
    /// The wait before the first retry; it doubles before each further retry, up to
    /// `maxBackoff`.
    public var backoff: Duration
    /// The longest wait between attempts.
    public var maxBackoff: Duration
    /// The classes of outcome that are retried. A `user` or `shutdown` cancel never is.
    public var on: Set<RetryCondition>
    /// Exit statuses retried on their own (`exit:3`), when `on` does not hold `exit` (which
    /// takes them all). Only a task that exited on its own has one: a cancelled, OOM-killed
    /// or signalled attempt does not match, whatever status it left.
    public var exitStatuses: Set<Int32>

    public static let defaultBackoff: Duration = .seconds(1)
    public static let defaultMaxBackoff: Duration = .seconds(60)
    /// What `"retries": N` retries: a timeout or a non-zero exit.
    public static let defaultConditions: Set<RetryCondition> = [.timeout, .exit]
    /// The exit statuses an `exit:N` entry may name: 0 is success, and a status is a byte.
    public static let retryableExitStatuses: ClosedRange<Int32> = 1...255

    public init(
        maxRetries: Int = 0,
        backoff: Duration = RetryPolicy.defaultBackoff,
        maxBackoff: Duration = RetryPolicy.defaultMaxBackoff,
        on: Set<RetryCondition> = RetryPolicy.defaultConditions,
        exitStatuses: Set<Int32> = []
    ) {
        self.maxRetries = maxRetries
        self.backoff = backoff
        self.maxBackoff = maxBackoff
        self.on = on
        self.exitStatuses = exitStatuses
    }

    /// No retries (what a task without `retries` gets, and what `"retries": 0` means).
    public static let none = RetryPolicy()

    /// The most attempts a task gets: the first plus its retries.
    public var maxAttempts: Int { maxRetries + 1 }

    /// The wait before retry number `retry` (1 for the first retry, i.e. before attempt 2):
    /// `backoff × 2^(retry−1)`, at most `maxBackoff`.
    public func delay(beforeRetry retry: Int) -> Duration {
        var delay = backoff
        var n = 1
        while n < retry, delay < maxBackoff, .zero < delay {
            delay = delay * 2
            n += 1
        }
        return min(delay, maxBackoff)
    }

    /// Whether an attempt that ended with `outcome` is tried again.
    /// - Parameters:
    ///   - outcome: how the attempt ended.
    ///   - attempt: that attempt's number, from 1 (the value of `OVERTIME_ATTEMPT`).
    public func shouldRetry(after outcome: TaskOutcome, attempt: Int) -> Bool {
        let result = QueueMachine.AttemptResult(outcome)
        return shouldRetry(result.retryCondition, exitStatus: result.exitStatus, attempt: attempt)
    }

    /// Whether attempt number `attempt`, which ended in `condition` (nil: not retryable at
    /// all), is followed by another.
    /// - Parameter exitStatus: its status when it exited on its own (`condition` is `exit`).
    public func shouldRetry(_ condition: RetryCondition?, exitStatus: Int32? = nil, attempt: Int) -> Bool {
        guard attempt <= maxRetries, let condition else { return false }
        if on.contains(condition) { return true }
        guard condition == .exit, let exitStatus else { return false }
        return exitStatuses.contains(exitStatus)
    }
}

/// A class of outcome a retry policy may retry, named as in job files (`retries.on`).
public enum RetryCondition: String, Sendable, Hashable, CaseIterable {
    /// Cancelled because progress stopped (the budget ran out).
    case timeout
    /// Cancelled at `max-runtime`.
    case deadline
    /// Cancelled after an operator (or a policy) revoked its budget.
    case revoked
    /// Exited on its own with a non-zero status (`failed` in a job file means the same).
    case exit
    /// Died of a signal Overtime did not send (a crash; a SIGKILL from the OOM killer where
    /// no memory cgroup counted it).
    case signal
    /// Cancelled at `memory-max` (DESIGN §7).
    case memory
    /// The kernel's OOM killer killed a process of it, as its memory cgroup counted
    /// (`OutcomeKind.oom`).
    case oom

    /// Words a job file may write for a class: `failed` is what DESIGN §7 and the outcome
    /// kinds call a task that exited non-zero on its own.
    public static let aliases: [String: RetryCondition] = ["failed": .exit]

    /// The class named `word` in a job file, aliases included.
    public init?(word: String) {
        guard let condition = RetryCondition(rawValue: word) ?? Self.aliases[word] else { return nil }
        self = condition
    }

    /// The class an attempt's outcome falls under; nil when it is not retryable at all:
    /// it succeeded, a `user`/`shutdown`/`fail-fast` cancel ended it (those are final), it was skipped,
    /// or its command could not be started (127 or 126: another attempt would fail the same way).
    ///
    /// An OOM kill comes before every other class but the final cancels: whether the leader
    /// then died of the SIGKILL (`signal`), exited non-zero because a child was killed
    /// (`exit`), or was being cancelled at its `memory-max` when the kernel's hard limit
    /// struck, memory is what ended it.
    public init?(outcome: TaskOutcome) {
        let limit: RetryCondition?
        switch outcome.cancelReason {
        case nil: limit = nil
        // A straggler's restart is its own retry (`stragglers`), not one of `retries`.
        case .user?, .shutdown?, .dependency?, .failFast?, .straggler?: return nil
        case .timeout?: limit = .timeout
        case .deadline?: limit = .deadline
        case .revoked?: limit = .revoked
        case .memory?: limit = .memory
        }
        if outcome.kind == .oom {
            self = .oom
        } else if let limit {
            self = limit
        } else {
            switch outcome.termination {
            case .exited(0), .failedToStart: return nil
            case .exited: self = .exit
            case .signaled: self = .signal
            }
        }
    }
}

/// Why a job file was refused: every problem found, each naming the task and field.
public struct JobFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file's path.
    public var origin: String
    /// One sentence each, e.g. "task 'train': field 'budget': '-1s' is negative; expected …".
    public var problems: [String]

    public init(origin: String, problems: [String]) {
        self.origin = origin
        self.problems = problems
    }

    /// One line per problem, each starting with the file's path.
    public var description: String {
        problems.map { "\(origin): \($0)" }.joined(separator: "\n")
    }
}
