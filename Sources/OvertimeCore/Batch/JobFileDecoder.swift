import OvertimeProtocol

/// Turns a job file's JSON into a `JobFile`, noting every value it cannot read rather than
/// stopping at the first: a user fixes a file in one pass, not one error per run.
///
/// It only reads: what the job means (names, pools and requests, commands, dependencies)
/// is checked afterwards, once, by `JobFileChecker`, which `reading` tells what could not
/// be read and where each field was.
struct JobFileDecoder {
    /// Relative `cwd` values are resolved against this (the job file's directory).
    let baseDirectory: String
    /// The account lookups (`user`, `group`).
    let host: JobFileHost
    /// Every problem found in reading, each at its place.
    let report = JobFileReport()
    /// What the checker needs to know of this reading.
    private(set) var reading = JobFileReading()
    /// The pools, known before any task is read.
    private var pools: [String: ResourcePool] = [:]
    /// The settings of the task read last, which the next one shares when its are equal,
    /// and those of a task that gives none (`sharedSettings`).
    var lastSettings: Shared<TaskSettings>?
    var defaultSettings: Shared<TaskSettings>?

    init(baseDirectory: String, host: JobFileHost) {
        self.baseDirectory = baseDirectory
        self.host = host
    }

    // MARK: Field names

    static let topFields = ["concurrency", "deadline", "defaults", "resources", "tasks", "executor", "warn-signal", "warn-lead", "metrics", "metrics-file", "stragglers"]
    /// A task's fields: what it is (its name, command and dependencies), then its settings.
    static let taskFields = ["name", "command", "after", "command-made-by", "matrix", "array", "max-running", "peer-group", "stragglers"] + TaskSetting.keys
    /// Fields every task gives for itself.
    static let ownFields: Set = ["name", "command", "after", "command-made-by", "matrix", "array", "max-running", "peer-group"]
    static let defaultsFields = TaskSetting.keys
    static let retryFields = ["max", "backoff", "max-backoff", "on"]
    static let dependencyFields = ["task", "when", "same-index"]

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
        "memorylimit": "memory-max", "maxmemory": "memory-max", "memory": "memory-max", "mem": "memory-max",
        "memlimit": "memory-max", "maxmem": "memory-max", "memmax": "memory-max", "maxrss": "memory-max",
        "memwarn": "memory-warn", "memorywarning": "memory-warn", "warnmemory": "memory-warn",
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

    /// The job the file describes, as far as it could be read; nil when it is not a JSON
    /// object at all.
    mutating func decode(_ input: [UInt8]) -> JobFile? {
        var bytes = input[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            report.add(.top, nil, "the file is empty; expected a JSON object such as {\"tasks\": [{\"name\": \"hello\", \"command\": [\"echo\", \"hello\"]}]}")
            return nil
        }
        // The tasks are read one at a time from the text, each into its `JobTask`: the
        // file is never one tree of every task beside the model made of it.
        let outline: JSONOutline
        do {
            outline = try JSONOutline.parse(bytes, leavingOut: "tasks")
        } catch {
            report.add(.top, nil, JobFileText.syntaxProblem(error, in: Array(bytes)))
            return nil
        }
        return decode(outline.root) { member, body in
            outline.forEachElement(ofMember: member, in: bytes, body)
        } count: { member in
            outline.elementCount(ofMember: member)
        }
    }

