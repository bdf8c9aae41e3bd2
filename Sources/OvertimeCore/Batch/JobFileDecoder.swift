import OvertimeProtocol

/// Turns a job file's JSON into a `JobFile`, noting every problem on the way rather than
/// stopping at the first: a user fixes a file in one pass, not one error per run.
struct JobFileDecoder {
    /// Relative `cwd` values are resolved against this (the job file's directory).
    let baseDirectory: String
    private var checker = JobFileChecker()
    /// Everything is checked as it is read, so problems come in file order; the checker's
    /// final pass adds only what needs the whole file (dependencies, cycles).
    private var skips = JobFileChecker.Skips(namesNoted: true, resources: true, concurrency: true)
    /// The pools, known before any task is read.
    private var pools: [String: ResourcePool] = [:]
    /// Pools that could not be read whole: requests are not measured against them.
    private var unreadablePools: Set<String> = []

    /// The account lookups, and whether (and how) each command is found before anything
    /// runs.
    let host: JobFileHost

    init(baseDirectory: String, host: JobFileHost) {
        self.baseDirectory = baseDirectory
        self.host = host
    }

    var problems: [String] { checker.problems }

    private mutating func add(_ scope: JobFileScope, _ field: String?, _ message: String) {
        checker.report.add(scope, field, message)
    }

    // MARK: Field names

    static let topFields = ["concurrency", "deadline", "defaults", "resources", "tasks"]
    static let taskFields = ["name", "command", "env", "cwd", "budget", "window", "max-runtime", "grace",
                             "warn-before", "require-advance", "min-start", "after", "resources", "retries",
                             "clean-env", "user", "group", "limits", "nice", "command-made-by"]
    /// Fields every task gives for itself.
    static let ownFields: Set = ["name", "command", "after", "command-made-by"]
    static let defaultsFields = taskFields.filter { !ownFields.contains($0) }
    static let retryFields = ["max", "backoff", "max-backoff", "on"]
    static let dependencyFields = ["task", "when"]

    /// Names people reach for from other tools (folded: lower case, no `-` or `_`).
    static let taskSynonyms: [String: String] = [
        "environment": "env", "environ": "env", "vars": "env", "variables": "env",
        "dir": "cwd", "workdir": "cwd", "workingdir": "cwd", "workingdirectory": "cwd", "directory": "cwd", "chdir": "cwd",
        "cmd": "command", "args": "command", "argv": "command", "arguments": "command", "run": "command", "exec": "command",
        "dependson": "after", "depends": "after", "dependencies": "after", "deps": "after", "needs": "after", "requires": "after",
        "retry": "retries", "maxretries": "retries", "attempts": "retries",
        "timeout": "budget", "resource": "resources", "id": "name",
        "maxtime": "max-runtime", "runtime": "max-runtime", "timelimit": "max-runtime",
        "graceperiod": "grace", "killafter": "grace", "warn": "warn-before", "heartbeat": "window",
        "uid": "user", "runas": "user", "gid": "group", "rlimits": "limits", "ulimit": "limits", "ulimits": "limits",
        "niceness": "nice", "priority": "nice", "cleanenvironment": "clean-env", "emptyenv": "clean-env",
    ]
    static let topSynonyms: [String: String] = [
        "jobs": "tasks", "steps": "tasks", "parallel": "concurrency", "parallelism": "concurrency",
        "maxconcurrency": "concurrency", "workers": "concurrency", "maxparallel": "concurrency",
        "default": "defaults", "pools": "resources", "timeout": "deadline", "timelimit": "deadline",
    ]
    static let retrySynonyms: [String: String] = [
        "retries": "max", "count": "max", "times": "max", "attempts": "max", "maxretries": "max",
        "delay": "backoff", "wait": "backoff", "maxdelay": "max-backoff", "maxwait": "max-backoff",
        "when": "on", "if": "on", "conditions": "on", "retryon": "on",
    ]
    static let dependencySynonyms: [String: String] = [
        "name": "task", "condition": "when", "on": "when", "if": "when", "state": "when",
    ]
    static let conditionSynonyms: [String: String] = [
        "succeeded": "success", "successful": "success", "ok": "success",
        "finished": "done", "complete": "done", "completed": "done", "always": "done", "exited": "done", "ended": "done",
        "started": "ready", "running": "ready", "up": "ready",
    ]

    // MARK: The file

