import OvertimeProtocol

/// The readers of a task's fields (and of `defaults`), each a value or a problem said with
/// its field: the part of the job file's decoder that knows what each field may hold.
extension JobFileDecoder {
    // MARK: Task fields

    /// A user, group or nice value: a string or a whole number, read as on the command line.
    func isolationText<T>(_ field: JobFileField, in fields: JobFileFields, example: String,
                                  _ parse: (String) throws(TaskIsolation.ParseError) -> T) -> T? {
        let text: String
        switch field.value {
        case let .string(string): text = string
        case let .number(number) where number == number.rounded() && abs(number) < 1e15: text = String(Int64(number))
        default:
            fields.problem(field, "expected a string or a whole number, e.g. \(example), got \(JobFileText.show(field.value))")
            return nil
        }
        do {
            return try parse(text)
        } catch {
            fields.problem(field, error.message)
            return nil
        }
    }

    /// `{"as": "4G", "nofile": 1024, "cpu": "10m", "nproc": "64:128"}`.
    func limits(_ field: JobFileField, in fields: JobFileFields) -> [ResourceLimit]? {
        let names = ResourceLimit.Resource.allCases.map(\.rawValue)
        guard let given = fields.object(field, expected: "an object of resource limits, e.g. {\"as\": \"4G\", \"nofile\": 1024, \"cpu\": \"1h\", \"nproc\": 256}") else {
            return nil
        }
        var limits: [ResourceLimit] = []
        for item in given {
            guard let resource = ResourceLimit.Resource(rawValue: item.key) else {
                given.unknown(item, .init(isNot: "is not a resource Overtime limits", fields: names, synonyms: Self.limitSynonyms,
                                          listed: "they are", alwaysList: false))
                continue
            }
            let example = resource == .addressSpace ? "\"4G\"" : resource == .cpuSeconds ? "\"1h\"" : "1024"
            if let limit = isolationText(item, in: given, example: example, { text throws(TaskIsolation.ParseError) in
                try ResourceLimit.parse(resource, text)
            }) {
                limits.removeAll { $0.resource == resource }
                limits.append(limit)
            }
        }
        return limits
    }

    /// `"8G"`, `"512MiB"`, or `"none"` for no watchdog. A bare JSON number is refused rather
    /// than read as bytes: `"memory-max": 8` meant 8 GiB, and 8 bytes would cancel the task
    /// at its first sample.
    func memoryMax(_ field: JobFileField, in fields: JobFileFields) -> TaskSettingValues.MemoryLimit? {
        switch field.value {
        case let .string(text):
            if text.trimmingSpaces.lowercased() == "none" { return TaskSettingValues.MemoryLimit(bytes: nil) }
            do {
                return TaskSettingValues.MemoryLimit(bytes: try ByteSize.parse(text))
            } catch {
                fields.problem(field, error.description + ", or \"none\" for no limit")
                return nil
            }
        case let .number(n) where n > 0:
            let shown = JobFileText.number(n)
            fields.problem(field, "\(shown) has no unit; write the size as a string with its unit, e.g. \"\(shown)G\" or \"\(shown)M\" (\"\(shown)\" in quotes is bytes)")
            return nil
        case .null:
            fields.problem(field, JobFileFields.nullAdvice(allowNone: true))
            return nil
        default:
            fields.problem(field, "expected \(ByteSize.expected) (as a string), or \"none\" for no limit, got \(JobFileText.show(field.value))")
            return nil
        }
    }