    /// Reads the job `root` describes.
    /// - Parameters:
    ///   - tasks: calls its second argument with each task of the top-level member it is
    ///     given the position of, when that member's tasks are not in `root` (`JSONOutline`).
    ///   - count: how many tasks `tasks` will give for a member; nil when they are in `root`.
    mutating func decode(_ root: JSONValue, tasks: (Int, (JSONValue) -> Void) -> Void = { _, _ in },
                         count: (Int) -> Int? = { _ in nil }) -> JobFile? {
        guard case let .object(members) = root else {
            if case .array = root {
                report.add(.top, nil, "the top level is an array; a job file is an object that holds the tasks: {\"tasks\": [...]}")
            } else {
                report.add(.top, nil, "expected a JSON object with a 'tasks' array at the top, got \(JobFileText.show(root))")
            }
            return nil
        }
        // The top level's fields in file order, then `defaults` (which the tasks need),
        // then the tasks.
        report.place = JobFilePlace(field: -1)
        let top = JobFileFields(members, scope: .top, report: report)
        var file = JobFile(tasks: [])
        reading.memory = JobFileReading.MemoryFields()
        reading.ownRequests = []
        var defaultsField: JobFileField?
        var tasksField: JobFileField?
        var tasksMember = 0
        for (k, field) in top.enumerated() {
            report.place = JobFilePlace(field: k)
            reading.layout.note(.top, field.key, at: report.place)
            switch field.key {
            case "concurrency":
                if let n = top.wholeNumber(field, "how many tasks may run at once, e.g. 4") {
                    file.concurrency = n
                }
            case "deadline":
                if let limit = top.duration(field, allowNone: true, positive: true) {
                    file.deadline = limit.duration
                }
            case "resources":
                pools = readPools(field, in: top)
                file.resources = pools
            case "warn-signal":
                if let word = top.string(field, expected: "a signal name such as \"USR1\"") {
                    if let signal = Signal(name: word), !Signal.refusedAsEngineWarning.contains(signal) {
                        file.warnSignal = signal
                    } else {
                        top.problem(field, "'\(word)' cannot be the engine's warning; expected a catchable signal other than INT, TERM and CHLD, such as \"USR1\"")
                    }
                }
            case "warn-lead":
                file.warnLead = top.duration(field, allowNone: false, positive: true)?.duration
            case "executor":
                let words = JobFile.Executor.allCases.map(\.rawValue).joined(separator: " or ")
                if let word = top.string(field, expected: words) {
                    if let executor = JobFile.Executor(rawValue: word.lowercased()) {
                        file.executor = executor
                    } else {
                        top.problem(field, "'\(word)' is not an executor; expected \(words)")
                    }
                }
            case "metrics":
                if let text = top.string(field, expected: "where to serve /metrics, as \"9464\" or \"0.0.0.0:9464\"") {
                    do throws(MetricsAddressError) {
                        file.metrics = try MetricsAddress.parse(text)
                    } catch {
                        top.problem(field, error.message)
                    }
                }
            case "metrics-file":
                if let path = top.string(field, expected: "a file for node_exporter's textfile collector") {
                    if path.isEmpty { top.problem(field, "needs a file") } else { file.metricsFile = JobFilePath.resolve(path, against: baseDirectory) }
                }
            case "stragglers":
                file.stragglers = stragglers(field, in: top)
            case "$schema":
                // Where an editor finds the job file's schema (docs/jobfile.md, Editor support).
                _ = top.string(field, expected: "the path or URL of docs/jobfile.schema.json")
            case "defaults":
                defaultsField = field
            case "tasks":
                tasksField = field
                tasksMember = k
            default:
                if Self.ownFields.contains(field.key) {
                    top.problem(field, "is a field of each task, not of the job file; put it in the task objects under 'tasks'")
                } else if Self.taskFields.contains(field.key) {
                    top.problem(field, "is a task field, not a field of the job file; to set it for every task, put it in 'defaults'")
                } else {
                    top.unknown(field, .init(isNot: "is not a field of the job file", fields: Self.topFields, synonyms: Self.topSynonyms))
                }
            }
        }

        let afterTop = members.count
        report.place = JobFilePlace(field: afterTop, within: -1)
        var defaults = TaskFields()
        if let defaultsField {
            if case let .object(members) = defaultsField.value {
                let fields = JobFileFields(members, scope: .defaults, report: report)
                defaults = read(fields, .defaults) { JobFilePlace(field: afterTop, within: $0) }
                reading.defaultRequests = defaults.settings.resources
                reading.memory?.note(.defaults, maxGiven: fields.contains("memory-max"), maxRead: defaults.settings.memoryMax != nil,
                                     warnRead: defaults.settings.memoryWarn != nil)
            } else {
                top.problem(defaultsField, "expected an object of task fields applied to every task, e.g. {\"budget\": \"5m\", \"retries\": 2}, got \(JobFileText.show(defaultsField.value))")
            }
        }

        report.place = JobFilePlace(field: afterTop + 1)
        reading.layout.noteEnd(.top, at: report.place)
        switch tasksField?.value {
        case nil:
            top.problem(at: "tasks", "is missing; expected an array of tasks, e.g. \"tasks\": [{\"name\": \"hello\", \"command\": [\"echo\", \"hello\"]}]")
            reading.tasksUnreadable = true
        case let .array(items)? where count(tasksMember) == nil:
            for (i, item) in items.enumerated() {
                file.tasks.append(task(item, index: i, defaults: defaults))
            }
        case .array?:
            file.tasks.reserveCapacity(count(tasksMember) ?? 0)
            // Captured as a constant: a captured variable would be copied for every task.
            let taskDefaults = defaults
            tasks(tasksMember) { item in
                file.tasks.append(task(item, index: file.tasks.count, defaults: taskDefaults))
            }
        case let other?:
            top.problem(at: "tasks", "expected an array of task objects, got \(JobFileText.show(other))")
            reading.tasksUnreadable = true
        }
        if file.warnLead != nil, file.warnSignal == nil {
            top.problem(at: "warn-lead", "needs 'warn-signal' (the lead is the time after that signal)")
        }
        return file
    }

