/// What a task has beside its name, command and dependencies: its budget, environment,
/// isolation, readiness, memory watch and diagnosis, and in a batch its pools and retries.
///
/// A job file's task and `overtime run`'s options both come to this value
/// (`TaskSettingValues.settings(over:)`), through the one declaration of each setting in
/// `TaskSetting.all`.
public struct TaskSettings: Sendable, Equatable {
    public var environment: [String: String]
    public var workingDirectory: String?
    public var policy: BudgetPolicy
    public var resources: [String: Int]
    public var retry: RetryPolicy
    public var inheritEnvironment: Bool
    public var isolation: TaskIsolation
    public var readiness: Readiness
    public var memory: MemoryPolicy
    public var diagnose: DiagnoseCommand?
    public var pythonBridge: Bool

    public init(environment: [String: String] = [:], workingDirectory: String? = nil, policy: BudgetPolicy = .default,
                resources: [String: Int] = [:], retry: RetryPolicy = .none, inheritEnvironment: Bool = true,
                isolation: TaskIsolation = .none, readiness: Readiness = Readiness(), memory: MemoryPolicy = .none,
                diagnose: DiagnoseCommand? = nil, pythonBridge: Bool = true) {
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.policy = policy
        self.resources = resources
        self.retry = retry
        self.inheritEnvironment = inheritEnvironment
        self.isolation = isolation
        self.readiness = readiness
        self.memory = memory
        self.diagnose = diagnose
        self.pythonBridge = pythonBridge
    }
}

/// The settings of a task or of a job file's `defaults` as given, each nil when it was not
/// given (or could not be read). A setting's readers, text and JSON, fill these.
public struct TaskSettingValues: Sendable {
    var env: [String: String]?
    var cwd: String?
    var budget: DurationLimit?
    var window: WindowSetting?
    var phaseWindows: [String: Duration]?
    var onStall: StallAction?
    var checkpointLead: Duration?
    var maxRuntime: DurationLimit?
    var grace: Duration?
    var warnBefore: Duration?
    var requireAdvance: Bool?
    var everyReporter: Bool?
    var minStart: Duration?
    var resources: [String: Int]?
    var retry: RetryPolicy?
    var cleanEnv: Bool?
    var user: Account?
    var group: UInt32?
    var limits: [ResourceLimit]?
    var nice: Int32?
    var notifySocket: Bool?
    var notifyFD: Int32?
    /// `memory-max`; its `bytes` nil for `none` (no watchdog, whatever `defaults` says).
    var memoryMax: MemoryLimit?
    var memoryWarn: MemoryPolicy.WarnLevel?
    var diagnose: String?
    var diagnoseLimit: Duration?
    var pythonBridge: Bool?

    public init() {}

    /// A `memory-max`, or `none`.
    struct MemoryLimit {
        var bytes: UInt64?
    }

    /// Two values that cannot go together on their own.
    public enum Conflict: Sendable, Equatable {
        /// A memory warning with no memory max, or with `none`: there is no cancel to warn of.
        case memoryWarnWithoutMax(maxIsNone: Bool)
        /// A diagnosis limit with nothing to limit.
        case diagnoseLimitWithoutDiagnose
    }

    /// Reads one of `overtime run`'s options for a setting (`TaskSetting.option(named:)`);
    /// a flag's `text` is ignored.
    public mutating func read(_ option: TaskSetting.Option, _ text: String, accounts: AccountLookup) throws(TaskSetting.ValueError) {
        try option.read(&self, text, accounts)
    }

    /// Why these values cannot go together on their own, or nil when they can (a job file's
    /// task is checked with its `defaults`, by the job file's checker).
    public var conflict: Conflict? {
        if memoryWarn != nil, memoryMax?.bytes == nil { return .memoryWarnWithoutMax(maxIsNone: memoryMax != nil) }
        if diagnoseLimit != nil, diagnose == nil { return .diagnoseLimitWithoutDiagnose }
        return nil
    }

    /// These values laid over `defaults`, setting by setting, and the built-in default for
    /// what neither gives.
    public func settings(over defaults: TaskSettingValues = TaskSettingValues()) -> TaskSettings {
        let own = self
        var policy = BudgetPolicy.default
        if let budget = own.budget ?? defaults.budget { policy.budget = budget.duration }
        (own.window ?? defaults.window)?.apply(to: &policy)
        policy.phaseWindows = (defaults.phaseWindows ?? [:]).merging(own.phaseWindows ?? [:]) { _, mine in mine }
        policy.onStall = own.onStall ?? defaults.onStall ?? policy.onStall
        policy.checkpointLead = own.checkpointLead ?? defaults.checkpointLead
        if let maxRuntime = own.maxRuntime ?? defaults.maxRuntime { policy.maxRuntime = maxRuntime.duration }
        policy.grace = own.grace ?? defaults.grace ?? policy.grace
        policy.warnBefore = own.warnBefore ?? defaults.warnBefore ?? policy.warnBefore
        policy.requireAdvance = own.requireAdvance ?? defaults.requireAdvance ?? policy.requireAdvance
        policy.everyReporter = own.everyReporter ?? defaults.everyReporter ?? policy.everyReporter
        policy.minStart = own.minStart ?? defaults.minStart ?? policy.minStart
        return TaskSettings(
            environment: (defaults.env ?? [:]).merging(own.env ?? [:]) { _, mine in mine },
            workingDirectory: own.cwd ?? defaults.cwd,
            policy: policy,
            resources: own.resources ?? defaults.resources ?? [:],
            retry: own.retry ?? defaults.retry ?? .none,
            inheritEnvironment: !(own.cleanEnv ?? defaults.cleanEnv ?? false),
            isolation: TaskIsolation(user: own.user ?? defaults.user, groupID: own.group ?? defaults.group,
                                     limits: ResourceLimit.merged(own.limits, over: defaults.limits), niceness: own.nice ?? defaults.nice),
            readiness: Readiness(notifySocket: own.notifySocket ?? defaults.notifySocket ?? true, notifyFD: own.notifyFD ?? defaults.notifyFD),
            memory: MemoryPolicy(max: (own.memoryMax ?? defaults.memoryMax)?.bytes,
                                 warn: own.memoryWarn ?? defaults.memoryWarn ?? MemoryPolicy.defaultWarn),
            diagnose: (own.diagnose ?? defaults.diagnose).map {
                DiagnoseCommand($0, limit: own.diagnoseLimit ?? defaults.diagnoseLimit ?? DiagnoseCommand.defaultLimit)
            },
            pythonBridge: own.pythonBridge ?? defaults.pythonBridge ?? true
        )
    }
}

/// A duration, or `none` for no limit.
struct DurationLimit {
    var duration: Duration?
}

extension ResourceLimit {
    /// `own` laid over `defaults`, resource by resource.
    static func merged(_ own: [ResourceLimit]?, over defaults: [ResourceLimit]?) -> [ResourceLimit] {
        var limits = defaults ?? []
        for limit in own ?? [] {
            limits.removeAll { $0.resource == limit.resource }
            limits.append(limit)
        }
        return limits
    }
}