    /// `"80%"` of the max, or a size such as `"7G"`.
    func memoryWarn(_ field: JobFileField, in fields: JobFileFields) -> MemoryPolicy.WarnLevel? {
        switch field.value {
        case let .string(text):
            do {
                return try MemoryPolicy.parseWarn(text)
            } catch {
                fields.problem(field, error.description)
                return nil
            }
        case let .number(n) where n > 0:
            // 0.8 is read as a share, as people write it in other tools; 80 as a percentage.
            let shown = JobFileText.number(n)
            let percent = n <= 1 ? JobFileText.number((n * 100 * 1e6).rounded() / 1e6) : shown
            fields.problem(field, "\(shown) has no unit; write a share of memory-max such as \"\(percent)%\", or a size such as \"\(shown)G\", as a string")
            return nil
        case .null:
            fields.problem(field, JobFileFields.nullAdvice(allowNone: false))
            return nil
        default:
            fields.problem(field, "expected a share of memory-max such as \"80%\" or a size such as \"1.5G\" (as a string), got \(JobFileText.show(field.value))")
            return nil
        }
    }

    static let limitSynonyms: [String: String] = [
        "addressspace": "as", "memory": "as", "mem": "as", "vmem": "as", "rlimitas": "as",
        "openfiles": "nofile", "files": "nofile", "fds": "nofile", "rlimitnofile": "nofile",
        "cputime": "cpu", "rlimitcpu": "cpu", "processes": "nproc", "procs": "nproc", "rlimitnproc": "nproc",
    ]