    // MARK: Tasks and defaults

    private mutating func task(_ value: JSONValue, index: Int, defaults: TaskFields) -> JobTask {
        // The name first: every other message about this task is labelled with it.
        report.place = JobFileLayout.taskName
        guard case let .object(members) = value else {
            report.add(.task(index, nil), nil, "expected an object with at least 'name' and 'command', got \(JobFileText.show(value))")
            reading.unnamedTasks.insert(index)
            return JobTask(name: "", command: [])
        }
        var name = ""
        switch members.last(where: { $0.key == "name" })?.value {
        case let .string(text)?:
            name = text
        case nil:
            report.add(.task(index, nil), "name", "is missing; every task needs a unique name, e.g. \"train\"")
            reading.unnamedTasks.insert(index)
        case let other?:
            report.add(.task(index, nil), "name", "expected a string such as \"train\", got \(JobFileText.show(other))")
            reading.unnamedTasks.insert(index)
        }
        report.place = JobFilePlace(field: -1)
        let fields = JobFileFields(members, scope: .task(index, named: name), report: report)
        let own = read(fields, .task(index)) { JobFilePlace(field: $0) }
        reading.memory?.note(.task(index), maxGiven: fields.contains("memory-max"), maxRead: own.settings.memoryMax != nil,
                             warnRead: own.settings.memoryWarn != nil)
        report.place = JobFilePlace(field: members.count)
        reading.layout.noteEnd(.task(index), at: report.place)
        if own.command == nil, !fields.contains("command") {
            fields.problem(at: "command", "is missing; expected the program and its arguments as an array, e.g. [\"python\", \"train.py\"]")
        }
        if own.settings.resources != nil { reading.ownRequests?.insert(index) }
        if own.settings.diagnoseLimit != nil, own.settings.diagnose == nil, defaults.settings.diagnose == nil {
            fields.problem(at: "diagnose-limit", "needs a 'diagnose' command (here or in 'defaults') to limit")
        }

        let sweep = sweep(own.sweep, command: own.command, settings: own.settings, name: name, in: fields)
        let settings = sharedSettings(own, over: defaults, givesAny: fields.members.contains { !Self.ownFields.contains($0.key) })
        let environment = settings.value.environment
        if settings.value.resources["gpu"] != nil, case .slots? = pools["gpu"], environment["CUDA_VISIBLE_DEVICES"] != nil {
            let from = own.settings.env?["CUDA_VISIBLE_DEVICES"] == nil ? " (it comes from 'defaults')" : ""
            fields.problem(at: "env.CUDA_VISIBLE_DEVICES", "is set by Overtime from the 'gpu' slots the task is given\(from); leave it out")
        }
        var task = JobTask(name: name, command: own.command ?? [], after: own.after ?? [], commandMadeBy: own.commandMadeBy,
                           settings: settings)
        if let sweep { task.sweep = sweep }
        task.peerGroup = own.peerGroup
        task.stragglers = own.stragglers
        if own.stragglers != nil, sweep == nil, own.peerGroup == nil {
            fields.problem(at: "stragglers", "is for a task with peers to be compared with, and this one has none; give it a 'peer-group' (or a 'matrix' or an 'array')")
        }
        return task
    }

