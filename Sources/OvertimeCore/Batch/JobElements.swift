import OvertimeProtocol

/// What a batch runs: each task of its job file that is no sweep, and each element of every
/// sweep and array, numbered from 0 in file order (a sweep's elements in its own order).
///
/// An element is made (`task(_:)`: its name, its command with the placeholders replaced)
/// only when it is asked for, which the batch does as it starts it: a million-element array
/// is one task of the job file until then.
public struct JobElements: Sendable {
    public let job: JobFile
    /// How many elements in all.
    public let count: Int
    /// Per task of the job file, its first element; empty when no task is a sweep (then
    /// element i is task i).
    private let firsts: [Int]
    /// Each task's index, by name.
    private let entryByName: [String: Int]

    public init(_ job: JobFile) {
        self.job = job
        let tasks = job.tasks
        var names: [String: Int] = [:]
        names.reserveCapacity(tasks.count)
        for i in tasks.indices { names[tasks[i].name] = i }
        entryByName = names
        if tasks.contains(where: { $0.sweep != nil }) {
            var firsts: [Int] = []
            firsts.reserveCapacity(tasks.count)
            var next = 0
            for i in tasks.indices {
                firsts.append(next)
                next += tasks[i].sweep?.count ?? 1
            }
            self.firsts = firsts
            count = next
        } else {
            firsts = []
            count = tasks.count
        }
    }

    /// The job file's task (its entry) that element `element` is of.
    public func entry(of element: Int) -> Int {
        guard !firsts.isEmpty else { return element }
        var low = 0, high = firsts.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if firsts[mid] <= element { low = mid } else { high = mid - 1 }
        }
        return low
    }

    /// Element `element`'s position in its sweep (0 for a task that is none).
    public func position(of element: Int) -> Int {
        firsts.isEmpty ? 0 : element - firsts[entry(of: element)]
    }

    /// The elements of the job file's task `entry`.
    public func elements(ofEntry entry: Int) -> Range<Int> {
        guard !firsts.isEmpty else { return entry..<(entry + 1) }
        let first = firsts[entry]
        return first..<(first + (job.tasks[entry].sweep?.count ?? 1))
    }

    /// The job file's task named `name` (a whole sweep by its own name).
    public func entry(named name: String) -> Int? {
        entryByName[name]
    }

    /// Element `element`'s name: the task's, or `train[lr=0.01,seed=1]`, `shard[7]`.
    public func name(_ element: Int) -> String {
        let entry = entry(of: element)
        let task = job.tasks[entry]
        guard let sweep = task.sweep else { return task.name }
        return sweep.name(at: element - firsts[entry], of: task.name)
    }

    /// The element named `name`: a task that is no sweep, or an element by its full name.
    public func element(named name: String) -> Int? {
        if let entry = entryByName[name] {
            return job.tasks[entry].sweep == nil ? elements(ofEntry: entry).lowerBound : nil
        }
        guard name.last == "]", let open = name.firstIndex(of: "["), let entry = entryByName[String(name[..<open])],
              let sweep = job.tasks[entry].sweep,
              let position = sweep.position(ofLabel: name[name.index(after: open)..<name.index(before: name.endIndex)]) else {
            return nil
        }
        return firsts[entry] + position
    }

    /// The elements named in `names` (a resumed run's successes), in order, with their
    /// names; names of no element are left out. A matrix's elements are looked through once
    /// rather than once a name: a label is found in a matrix by looking.
    public func elements(named names: Set<String>) -> [(element: Int, name: String)] {
        guard !names.isEmpty else { return [] }
        var found: [(element: Int, name: String)] = []
        var matrices: Set<Int> = []
        for name in names {
            if let entry = entryByName[name] {
                if job.tasks[entry].sweep == nil { found.append((elements(ofEntry: entry).lowerBound, name)) }
            } else if let open = name.firstIndex(of: "["), let entry = entryByName[String(name[..<open])],
                      let sweep = job.tasks[entry].sweep {
                if case .matrix = sweep.elements {
                    matrices.insert(entry)
                } else if let element = element(named: name) {
                    found.append((element, name))
                }
            }
        }
        for entry in matrices {
            let sweep = job.tasks[entry].sweep!
            for element in elements(ofEntry: entry) {
                let name = sweep.name(at: element - firsts[entry], of: job.tasks[entry].name)
                if names.contains(name) { found.append((element, name)) }
            }
        }
        return found.sorted { $0.element < $1.element }
    }

    /// Element `element` as a task of its own: for a sweep's element, its name, and its
    /// command, environment, directory and budget with the placeholders replaced. An element
    /// whose budget fields cannot be read (the file was checked, so only a job built in code)
    /// keeps the sweep's.
    public func task(_ element: Int) -> JobTask {
        let entry = entry(of: element)
        let base = job.tasks[entry]
        guard let sweep = base.sweep else { return base }
        let position = element - firsts[entry]
        var task = base
        task.sweep = nil
        task.name = sweep.name(at: position, of: base.name)
        task.command = base.command.map { sweep.substitute($0, at: position) }
        if base.environment.values.contains(where: { $0.contains("{") }) {
            task.environment = base.environment.mapValues { sweep.substitute($0, at: position) }
        }
        if let directory = base.workingDirectory, directory.contains("{") {
            task.workingDirectory = sweep.substitute(directory, at: position)
        }
        if !sweep.durationTemplates.isEmpty, case let .success(policy) = sweep.policy(over: base.policy, at: position) {
            task.policy = policy
        }
        return task
    }
}