    func command(_ field: JobFileField, in fields: JobFileFields) -> [String]? {
        switch field.value {
        case let .string(line):
            fields.problem(field, "a string is not a command: write it as an array of arguments, \(Self.argvAdvice(for: line))")
            return nil
        case .array:
            let items = fields.items(field) ?? []
            if items.isEmpty {
                fields.problem(field, "is empty; expected the program and its arguments, e.g. [\"python\", \"train.py\"]")
                return nil
            }
            var argv: [String] = []
            for (k, item) in items.enumerated() {
                guard let argument = fields.quotedString(item) else { continue }
                if k == 0, argument.isEmpty {
                    fields.problem(item, "the program name is empty; expected a program such as \"python\" or a path such as \"./train.sh\"")
                } else if argument.utf8.contains(0) {
                    fields.problem(item, "holds a NUL character, which no argument can")
                }
                argv.append(argument)
            }
            return argv.count == items.count ? argv : nil
        default:
            fields.problem(field, "expected the program and its arguments as an array of strings, e.g. [\"python\", \"train.py\"], got \(JobFileText.show(field.value))")
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

    private static let reservedVariables: Set = ["OVERTIME_FD", "OVERTIME_TASK", "OVERTIME_RUN", "OVERTIME_ATTEMPT", "OVERTIME_SWEEP", "OVERTIME_INDEX"]

    static func notifyFD(_ field: JobFileField, in fields: JobFileFields) -> Int32? {
        let range = Readiness.notifyFDRange
        guard let fd = fields.wholeNumber(field, "a descriptor from \(range.lowerBound) to \(range.upperBound), e.g. 5") else { return nil }
        guard range.contains(Int32(clamping: fd)) else {
            fields.problem(field, "\(fd) is not a descriptor from \(range.lowerBound) to \(range.upperBound) (0 to 2 are the task's standard streams, 3 its channel)")
            return nil
        }
        return Int32(fd)
    }

    static func diagnose(_ field: JobFileField, in fields: JobFileFields) -> String? {
        guard let command = fields.string(field, expected: "a shell command such as \"py-spy dump --pid {pid}\"") else { return nil }
        guard !command.trimmingSpaces.isEmpty else {
            fields.problem(field, "is empty; expected a shell command such as \"py-spy dump --pid {pid}\"")
            return nil
        }
        return command
    }

    func environment(_ field: JobFileField, in fields: JobFileFields) -> [String: String]? {
        guard let given = fields.object(field, expected: "an object of variables and their values, e.g. {\"LOG_LEVEL\": \"debug\"}") else {
            return nil
        }
        var environment: [String: String] = [:]
        for item in given {
            let key = item.key
            if key.isEmpty {
                given.problem(nil, "a variable name is empty")
            } else if key.contains("=") {
                given.problem(item, "a variable name cannot hold '='")
            } else if key.utf8.contains(0) {
                given.problem(item, "a variable name cannot hold a NUL character")
            } else if Self.reservedVariables.contains(key) || key.hasPrefix("OVERTIME_RESOURCE_") {
                given.problem(item, "is set by Overtime for every task (docs/protocol.md, docs/jobfile.md); use another name")
            }
            guard let text = given.quotedString(item, ifNull: "expected a string, got null; a variable cannot be unset here, only set") else {
                continue
            }
            if text.utf8.contains(0) {
                given.problem(item, "holds a NUL character, which no variable can")
            } else {
                environment[key] = text
            }
        }
        return environment
    }

    func directory(_ field: JobFileField, in fields: JobFileFields) -> String? {
        guard let path = fields.string(field, expected: "a directory path as a string, e.g. \"data\" or \"/srv/pipeline\"") else {
            return nil
        }
        if path.isEmpty {
            fields.problem(field, "is empty; expected a directory, e.g. \"data\" (relative to the job file) or \"/srv/pipeline\"")
            return nil
        }
        if path.hasPrefix("~") {
            fields.problem(field, "\(JobFileText.quote(path)): '~' is not expanded (no shell runs); write the full path, or one relative to the job file")
            return nil
        }
        if path.utf8.contains(0) {
            fields.problem(field, "holds a NUL character, which no path can")
            return nil
        }
        return JobFilePath.resolve(path, against: baseDirectory)
    }

    func after(_ field: JobFileField, in fields: JobFileFields) -> [Dependency]? {
        guard let items = fields.items(field) else {
            if case let .string(name) = field.value {
                fields.problem(field, "expected an array of task names; write [\(JobFileText.quote(name))]")
            } else {
                fields.problem(field, "expected an array of task names or {\"task\": …, \"when\": …} objects, e.g. [\"prep\", {\"task\": \"server\", \"when\": \"ready\"}], got \(JobFileText.show(field.value))")
            }
            return nil
        }
        var dependencies: [Dependency] = []
        for item in items {
            if case let .string(name) = item.value {
                dependencies.append(Dependency(task: name))
                continue
            }
            guard let given = fields.nested(item) else {
                fields.problem(item, "expected a task name or an object such as {\"task\": \"prep\", \"when\": \"done\"}, got \(JobFileText.show(item.value))")
                continue
            }
            var dependency = Dependency(task: "")
            var named = false
            var parts = JobFileParts()
            for part in given {
                switch part.key {
                case "task":
                    if let name = parts.read(given.string(part, expected: "a task name")) {
                        dependency.task = name
                        named = true
                    }
                case "when":
                    if let condition = parts.read(condition(part, in: given)) { dependency.condition = condition }
                case "same-index":
                    if let sameIndex = parts.read(given.bool(part)) { dependency.sameIndex = sameIndex }
                default:
                    given.unknown(part, .init(isNot: "is not a field of a dependency", fields: Self.dependencyFields,
                                              synonyms: Self.dependencySynonyms, shownList: "task, when, same-index"))
                    parts.fail()
                }
            }
            if !named, parts.allRead {
                given.problem(at: given.path(of: "task"), "is missing; expected the name of the task to wait for, e.g. {\"task\": \"prep\", \"when\": \"done\"}")
            }
            if named { dependencies.append(dependency) }
        }
        return dependencies
    }

    func condition(_ field: JobFileField, in fields: JobFileFields) -> Dependency.Condition? {
        let known = Dependency.Condition.allCases.map(\.rawValue)
        guard let word = fields.string(field, expected: JobFileText.list(known)) else { return nil }
        if let condition = Dependency.Condition(rawValue: word) { return condition }
        fields.problem(field, "\(JobFileText.quote(word)) is not a condition\(JobFileText.aside(for: word, among: known, synonyms: Self.conditionSynonyms)); expected success (it succeeded), done (it ended, however) or ready (it reported ready)")
        return nil
    }

    func requests(_ field: JobFileField, in fields: JobFileFields) -> [String: Int]? {
        guard let given = fields.object(field, expected: "an object of pool names and amounts, e.g. {\"gpu\": 1, \"mem_gb\": 16}") else {
            return nil
        }
        var requests: [String: Int] = [:]
        for item in given {
            if case .array = item.value {
                given.problem(item, "a task asks for a number of slots, not for ids (Overtime hands out free ones); write \"\(item.key)\": 1")
                continue
            }
            if let amount = given.wholeNumber(item, "how much of pool '\(item.key)' the task needs, e.g. 1") {
                requests[item.key] = amount
            }
        }
        return requests
    }

    func retries(_ field: JobFileField, in fields: JobFileFields) -> RetryPolicy? {
        let count = "how many times a failed attempt is retried"
        switch field.value {
        case .number:
            guard let n = fields.wholeNumber(field, "\(count), e.g. 3") else { return nil }
            guard n >= 0 else {
                fields.problem(field, "\(n) is negative; expected \(count) (0 for never)")
                return nil
            }
            return RetryPolicy(maxRetries: n)
        case .object:
            guard let given = fields.nested(field) else { return nil }
            var policy = RetryPolicy()
            var parts = JobFileParts()
            var explicitMaxBackoff = false
            for item in given {
                switch item.key {
                case "max":
                    if let n = parts.read(given.wholeNumber(item, "\(count), e.g. 3")) {
                        if n < 0 {
                            given.problem(item, "\(n) is negative; expected \(count) (0 for never)")
                            parts.fail()
                        }
                        policy.maxRetries = n
                    }
                case "backoff":
                    if let d = parts.read(given.duration(item, allowNone: false, positive: false)?.duration) { policy.backoff = d }
                case "max-backoff":
                    if let d = parts.read(given.duration(item, allowNone: false, positive: false)?.duration) {
                        policy.maxBackoff = d
                        explicitMaxBackoff = true
                    }
                case "on":
                    if let words = parts.read(retryConditions(item, in: given)) {
                        policy.on = words.conditions
                        policy.exitStatuses = words.exitStatuses
                    }
                default:
                    given.unknown(item, .init(isNot: "is not a field of 'retries'", fields: Self.retryFields, synonyms: Self.retrySynonyms))
                    parts.fail()
                }
            }
            if !given.contains("max") {
                given.problem(at: given.path(of: "max"), "is missing; expected \(count), e.g. {\"max\": 3}")
                return nil
            }
            guard parts.allRead else { return nil }
            if policy.backoff > policy.maxBackoff {
                if explicitMaxBackoff {
                    given.problem(at: given.path(of: "backoff"), "\(DurationText.format(policy.backoff)) is longer than max-backoff (\(DurationText.format(policy.maxBackoff))); make backoff at most max-backoff")
                    return nil
                }
                policy.maxBackoff = policy.backoff
            }
            return policy
        default:
            fields.problem(field, "expected a number of retries such as 3, or an object such as {\"max\": 3, \"backoff\": \"5s\", \"on\": [\"timeout\", \"exit\"]}, got \(JobFileText.show(field.value))")
            return nil
        }
    }

    /// The classes and exit statuses `retries.on` lists.
    private struct RetryWords {
        var conditions = Set<RetryCondition>()
        var exitStatuses = Set<Int32>()
    }

    /// The words `retries.on` takes, for messages: the classes, `failed`, and `exit:N`.
    static let retryWords = RetryCondition.allCases.map(\.rawValue) + RetryCondition.aliases.keys.sorted() + ["exit:N"]

    private func retryConditions(_ field: JobFileField, in fields: JobFileFields) -> RetryWords? {
        let known = Self.retryWords
        guard let items = fields.items(field) else {
            let example = if case let .string(word) = field.value { "[\(JobFileText.quote(word))]" } else { "[\"timeout\", \"exit\"]" }
            fields.problem(field, "expected an array of outcomes, e.g. \(example), got \(JobFileText.show(field.value))")
            return nil
        }
        if items.isEmpty {
            fields.problem(field, "is empty, so nothing would be retried; to turn retries off write \"retries\": 0")
            return nil
        }
        var words = RetryWords()
        var valid = true
        for item in items {
            if case let .number(n) = item.value, n == n.rounded(), abs(n) < 1e15 {
                // An exit status written on its own: the form that names one is "exit:N".
                fields.problem(item, "expected an outcome, got \(JobFileText.number(n)); to retry exit status \(JobFileText.number(n)) write \"exit:\(JobFileText.number(n))\"")
                valid = false
                continue
            }
            guard let word = fields.string(item, expected: "one of \(JobFileText.list(known))") else {
                valid = false
                continue
            }
            if let condition = RetryCondition(word: word) {
                words.conditions.insert(condition)
                continue
            }
            switch exitEntry(word, item, in: fields) {
            case let .status(status):
                words.exitStatuses.insert(status)
                continue
            case .bad:
                valid = false
                continue
            case .notOne:
                break
            }
            valid = false
            switch word {
            case "user", "shutdown", "fail-fast":
                fields.problem(item, "a '\(word)' cancel is never retried: it is final; expected \(JobFileText.list(known))")
            case "dependency":
                fields.problem(item, "a task skipped for a dependency never ran, so it cannot be retried; expected \(JobFileText.list(known))")
            default:
                let classes = RetryCondition.allCases.map(\.rawValue) + RetryCondition.aliases.keys.sorted()
                fields.problem(item, "\(JobFileText.quote(word)) is not an outcome\(JobFileText.aside(for: word, among: classes, synonyms: Self.retryWordSynonyms)); expected \(JobFileText.list(known))")
            }
        }
        return valid ? words : nil
    }

    /// Words for the classes from other tools and from Overtime's own reports (folded).
    static let retryWordSynonyms: [String: String] = [
        "oomkilled": "oom", "oomkill": "oom", "outofmemory": "oom", "memorymax": "memory", "mem": "memory",
        "timedout": "timeout", "stalled": "timeout", "maxruntime": "deadline", "crash": "signal", "crashed": "signal",
        "error": "failed", "nonzero": "failed", "exitcode": "exit",
    ]

    /// What a word of `retries.on` is as an `exit:N` entry.
    private enum ExitEntry {
        /// Not of the form `exit:…` at all.
        case notOne
        /// `exit:…` with something other than a status that can be retried (reported).
        case bad
        case status(Int32)
    }

    private func exitEntry(_ word: String, _ item: JobFileField, in fields: JobFileFields) -> ExitEntry {
        guard let colon = word.firstIndex(of: ":"), String(word[..<colon]).trimmingSpaces.lowercased() == "exit" else { return .notOne }
        let text = String(word[word.index(after: colon)...]).trimmingSpaces
        let range = RetryPolicy.retryableExitStatuses
        guard text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-") }), let status = Int(text) else {
            fields.problem(item, "\(JobFileText.quote(word)): \(JobFileText.quote(text)) is not an exit status; expected exit:N with N from \(range.lowerBound) to \(range.upperBound), e.g. \"exit:3\"")
            return .bad
        }
        if status == 0 {
            fields.problem(item, "\(JobFileText.quote(word)): exit status 0 is success, which is never retried; expected exit:N with N from \(range.lowerBound) to \(range.upperBound)")
            return .bad
        }
        guard range.contains(Int32(clamping: status)) else {
            fields.problem(item, "\(JobFileText.quote(word)): \(status) is not an exit status (they go from \(range.lowerBound) to \(range.upperBound)); a death by signal N, which a shell shows as 128+N, is retried with \"signal\"")
            return .bad
        }
        return .status(Int32(status))
    }
}