    /// Reads the fields of a task or of `defaults`, the one at position `j` at `place(j)`.
    private mutating func read(_ fields: JobFileFields, _ layout: JobFileLayout.Scope,
                               place: (Int) -> JobFilePlace) -> TaskFields {
        let isDefaults = layout == .defaults
        var f = TaskFields()
        for (j, field) in fields.enumerated() {
            report.place = place(j)
            reading.layout.note(layout, field.key, at: report.place)
            let key = field.key
            switch key {
            case _ where isDefaults && Self.ownFields.contains(key):
                fields.problem(field, "is not allowed in 'defaults': each task gives its own '\(key)'")
            case "name":
                break  // read first, by `task`
            case "command":
                f.command = command(field, in: fields)
            case "command-made-by":
                if case let .string(name) = field.value, !name.isEmpty {
                    f.commandMadeBy = name
                } else {
                    fields.problem(field, "expected the name of the earlier task that makes the command, e.g. \"build\", got \(JobFileText.show(field.value))")
                }
            case "after":
                f.after = after(field, in: fields)
            case "matrix":
                f.sweep.given = true
                f.sweep.matrix = matrix(field, in: fields)
            case "array":
                f.sweep.given = true
                if let (indices, cap) = array(field, in: fields) {
                    f.sweep.array = indices
                    f.sweep.arrayCap = cap
                }
            case "max-running":
                if let n = fields.wholeNumber(field, "how many elements may run at once, e.g. 8") {
                    if n >= 1 { f.sweep.maxRunning = n } else { fields.problem(field, "\(n) is less than 1; expected how many elements may run at once, e.g. 8") }
                }
            case "peer-group":
                f.peerGroup = peerGroup(field, in: fields)
            case "stragglers" where isDefaults:
                fields.problem(field, "is not a field of 'defaults'; to set it for every sweep, array and peer group, move it to the top level of the job file")
            case "stragglers":
                f.stragglers = stragglers(field, in: fields)
            case _ where !isDefaults && Sweep.templatedDurations.contains(key) && field.value.placeholderText != nil:
                f.sweep.durationTemplates[key] = field.value.placeholderText
            default:
                if let setting = TaskSetting.setting(forKey: key) {
                    setting.readField(&f.settings, field, fields, self)
                    continue
                }
                let owner = isDefaults ? "'defaults'" : "a task"
                if Self.topFields.contains(key) {
                    fields.problem(field, "is a field of the job file itself, not of \(owner); move it to the top level")
                } else {
                    fields.unknown(field, .init(isNot: "is not a field of \(owner)", fields: isDefaults ? Self.defaultsFields : Self.taskFields,
                                                synonyms: Self.taskSynonyms, alwaysList: false))
                }
            }
        }
        return f
    }

    // MARK: The pools

    private mutating func readPools(_ field: JobFileField, in top: JobFileFields) -> [String: ResourcePool] {
        guard let given = top.object(field, expected: "an object of named pools, e.g. {\"gpu\": [\"0\", \"1\"], \"mem_gb\": 64}") else {
            return [:]
        }
        var pools: [String: ResourcePool] = [:]
        for item in given {
            let name = item.key
            if let entries = given.items(item) {
                var ids: [String] = []
                for entry in entries {
                    switch entry.value {
                    case let .string(id):
                        ids.append(id)
                    case let .number(n) where n >= 0 && n == n.rounded() && n < 1e15:
                        ids.append(JobFileText.number(n))
                    default:
                        given.problem(entry, "expected a slot id such as \"0\", got \(JobFileText.show(entry.value))")
                    }
                }
                pools[name] = .slots(ids)
                if ids.count != entries.count { reading.unreadablePools.insert(name) }
                continue
            }
            switch item.value {
            case .number:
                if let total = given.wholeNumber(item, "a count such as 64") {
                    pools[name] = .count(total)
                    continue
                }
            case let .string(text) where Int(text.trimmingSpaces) != nil:
                given.problem(item, "expected a count, got \(JobFileText.quote(text)); write \(text.trimmingSpaces) without quotes")
            default:
                given.problem(item, "expected a list of slot ids such as [\"0\", \"1\"] or a count such as 64, got \(JobFileText.show(item.value))")
            }
            // Kept by name (it is checked as a name), never measured.
            reading.unreadablePools.insert(name)
            pools[name] = .count(1)
        }
        return pools
    }
}