extension JobElements {
    /// What the job holds, for `overtime batch --check`: "ok: 3 tasks, 1,007 to run
    /// (train: a matrix of 6; shard: an array of 1,000)".
    public var summary: String {
        let tasks = job.tasks
        let sweeps = tasks.compactMap { task in task.sweep.map { "\(task.name): \($0.kind == "matrix" ? "a matrix" : "an array") of \(Self.grouped($0.count))" } }
        var text = "ok: \(Self.grouped(tasks.count)) task\(tasks.count == 1 ? "" : "s")"
        if !sweeps.isEmpty { text += ", \(Self.grouped(count)) to run (\(sweeps.joined(separator: "; ")))" }
        return text
    }

    /// The file name of task `name`'s log (`train[lr=0.01,seed=1].log`): a task's name as it
    /// is, an element's with what no file name may hold (`/`, from a value such as a path)
    /// and `%` written as `%2F` and `%25`, cut with a hash of the whole when it would pass
    /// the filesystem's 255 bytes.
    public static func logFileName(for name: String) -> String {
        var escaped = ""
        for c in name.unicodeScalars {
            switch c {
            case "/": escaped += "%2F"
            case "%": escaped += "%25"
            case _ where c.value < 0x20: escaped += "%" + (c.value < 0x10 ? "0" : "") + String(c.value, radix: 16, uppercase: true)
            default: escaped.unicodeScalars.append(c)
            }
        }
        guard escaped.utf8.count > 240 else { return escaped + ".log" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        var kept = ""
        for c in escaped.unicodeScalars {
            guard kept.utf8.count + String(c).utf8.count <= 200 else { break }
            kept.unicodeScalars.append(c)
        }
        return kept + "~" + String(hash, radix: 16) + ".log"
    }

    /// 1,000,000.
    public static func grouped(_ n: Int) -> String {
        var digits = Array(String(n))
        var i = digits.count - 3
        while i > 0 {
            digits.insert(",", at: i)
            i -= 3
        }
        return String(digits)
    }
}

extension Sweep {
    /// `policy` with the budget fields this sweep writes with placeholders read for element
    /// `position`, as `overtime run`'s options read them; or the first field that cannot be.
    func policy(over policy: BudgetPolicy, at position: Int) -> Result<BudgetPolicy, TemplatedFieldProblem> {
        var values = TaskSettingValues()
        for key in durationTemplates.keys.sorted() {
            let text = substitute(durationTemplates[key]!, at: position)
            guard let option = TaskSetting.setting(forKey: key)?.options.first else { continue }
            do throws(TaskSetting.ValueError) {
                try option.read(&values, text, Self.noAccounts)
            } catch {
                return .failure(TemplatedFieldProblem(key: key, text: text, message: error.message))
            }
        }
        var policy = policy
        if let budget = values.budget { policy.budget = budget.duration }
        values.window?.apply(to: &policy)
        if let maxRuntime = values.maxRuntime { policy.maxRuntime = maxRuntime.duration }
        if let grace = values.grace { policy.grace = grace }
        if let warnBefore = values.warnBefore { policy.warnBefore = warnBefore }
        if let lead = values.checkpointLead { policy.checkpointLead = lead }
        return .success(policy)
    }

    /// A budget field whose text, placeholders replaced, cannot be read.
    struct TemplatedFieldProblem: Error {
        var key: String
        var text: String
        var message: String
    }

    /// The duration fields a placeholder may stand in.
    static let templatedDurations: Set = ["budget", "window", "max-runtime", "grace", "warn-before", "checkpoint-lead"]

    /// Durations name no account.
    private static let noAccounts = AccountLookup(user: { name throws(TaskIsolation.ParseError) in throw .emptyName(.user) },
                                                  group: { name throws(TaskIsolation.ParseError) in throw .emptyName(.group) })
}
