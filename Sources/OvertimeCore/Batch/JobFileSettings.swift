/// A task's fields as read, and the settings made of them and of `defaults`.
extension JobFileDecoder {
    /// The fields of a task or of `defaults`, as given (nil: not given, or not readable).
    struct TaskFields {
        var command: [String]?
        var commandMadeBy: String?
        var after: [Dependency]?
        var env: [String: String]?
        var cwd: String?
        var budget: JobFileFields.Limit?
        var window: Duration?
        var maxRuntime: JobFileFields.Limit?
        var grace: Duration?
        var warnBefore: Duration?
        var requireAdvance: Bool?
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
        /// `memory-max`; its `bytes` nil for `"none"` (no watchdog, whatever `defaults` says).
        var memoryMax: MemoryLimit?
        var memoryWarn: MemoryPolicy.WarnLevel?
        var diagnose: String?
        var diagnoseLimit: Duration?
        var pythonBridge: Bool?
    }

    /// A `memory-max`, or `none`.
    struct MemoryLimit {
        var bytes: UInt64?
    }

    /// A task's settings, `own` laid over `defaults`, as one copy shared with other tasks:
    /// the defaults' alone for a task that gives none of its own (`givesAny`), which is most
    /// tasks of a large file, else the copy of the task read before when they are equal
    /// (neighbouring tasks mostly differ in name and command only).
    mutating func sharedSettings(_ own: TaskFields, over defaults: TaskFields, givesAny: Bool) -> Shared<TaskSettings> {
        if !givesAny, let defaultSettings { return defaultSettings }
        let settings = Self.settings(own, over: defaults)
        if !givesAny {
            defaultSettings = Shared(settings)
            return defaultSettings!
        }
        if let last = lastSettings, last.value == settings { return last }
        lastSettings = Shared(settings)
        return lastSettings!
    }

    static func settings(_ own: TaskFields, over defaults: TaskFields) -> TaskSettings {
        var policy = BudgetPolicy.default
        if let budget = own.budget ?? defaults.budget { policy.budget = budget.duration }
        policy.window = own.window ?? defaults.window
        if let maxRuntime = own.maxRuntime ?? defaults.maxRuntime { policy.maxRuntime = maxRuntime.duration }
        policy.grace = own.grace ?? defaults.grace ?? policy.grace
        policy.warnBefore = own.warnBefore ?? defaults.warnBefore ?? policy.warnBefore
        policy.requireAdvance = own.requireAdvance ?? defaults.requireAdvance ?? policy.requireAdvance
        policy.minStart = own.minStart ?? defaults.minStart ?? policy.minStart
        return TaskSettings(
            environment: (defaults.env ?? [:]).merging(own.env ?? [:]) { _, mine in mine },
            workingDirectory: own.cwd ?? defaults.cwd,
            policy: policy,
            resources: own.resources ?? defaults.resources ?? [:],
            retry: own.retry ?? defaults.retry ?? .none,
            inheritEnvironment: !(own.cleanEnv ?? defaults.cleanEnv ?? false),
            isolation: TaskIsolation(user: own.user ?? defaults.user, groupID: own.group ?? defaults.group,
                                     limits: Self.merged(own.limits, over: defaults.limits), niceness: own.nice ?? defaults.nice),
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