    mutating func decode(_ input: [UInt8]) -> JobFile? {
        var bytes = input
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            add(.top, nil, "the file is empty; expected a JSON object such as {\"tasks\": [{\"name\": \"hello\", \"command\": [\"echo\", \"hello\"]}]}")
            return nil
        }
        let root: JSONValue
        do {
            root = try JSONValue.parse(bytes)
        } catch {
            add(.top, nil, JobFileText.syntaxProblem(error, in: bytes))
            return nil
        }
        return decode(root)
    }

    mutating func decode(_ root: JSONValue) -> JobFile? {
        guard case let .object(members) = root else {
            if case .array = root {
                add(.top, nil, "the top level is an array; a job file is an object that holds the tasks: {\"tasks\": [...]}")
            } else {
                add(.top, nil, "expected a JSON object with a 'tasks' array at the top, got \(JobFileText.show(root))")
            }
            return nil
        }
        noteRepeatedFields(members, .top, in: nil)
        var file = JobFile(tasks: [])
        var defaultsValue: JSONValue?
        var tasksValue: JSONValue?
        for (key, value) in members {
            switch key {
            case "concurrency":
                if let n = wholeNumber(value, .top, "concurrency", "how many tasks may run at once, e.g. 4") {
                    file.concurrency = n
                    checker.checkConcurrency(n)
                }
            case "deadline":
                if let limit = duration(value, .top, "deadline", allowNone: true, positive: true) {
                    file.deadline = limit.duration
                }
            case "resources":
                pools = readPools(value)
                checker.checkPools(pools, unreadable: unreadablePools)
                file.resources = pools
            case "defaults":
                defaultsValue = value
            case "tasks":
                tasksValue = value
            default:
                if Self.ownFields.contains(key) {
                    add(.top, key, "is a field of each task, not of the job file; put it in the task objects under 'tasks'")
                } else if Self.taskFields.contains(key) {
                    add(.top, key, "is a task field, not a field of the job file; to set it for every task, put it in 'defaults'")
                } else {
                    add(.top, key, "is not a field of the job file\(JobFileText.suggestion(for: key, among: Self.topFields, synonyms: Self.topSynonyms))"
                        + " (its fields: \(Self.topFields.joined(separator: ", ")))")
                }
            }
        }

        var defaults = TaskFields()
        if let defaultsValue {
            if case let .object(members) = defaultsValue {
                defaults = fields(members, .defaults, isDefaults: true)
            } else {
                add(.top, "defaults", "expected an object of task fields applied to every task, e.g. {\"budget\": \"5m\", \"retries\": 2}, got \(JobFileText.show(defaultsValue))")
            }
        }

        switch tasksValue {
        case nil:
            add(.top, "tasks", "is missing; expected an array of tasks, e.g. \"tasks\": [{\"name\": \"hello\", \"command\": [\"echo\", \"hello\"]}]")
            skips.emptyTasks = true
        case let .array(items)?:
            for (i, item) in items.enumerated() {
                file.tasks.append(task(item, index: i, defaults: defaults))
            }
        case let other?:
            add(.top, "tasks", "expected an array of task objects, got \(JobFileText.show(other))")
            skips.emptyTasks = true
        }

        checkCommands(file)
        checker.check(file, skips: skips)
        return checker.report.isEmpty ? file : nil
    }

    /// Each command must be found now, not hours in when its task is reached; a task whose
    /// command an earlier task makes names that task (`command-made-by`) instead.
    private mutating func checkCommands(_ file: JobFile) {
        let names = file.tasks.map(\.name)
        for (index, task) in file.tasks.enumerated() {
            let scope = JobFileScope.task(index, named: task.name)
            if let maker = task.commandMadeBy {
                if maker == task.name {
                    add(scope, "command-made-by", "names the task itself; name the earlier task that makes the command")
                } else if !names.contains(maker) {
                    add(scope, "command-made-by", "there is no task named \(JobFileText.quote(maker))\(JobFileText.aside(for: maker, among: names))")
                }
                continue
            }
            guard let lookUp = host.commandProblem, let program = task.command.first else { continue }
            if let problem = lookUp(program, task) {
                add(scope, "command", problem)
            }
        }
    }

    /// Each field may appear once; JSON readers disagree on which of two copies wins.
    private mutating func noteRepeatedFields(_ members: [(key: String, value: JSONValue)], _ scope: JobFileScope,
                                             in parent: String?) {
        var counts: [String: Int] = [:]
        for member in members {
            counts[member.key, default: 0] += 1
            if counts[member.key] == 2 {
                add(scope, parent.map { "\($0).\(member.key)" } ?? member.key, "is given more than once; keep one")
            }
        }
    }

    // MARK: Tasks and defaults

    /// The fields of a task or of `defaults`, as given (nil: not given, or not valid).
    struct TaskFields {
        var command: [String]?
        var commandMadeBy: String?
        var after: [Dependency]?
        var env: [String: String]?
        var cwd: String?
        var budget: Limit?
        var window: Duration?
        var maxRuntime: Limit?
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
    }

    /// A duration, or `none` for no limit.
    struct Limit {
        var duration: Duration?
    }

    private mutating func task(_ value: JSONValue, index: Int, defaults: TaskFields) -> JobTask {
        guard case let .object(members) = value else {
            add(.task(index, nil), nil, "expected an object with at least 'name' and 'command', got \(JobFileText.show(value))")
            return JobTask(name: "", command: [])
        }
        // The name first: every other message about this task is labelled with it.
        var name = ""
        switch members.last(where: { $0.key == "name" })?.value {
        case let .string(text)?:
            name = text
            checker.noteName(name, at: index)
        case nil:
            add(.task(index, nil), "name", "is missing; every task needs a unique name, e.g. \"train\"")
        case let other?:
            add(.task(index, nil), "name", "expected a string such as \"train\", got \(JobFileText.show(other))")
        }
        let scope = JobFileScope.task(index, named: name)
        let own = fields(members, scope, isDefaults: false)
        if own.command == nil, !members.contains(where: { $0.key == "command" }) {
            add(scope, "command", "is missing; expected the program and its arguments as an array, e.g. [\"python\", \"train.py\"]")
        }

        var policy = BudgetPolicy.default
        if let budget = own.budget ?? defaults.budget { policy.budget = budget.duration }
        policy.window = own.window ?? defaults.window
        if let maxRuntime = own.maxRuntime ?? defaults.maxRuntime { policy.maxRuntime = maxRuntime.duration }
        policy.grace = own.grace ?? defaults.grace ?? policy.grace
        policy.warnBefore = own.warnBefore ?? defaults.warnBefore ?? policy.warnBefore
        policy.requireAdvance = own.requireAdvance ?? defaults.requireAdvance ?? policy.requireAdvance
        policy.minStart = own.minStart ?? defaults.minStart ?? policy.minStart

        let environment = (defaults.env ?? [:]).merging(own.env ?? [:]) { _, mine in mine }
        let resources = own.resources ?? defaults.resources ?? [:]
        if resources["gpu"] != nil, case .slots? = pools["gpu"], environment["CUDA_VISIBLE_DEVICES"] != nil {
            let from = own.env?["CUDA_VISIBLE_DEVICES"] == nil ? " (it comes from 'defaults')" : ""
            add(scope, "env.CUDA_VISIBLE_DEVICES", "is set by Overtime from the 'gpu' slots the task is given\(from); leave it out")
        }
        return JobTask(
            name: name,
            command: own.command ?? [],
            environment: environment,
            workingDirectory: own.cwd ?? defaults.cwd,
            policy: policy,
            after: own.after ?? [],
            commandMadeBy: own.commandMadeBy,
            resources: resources,
            retry: own.retry ?? defaults.retry ?? .none,
            inheritEnvironment: !(own.cleanEnv ?? defaults.cleanEnv ?? false),
            isolation: TaskIsolation(user: own.user ?? defaults.user, groupID: own.group ?? defaults.group,
                                     limits: Self.merged(own.limits, over: defaults.limits), niceness: own.nice ?? defaults.nice)
        )
    }

    private mutating func fields(_ members: [(key: String, value: JSONValue)], _ scope: JobFileScope,
                                 isDefaults: Bool) -> TaskFields {
        noteRepeatedFields(members, scope, in: nil)
        var f = TaskFields()
        for (key, value) in members {
            switch key {
            case _ where isDefaults && Self.ownFields.contains(key):
                add(scope, key, "is not allowed in 'defaults': each task gives its own '\(key)'")
            case "name":
                break  // read first, by `task`
            case "command":
                f.command = command(value, scope)
            case "command-made-by":
                if case let .string(name) = value, !name.isEmpty {
                    f.commandMadeBy = name
                } else {
                    add(scope, key, "expected the name of the earlier task that makes the command, e.g. \"build\", got \(JobFileText.show(value))")
                }
            case "after":
                f.after = after(value, scope)
            case "env":
                f.env = environment(value, scope)
            case "cwd":
                f.cwd = directory(value, scope)
            case "budget":
                f.budget = duration(value, scope, key, allowNone: true, positive: true)
            case "window":
                // `none` (or 0): after the first report the task runs without a soft deadline.
                f.window = duration(value, scope, key, allowNone: true, positive: true).map { $0.duration ?? BudgetPolicy.unlimitedWindow }
            case "max-runtime":
                f.maxRuntime = duration(value, scope, key, allowNone: true, positive: true)
            case "grace":
                f.grace = duration(value, scope, key, allowNone: false, positive: false)?.duration
            case "warn-before":
                f.warnBefore = duration(value, scope, key, allowNone: false, positive: false)?.duration
            case "min-start":
                f.minStart = duration(value, scope, key, allowNone: false, positive: false)?.duration
            case "require-advance":
                f.requireAdvance = bool(value, scope, key)
            case "resources":
                f.resources = requests(value, scope)
                if let requests = f.resources {
                    checker.checkRequests(requests, pools: pools, lenient: unreadablePools, scope: scope)
                }
            case "retries":
                f.retry = retries(value, scope)
            case "clean-env":
                f.cleanEnv = bool(value, scope, key)
            case "user":
                f.user = isolationText(value, scope, key, example: "\"nobody\" or 65534", host.accounts.user)
            case "group":
                f.group = isolationText(value, scope, key, example: "\"nogroup\" or 65534", host.accounts.group)
            case "limits":
                f.limits = limits(value, scope)
            case "nice":
                f.nice = isolationText(value, scope, key, example: "10", TaskIsolation.parseNiceness)
            default:
                let known = isDefaults ? Self.defaultsFields : Self.taskFields
                let owner = isDefaults ? "'defaults'" : "a task"
                if Self.topFields.contains(key) {
                    add(scope, key, "is a field of the job file itself, not of \(owner); move it to the top level")
                } else if let meant = Spelling.closest(to: key, among: known, synonyms: Self.taskSynonyms) {
                    add(scope, key, "is not a field of \(owner); did you mean '\(meant)'?")
                } else {
                    add(scope, key, "is not a field of \(owner) (its fields: \(known.joined(separator: ", ")))")
                }
            }
        }
        return f
    }

    // MARK: Task fields

    /// A task's limits laid over those of `defaults`, resource by resource.
    static func merged(_ own: [ResourceLimit]?, over defaults: [ResourceLimit]?) -> [ResourceLimit] {
        var limits = defaults ?? []
        for limit in own ?? [] {
            limits.removeAll { $0.resource == limit.resource }
            limits.append(limit)
        }
        return limits
    }

    /// A user, group or nice value: a string or a whole number, read as on the command line.
    private mutating func isolationText<T>(_ value: JSONValue, _ scope: JobFileScope, _ path: String, example: String,
                                           _ parse: (String) throws(TaskIsolation.ParseError) -> T) -> T? {
        let text: String
        switch value {
        case let .string(string): text = string
        case let .number(number) where number == number.rounded() && abs(number) < 1e15: text = String(Int64(number))
        default:
            add(scope, path, "expected a string or a whole number, e.g. \(example), got \(JobFileText.show(value))")
            return nil
        }
        do {
            return try parse(text)
        } catch {
            add(scope, path, error.message)
            return nil
        }
    }

    /// `{"as": "4G", "nofile": 1024, "cpu": "10m", "nproc": "64:128"}`.
    private mutating func limits(_ value: JSONValue, _ scope: JobFileScope) -> [ResourceLimit]? {
        let names = ResourceLimit.Resource.allCases.map(\.rawValue)
        guard case let .object(members) = value else {
            add(scope, "limits", "expected an object of resource limits, e.g. {\"as\": \"4G\", \"nofile\": 1024, \"cpu\": \"1h\", \"nproc\": 256}, got \(JobFileText.show(value))")
            return nil
        }
        noteRepeatedFields(members, scope, in: "limits")
        var limits: [ResourceLimit] = []
        for (key, item) in members {
            let path = "limits.\(key)"
            guard let resource = ResourceLimit.Resource(rawValue: key) else {
                let meant = Spelling.closest(to: key, among: names, synonyms: Self.limitSynonyms).map { "; did you mean '\($0)'?" }
                add(scope, path, "is not a resource Overtime limits\(meant ?? " (they are: \(names.joined(separator: ", ")))")")
                continue
            }
            let example = resource == .addressSpace ? "\"4G\"" : resource == .cpuSeconds ? "\"1h\"" : "1024"
            if let limit = isolationText(item, scope, path, example: example, { text throws(TaskIsolation.ParseError) in
                try ResourceLimit.parse(resource, text)
            }) {
                limits.removeAll { $0.resource == resource }
                limits.append(limit)
            }
        }
        return limits
    }

    static let limitSynonyms: [String: String] = [
        "addressspace": "as", "memory": "as", "mem": "as", "vmem": "as", "rlimitas": "as",
        "openfiles": "nofile", "files": "nofile", "fds": "nofile", "rlimitnofile": "nofile",
        "cputime": "cpu", "rlimitcpu": "cpu", "processes": "nproc", "procs": "nproc", "rlimitnproc": "nproc",
    ]

    private mutating func command(_ value: JSONValue, _ scope: JobFileScope) -> [String]? {
        switch value {
        case let .string(line):
            add(scope, "command", "a string is not a command: write it as an array of arguments, \(Self.argvAdvice(for: line))")
            return nil
        case let .array(items):
            if items.isEmpty {
                add(scope, "command", "is empty; expected the program and its arguments, e.g. [\"python\", \"train.py\"]")
                return nil
            }
            var argv: [String] = []
            for (k, item) in items.enumerated() {
                let path = "command[\(k)]"
                guard case let .string(argument) = item else {
                    switch item {
                    case .number, .bool:
                        add(scope, path, "expected a string, got \(JobFileText.show(item)); quote it: \"\(JobFileText.show(item))\"")
                    default:
                        add(scope, path, "expected a string, got \(JobFileText.show(item))")
                    }
                    continue
                }
                if k == 0, argument.isEmpty {
                    add(scope, path, "the program name is empty; expected a program such as \"python\" or a path such as \"./train.sh\"")
                } else if argument.utf8.contains(0) {
                    add(scope, path, "holds a NUL character, which no argument can")
                }
                argv.append(argument)
            }
            return argv.count == items.count ? argv : nil
        default:
            add(scope, "command", "expected the program and its arguments as an array of strings, e.g. [\"python\", \"train.py\"], got \(JobFileText.show(value))")
            return nil
        }
    }

    /// How to write `line` as argv: split on spaces when that is all it needs, or through
    /// `sh -c` when it uses the shell.
    static func argvAdvice(for line: String) -> String {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        let shellish = line.contains { "|&;<>()$`*?~\"'\\{}".contains($0) }
        let shell = "[\"sh\", \"-c\", \(JobFileText.quote(line))]"
        if shellish || words.isEmpty {
            return "since Overtime never runs a shell: for shell syntax such as this, write \(shell)"
        }
        let shown = words.prefix(6).map { JobFileText.quote($0) }.joined(separator: ", ") + (words.count > 6 ? ", …" : "")
        return "e.g. [\(shown)]; Overtime never runs a shell (for shell syntax write \(shell))"
    }

    private static let reservedVariables: Set = ["OVERTIME_FD", "OVERTIME_TASK", "OVERTIME_RUN", "OVERTIME_ATTEMPT"]

    private mutating func environment(_ value: JSONValue, _ scope: JobFileScope) -> [String: String]? {
        guard case let .object(members) = value else {
            add(scope, "env", "expected an object of variables and their values, e.g. {\"LOG_LEVEL\": \"debug\"}, got \(JobFileText.show(value))")
            return nil
        }
        noteRepeatedFields(members, scope, in: "env")
        var environment: [String: String] = [:]
        for (key, item) in members {
            let path = "env.\(key)"
            if key.isEmpty {
                add(scope, "env", "a variable name is empty")
            } else if key.contains("=") {
                add(scope, path, "a variable name cannot hold '='")
            } else if key.utf8.contains(0) {
                add(scope, path, "a variable name cannot hold a NUL character")
            } else if Self.reservedVariables.contains(key) || key.hasPrefix("OVERTIME_RESOURCE_") {
                add(scope, path, "is set by Overtime for every task (docs/protocol.md, docs/jobfile.md); use another name")
            }
            switch item {
            case let .string(text):
                if text.utf8.contains(0) {
                    add(scope, path, "holds a NUL character, which no variable can")
                } else {
                    environment[key] = text
                }
            case .number, .bool:
                add(scope, path, "expected a string, got \(JobFileText.show(item)); quote it: \"\(JobFileText.show(item))\"")
            case .null:
                add(scope, path, "expected a string, got null; a variable cannot be unset here, only set")
            default:
                add(scope, path, "expected a string, got \(JobFileText.show(item))")
            }
        }
        return environment
    }

    private mutating func directory(_ value: JSONValue, _ scope: JobFileScope) -> String? {
        guard case let .string(path) = value else {
            add(scope, "cwd", "expected a directory path as a string, e.g. \"data\" or \"/srv/pipeline\", got \(JobFileText.show(value))")
            return nil
        }
        if path.isEmpty {
            add(scope, "cwd", "is empty; expected a directory, e.g. \"data\" (relative to the job file) or \"/srv/pipeline\"")
            return nil
        }
        if path.hasPrefix("~") {
            add(scope, "cwd", "\(JobFileText.quote(path)): '~' is not expanded (no shell runs); write the full path, or one relative to the job file")
            return nil
        }
        if path.utf8.contains(0) {
            add(scope, "cwd", "holds a NUL character, which no path can")
            return nil
        }
        return JobFilePath.resolve(path, against: baseDirectory)
    }

    private mutating func after(_ value: JSONValue, _ scope: JobFileScope) -> [Dependency]? {
        guard case let .array(items) = value else {
            if case let .string(name) = value {
                add(scope, "after", "expected an array of task names; write [\(JobFileText.quote(name))]")
            } else {
                add(scope, "after", "expected an array of task names or {\"task\": …, \"when\": …} objects, e.g. [\"prep\", {\"task\": \"server\", \"when\": \"ready\"}], got \(JobFileText.show(value))")
            }
            return nil
        }
        var dependencies: [Dependency] = []
        for (k, item) in items.enumerated() {
            let path = "after[\(k)]"
            switch item {
            case let .string(name):
                dependencies.append(Dependency(task: name))
            case let .object(members):
                noteRepeatedFields(members, scope, in: path)
                var dependency = Dependency(task: "")
                var named = false
                var valid = true
                for (key, field) in members {
                    switch key {
                    case "task":
                        if case let .string(name) = field {
                            dependency.task = name
                            named = true
                        } else {
                            add(scope, "\(path).task", "expected a task name, got \(JobFileText.show(field))")
                            valid = false
                        }
                    case "when":
                        if let condition = condition(field, scope, "\(path).when") {
                            dependency.condition = condition
                        } else {
                            valid = false
                        }
                    default:
                        add(scope, "\(path).\(key)", "is not a field of a dependency\(JobFileText.suggestion(for: key, among: Self.dependencyFields, synonyms: Self.dependencySynonyms)) (its fields: task, when)")
                        valid = false
                    }
                }
                if !named, valid {
                    add(scope, "\(path).task", "is missing; expected the name of the task to wait for, e.g. {\"task\": \"prep\", \"when\": \"done\"}")
                }
                if named { dependencies.append(dependency) }
            default:
                add(scope, path, "expected a task name or an object such as {\"task\": \"prep\", \"when\": \"done\"}, got \(JobFileText.show(item))")
            }
        }
        return dependencies
    }

    private mutating func condition(_ value: JSONValue, _ scope: JobFileScope, _ path: String) -> Dependency.Condition? {
        let known = Dependency.Condition.allCases.map(\.rawValue)
        guard case let .string(word) = value else {
            add(scope, path, "expected \(JobFileText.list(known)), got \(JobFileText.show(value))")
            return nil
        }
        if let condition = Dependency.Condition(rawValue: word) { return condition }
        add(scope, path, "\(JobFileText.quote(word)) is not a condition\(JobFileText.aside(for: word, among: known, synonyms: Self.conditionSynonyms)); expected success (it succeeded), done (it ended, however) or ready (it reported ready)")
        return nil
    }

    private mutating func requests(_ value: JSONValue, _ scope: JobFileScope) -> [String: Int]? {
        guard case let .object(members) = value else {
            add(scope, "resources", "expected an object of pool names and amounts, e.g. {\"gpu\": 1, \"mem_gb\": 16}, got \(JobFileText.show(value))")
            return nil
        }
        noteRepeatedFields(members, scope, in: "resources")
        var requests: [String: Int] = [:]
        for (pool, item) in members {
            let path = "resources.\(pool)"
            if case .array = item {
                add(scope, path, "a task asks for a number of slots, not for ids (Overtime hands out free ones); write \"\(pool)\": 1")
                continue
            }
            if let amount = wholeNumber(item, scope, path, "how much of pool '\(pool)' the task needs, e.g. 1") {
                requests[pool] = amount
            }
        }
        return requests
    }

    private mutating func retries(_ value: JSONValue, _ scope: JobFileScope) -> RetryPolicy? {
        switch value {
        case .number:
            guard let count = wholeNumber(value, scope, "retries", "how many times a failed attempt is retried, e.g. 3") else { return nil }
            guard count >= 0 else {
                add(scope, "retries", "\(count) is negative; expected how many times a failed attempt is retried (0 for never)")
                return nil
            }
            return RetryPolicy(maxRetries: count)
        case let .object(members):
            noteRepeatedFields(members, scope, in: "retries")
            var policy = RetryPolicy()
            var valid = true
            var sawMax = false
            var explicitMaxBackoff = false
            for (key, item) in members {
                let path = "retries.\(key)"
                switch key {
                case "max":
                    sawMax = true
                    if let count = wholeNumber(item, scope, path, "how many times a failed attempt is retried, e.g. 3") {
                        if count < 0 {
                            add(scope, path, "\(count) is negative; expected how many times a failed attempt is retried (0 for never)")
                            valid = false
                        }
                        policy.maxRetries = count
                    } else {
                        valid = false
                    }
                case "backoff":
                    if let d = duration(item, scope, path, allowNone: false, positive: false)?.duration {
                        policy.backoff = d
                    } else {
                        valid = false
                    }
                case "max-backoff":
                    if let d = duration(item, scope, path, allowNone: false, positive: false)?.duration {
                        policy.maxBackoff = d
                        explicitMaxBackoff = true
                    } else {
                        valid = false
                    }
                case "on":
                    if let conditions = retryConditions(item, scope, path) {
                        policy.on = conditions
                    } else {
                        valid = false
                    }
                default:
                    add(scope, path, "is not a field of 'retries'\(JobFileText.suggestion(for: key, among: Self.retryFields, synonyms: Self.retrySynonyms)) (its fields: \(Self.retryFields.joined(separator: ", ")))")
                    valid = false
                }
            }
            if !sawMax {
                add(scope, "retries.max", "is missing; expected how many times a failed attempt is retried, e.g. {\"max\": 3}")
                return nil
            }
            guard valid else { return nil }
            if policy.backoff > policy.maxBackoff {
                if explicitMaxBackoff {
                    add(scope, "retries.backoff", "\(DurationText.format(policy.backoff)) is longer than max-backoff (\(DurationText.format(policy.maxBackoff))); make backoff at most max-backoff")
                    return nil
                }
                policy.maxBackoff = policy.backoff
            }
            return policy
        default:
            add(scope, "retries", "expected a number of retries such as 3, or an object such as {\"max\": 3, \"backoff\": \"5s\", \"on\": [\"timeout\", \"exit\"]}, got \(JobFileText.show(value))")
            return nil
        }
    }

    private mutating func retryConditions(_ value: JSONValue, _ scope: JobFileScope, _ path: String) -> Set<RetryCondition>? {
        let known = RetryCondition.allCases.map(\.rawValue)
        guard case let .array(items) = value else {
            let example = if case let .string(word) = value { "[\(JobFileText.quote(word))]" } else { "[\"timeout\", \"exit\"]" }
            add(scope, path, "expected an array of outcomes, e.g. \(example), got \(JobFileText.show(value))")
            return nil
        }
        if items.isEmpty {
            add(scope, path, "is empty, so nothing would be retried; to turn retries off write \"retries\": 0")
            return nil
        }
        var conditions = Set<RetryCondition>()
        var valid = true
        for (k, item) in items.enumerated() {
            let itemPath = "\(path)[\(k)]"
            guard case let .string(word) = item else {
                add(scope, itemPath, "expected one of \(JobFileText.list(known)), got \(JobFileText.show(item))")
                valid = false
                continue
            }
            if let condition = RetryCondition(rawValue: word) {
                conditions.insert(condition)
                continue
            }
            valid = false
            switch word {
            case "user", "shutdown", "fail-fast":
                add(scope, itemPath, "a '\(word)' cancel is never retried: it is final; expected \(JobFileText.list(known))")
            case "dependency":
                add(scope, itemPath, "a task skipped for a dependency never ran, so it cannot be retried; expected \(JobFileText.list(known))")
            default:
                add(scope, itemPath, "\(JobFileText.quote(word)) is not an outcome\(JobFileText.aside(for: word, among: known)); expected \(JobFileText.list(known))")
            }
        }
        return valid ? conditions : nil
    }

    // MARK: The pools

    private mutating func readPools(_ value: JSONValue) -> [String: ResourcePool] {
        guard case let .object(members) = value else {
            add(.top, "resources", "expected an object of named pools, e.g. {\"gpu\": [\"0\", \"1\"], \"mem_gb\": 64}, got \(JobFileText.show(value))")
            return [:]
        }
        noteRepeatedFields(members, .top, in: "resources")
        var pools: [String: ResourcePool] = [:]
        for (name, item) in members {
            let path = "resources.\(name)"
            switch item {
            case let .array(entries):
                var ids: [String] = []
                for (k, entry) in entries.enumerated() {
                    switch entry {
                    case let .string(id):
                        ids.append(id)
                    case let .number(n) where n >= 0 && n == n.rounded() && n < 1e15:
                        ids.append(JobFileText.number(n))
                    default:
                        add(.top, "\(path)[\(k)]", "expected a slot id such as \"0\", got \(JobFileText.show(entry))")
                    }
                }
                pools[name] = .slots(ids)
                if ids.count != entries.count { unreadablePools.insert(name) }
            case .number:
                if let total = wholeNumber(item, .top, path, "a count such as 64") {
                    pools[name] = .count(total)
                } else {
                    unreadablePools.insert(name)
                    pools[name] = .count(1)
                }
            case let .string(text) where Int(text.trimmingSpaces) != nil:
                add(.top, path, "expected a count, got \(JobFileText.quote(text)); write \(text.trimmingSpaces) without quotes")
                unreadablePools.insert(name)
                pools[name] = .count(1)
            default:
                add(.top, path, "expected a list of slot ids such as [\"0\", \"1\"] or a count such as 64, got \(JobFileText.show(item))")
                pools[name] = .count(1)
                unreadablePools.insert(name)
            }
        }
        return pools
    }

    // MARK: Values

    /// An integer written as a JSON number.
    private mutating func wholeNumber(_ value: JSONValue, _ scope: JobFileScope, _ path: String, _ expected: String) -> Int? {
        switch value {
        case let .number(n) where n == n.rounded() && abs(n) <= 9_007_199_254_740_992:
            return Int(n)
        case let .string(text) where Int(text.trimmingSpaces) != nil:
            add(scope, path, "expected a whole number, got \(JobFileText.quote(text)); write \(text.trimmingSpaces) without quotes")
        case .null:
            add(scope, path, nullAdvice(allowNone: false))
        default:
            add(scope, path, "expected a whole number (\(expected)), got \(JobFileText.show(value))")
        }
        return nil
    }

    private mutating func bool(_ value: JSONValue, _ scope: JobFileScope, _ path: String) -> Bool? {
        switch value {
        case let .bool(b):
            return b
        case let .string(text) where text == "true" || text == "false":
            add(scope, path, "expected true or false, got \(JobFileText.quote(text)); write \(text) without quotes")
        case .null:
            add(scope, path, nullAdvice(allowNone: false))
        default:
            add(scope, path, "expected true or false, got \(JobFileText.show(value))")
        }
        return nil
    }

    /// A duration: a string as on the command line (`30s`, `1h30m`, `none` where allowed)
    /// or a number of seconds.
    private mutating func duration(_ value: JSONValue, _ scope: JobFileScope, _ path: String,
                                   allowNone: Bool, positive: Bool) -> Limit? {
        let orNone = allowNone ? ", or \"none\" for no limit" : ""
        var result: Duration
        switch value {
        case let .string(text):
            do {
                guard let d = try DurationText.parse(text, allowNone: allowNone) else { return Limit(duration: nil) }
                result = d
            } catch {
                if let meant = Self.durationMeant(by: text) {
                    add(scope, path, "\(JobFileText.quote(text)) is not a duration; write \"\(meant)\" (durations look like 30s, 1.5s, 250ms, 5m or 1h30m)")
                } else {
                    add(scope, path, error.message + orNone)
                }
                return nil
            }
        case let .number(seconds):
            if seconds < 0 {
                add(scope, path, "\(JobFileText.number(seconds)) is negative; expected a number of seconds, or \(DurationText.examples)\(orNone)")
                return nil
            }
            guard seconds * 1e9 <= Double(DurationText.maximum.nanoseconds) else {
                add(scope, path, "\(JobFileText.number(seconds)) seconds is too long; the longest duration is 100 years")
                return nil
            }
            // 0 is no limit, as with GNU `timeout 0` (and "0s" in the string form); a tiny
            // value that rounds to nothing is not 0, and is refused below as too short.
            if allowNone, seconds == 0 { return Limit(duration: nil) }
            result = .nanoseconds(Int64((seconds * 1e9).rounded()))
        case .null:
            add(scope, path, nullAdvice(allowNone: allowNone))
            return nil
        default:
            add(scope, path, "expected \(DurationText.examples) (as a string), or a number of seconds\(orNone), got \(JobFileText.show(value))")
            return nil
        }
        if positive, result <= .zero {
            add(scope, path, "\(JobFileText.show(value)) is too short: it must be longer than 0" + (allowNone ? "; for no limit write \"none\"" : ""))
            return nil
        }
        return Limit(duration: result)
    }

    /// The duration a wordy one means: "3 hours" → "3h", "1 hour 30 minutes" → "1h30m",
    /// "5mins" → "5m"; nil when it means nothing clear.
    static func durationMeant(by text: String) -> String? {
        let units = [
            "ms": "ms", "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
            "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
            "m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
            "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
            "d": "d", "day": "d", "days": "d",
        ]
        var meant = ""
        var rest = Substring(text.lowercased().trimmingSpaces)
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty else { return nil }
            rest = rest.dropFirst(number.count).drop { $0 == " " }
            let word = rest.prefix { $0.isLetter }
            guard let unit = units[String(word)] else { return nil }
            rest = rest.dropFirst(word.count).drop { $0 == " " || $0 == "," }
            if rest.hasPrefix("and ") { rest = rest.dropFirst(4) }
            meant += number + unit
        }
        guard meant != text, (try? DurationText.parse(meant)) != nil else { return nil }
        return meant
    }

    private func nullAdvice(allowNone: Bool) -> String {
        "null is not a value here; leave the field out to get the default" + (allowNone ? ", or write \"none\" for no limit" : "")
    }
}
