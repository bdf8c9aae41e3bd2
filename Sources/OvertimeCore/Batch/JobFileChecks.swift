/// Where a problem was found: the file as a whole, its `defaults`, or one task.
enum JobFileScope {
    case top
    case defaults
    /// A task by position (from 0) and by name when it has a usable one.
    case task(Int, String?)

    static func task(_ index: Int, named name: String) -> JobFileScope {
        .task(index, name.isEmpty ? nil : name)
    }

    var label: String {
        switch self {
        case .top: ""
        case .defaults: "defaults: "
        case let .task(_, name?): "task '\(name)': "
        case let .task(index, nil): "task #\(index + 1): "
        }
    }
}

/// The problems found, in the order a user reads them: the file's own fields (then
/// `defaults`), then each task in turn, then the dependency cycles (which belong to no
/// single task). Within a scope they follow their places (`JobFilePlace`), found order
/// breaking ties, so a check made after reading lands beside the field it is about.
struct JobFileProblems {
    private struct Entry {
        var place: JobFilePlace
        var text: String
    }

    private var top: [Entry] = []
    private var tasks: [Int: [Entry]] = [:]
    private var cycles: [String] = []

    /// Records "label field 'path': message" ("… field 'path' is …" when the message
    /// starts with "is ").
    mutating func add(_ scope: JobFileScope, _ field: String?, _ message: String,
                      at place: JobFilePlace = .unplaced, cycle: Bool = false) {
        var text = scope.label
        if let field {
            text += "field '\(field)'" + (message.hasPrefix("is ") ? " " : ": ")
        }
        text += message
        // Names, keys and values from the file are in it: one line, nothing a terminal obeys.
        text = JobFileText.printable(text, limit: Int.max)
        if cycle {
            cycles.append(text)
            return
        }
        let entry = Entry(place: place, text: text)
        switch scope {
        case .top, .defaults: top.append(entry)
        case let .task(index, _): tasks[index, default: []].append(entry)
        }
    }

    var isEmpty: Bool { top.isEmpty && tasks.isEmpty && cycles.isEmpty }

    var all: [String] {
        Self.placed(top) + tasks.keys.sorted().flatMap { Self.placed(tasks[$0]!) } + cycles
    }

    /// By place, and in found order at one place.
    private static func placed(_ entries: [Entry]) -> [String] {
        entries.enumerated()
            .sorted { a, b in a.element.place != b.element.place ? a.element.place < b.element.place : a.offset < b.offset }
            .map(\.element.text)
    }
}

/// Where the fields of each scope were in the file, so that a problem the checker finds
/// about a field comes where the file lists that field.
///
/// Only the fields the checker places problems at are kept, and a task's name and end
/// compactly: a file of a million tasks must not keep a table of every task's fields.
struct JobFileLayout {
    enum Scope: Hashable {
        case top, defaults, task(Int)
    }

    /// A task's name is read before its other fields, so problems about it come first.
    static let taskName = JobFilePlace(field: -2)

    private var fields: [Scope: [String: JobFilePlace]] = [:]
    private var ends: [Scope: JobFilePlace] = [:]
    /// Each task's end, by index: the field after its last one.
    private var taskEnds: [Int32] = []

    mutating func note(_ scope: Scope, _ field: String, at place: JobFilePlace) {
        switch field {
        case "concurrency", "resources", "memory-max", "memory-warn":  // those the checker asks for
            fields[scope, default: [:]][field] = place
        default:
            break
        }
    }

    /// Where a check of the scope as a whole goes: after its fields.
    mutating func noteEnd(_ scope: Scope, at place: JobFilePlace) {
        guard case let .task(index) = scope, place.within == 0 else {
            ends[scope] = place
            return
        }
        // A task that is no object has no end (its problems are unplaced).
        while taskEnds.count <= index { taskEnds.append(Int32(JobFilePlace.unplaced.field)) }
        taskEnds[index] = Int32(clamping: place.field)
    }

    func place(_ scope: Scope, _ field: String) -> JobFilePlace {
        if case .task = scope, field == "name" { return Self.taskName }
        return fields[scope]?[field] ?? .unplaced
    }

    func end(_ scope: Scope) -> JobFilePlace {
        if case let .task(index) = scope {
            return index < taskEnds.count ? JobFilePlace(field: Int(taskEnds[index])) : .unplaced
        }
        return ends[scope] ?? .unplaced
    }
}

/// What reading a job file found that checking it needs: the values that could not be
/// read (a problem was reported about each, so the checker reports nothing derived from
/// them), where requests were written, and where each field was.
struct JobFileReading {
    /// Pools that could not be read whole: checked by name only, and requests are not
    /// measured against them.
    var unreadablePools: Set<String> = []
    /// 'tasks' was missing or not an array: an empty task list is not a second problem.
    var tasksUnreadable = false
    /// Tasks whose name could not be read (missing, not a string, the task not an object).
    var unnamedTasks: Set<Int> = []
    /// The requests of `defaults`, checked once, there.
    var defaultRequests: [String: Int]?
    /// Tasks that gave readable requests of their own (the others' are the defaults',
    /// checked there); nil for a job built in code, where every task's are its own.
    var ownRequests: Set<Int>?
    var layout = JobFileLayout()
    /// Which scopes gave `memory-max` and `memory-warn`; nil for a job built in code (the
    /// checker then reads its tasks' own values as given).
    var memory: MemoryFields?

    /// The merged `MemoryPolicy` cannot say whether a task wrote its warning level (90% is
    /// also the default) or got it from `defaults`; the checks need both to name the right
    /// field, and to say nothing about a max that could not be read.
    struct MemoryFields {
        /// Scopes that wrote a readable `memory-max` (`"none"` included).
        var max: Set<JobFileLayout.Scope> = []
        /// Scopes that wrote a readable `memory-warn`.
        var warn: Set<JobFileLayout.Scope> = []
        /// Scopes whose `memory-max` was written but could not be read (reported already).
        var unreadableMax: Set<JobFileLayout.Scope> = []

        mutating func note(_ scope: JobFileLayout.Scope, maxGiven: Bool, maxRead: Bool, warnRead: Bool) {
            if maxRead { max.insert(scope) } else if maxGiven { unreadableMax.insert(scope) }
            if warnRead { warn.insert(scope) }
        }

        /// A job built in code: each task's values are its own, a warning level other
        /// than the default counting as written.
        init(ownValuesOf file: JobFile) {
            for (i, task) in file.tasks.enumerated() {
                if task.memory.max != nil { max.insert(.task(i)) }
                if task.memory.warn != MemoryPolicy.defaultWarn { warn.insert(.task(i)) }
            }
        }

        init() {}
    }
}

/// The checks a scheduler relies on, about what a job means rather than how it is written:
/// concurrency, at least one task, names, pools and requests, commands, dependencies and
/// cycles. Run once on the model, whether it was read from a file (given what reading
/// found, `JobFileReading`) or built in code.
struct JobFileChecker {
    var report = JobFileProblems()
    var problems: [String] { report.all }

    /// The longest task name: it becomes part of a file name.
    static let maximumNameLength = 100

    /// Where each name first appears.
    private(set) var nameIndex: [String: Int] = [:]

    /// - Parameter report: the problems found so far (in reading the file).
    init(report: JobFileProblems = JobFileProblems()) {
        self.report = report
    }

    /// Checks `file`.
    /// - Parameters:
    ///   - reading: what reading the file found; a job built in code gives none.
    ///   - commandProblem: what is wrong with a task's command, if it is to be looked up.
    mutating func check(_ file: JobFile, reading: JobFileReading = JobFileReading(),
                        commandProblem: ((_ program: String, _ task: JobTask) -> String?)? = nil) {
        let layout = reading.layout
        checkConcurrency(file.concurrency, at: layout.place(.top, "concurrency"))
        if !reading.tasksUnreadable, file.tasks.isEmpty {
            report.add(.top, "tasks", "the list is empty; a job file needs at least one task", at: layout.end(.top))
        }
        checkPools(file.resources, unreadable: reading.unreadablePools, at: layout.place(.top, "resources"))
        if let requests = reading.defaultRequests {
            checkRequests(requests, pools: file.resources, lenient: reading.unreadablePools, scope: .defaults,
                          at: layout.place(.defaults, "resources"))
        }
        // Tasks are looked at in place (`tasks[i]`) rather than copied out one by one, here
        // and below: a copy retains and releases each of a task's parts, a million times a
        // loop in a large file.
        let tasks = file.tasks
        nameIndex.reserveCapacity(tasks.count)
        for i in tasks.indices where !reading.unnamedTasks.contains(i) {
            noteName(tasks[i].name, at: i, place: layout.place(.task(i), "name"))
        }
        for i in tasks.indices {
            let scope = JobFileScope.task(i, named: tasks[i].name)
            if reading.ownRequests?.contains(i) ?? true {
                checkRequests(tasks[i].resources, pools: file.resources, lenient: reading.unreadablePools, scope: scope,
                              at: layout.place(.task(i), "resources"))
            }
            checkCommand(of: tasks[i], scope: scope, lookUp: commandProblem, at: layout.end(.task(i)))
            checkDependencies(of: tasks[i], scope: scope, among: tasks, at: layout.end(.task(i)))
        }
        checkMemory(file.tasks, given: reading.memory ?? .init(ownValuesOf: file), layout: layout)
        checkCycles(file.tasks)
    }

    // MARK: Memory

    /// A warning level is about the memory cancel to come: it needs a `memory-max` and must
    /// be below it. Each problem is told where its fields were written: a level `defaults`
    /// gives and no task can use is reported once there, not once a task.
    private mutating func checkMemory(_ tasks: [JobTask], given: JobFileReading.MemoryFields, layout: JobFileLayout) {
        let defaultsMaxUnread = given.unreadableMax.contains(.defaults)
        if given.warn.contains(.defaults), !defaultsMaxUnread, !tasks.isEmpty, tasks.allSatisfy({ $0.memory.max == nil }) {
            report.add(.defaults, "memory-warn", "is set but no task has a memory-max; the warning comes ahead of a memory cancel, so give memory-max too, e.g. \"memory-max\": \"8G\"",
                       at: layout.place(.defaults, "memory-warn"))
        }
        var reportedInDefaults = false
        for i in tasks.indices {
            let own = JobFileLayout.Scope.task(i)
            let ownWarn = given.warn.contains(own)
            guard let max = tasks[i].memory.max else {
                let maxUnread = given.unreadableMax.contains(own) || (defaultsMaxUnread && !given.max.contains(own))
                if ownWarn, !maxUnread {
                    report.add(.task(i, named: tasks[i].name), "memory-warn", "is set but the task has no memory-max; the warning comes ahead of a memory cancel, so give memory-max too, e.g. \"memory-max\": \"8G\"",
                               at: layout.place(own, "memory-warn"))
                }
                continue
            }
            guard case let .bytes(warn) = tasks[i].memory.warn, warn > max else { continue }
            let ownMax = given.max.contains(own)
            let scope = JobFileScope.task(i, named: tasks[i].name)
            let place = layout.place(own, ownWarn ? "memory-warn" : "memory-max")
            func problem(_ from: String) -> String {
                "\(ByteSize.text(warn)) is above memory-max (\(ByteSize.text(max)))\(from); the warning comes before the cancel, so set it lower, e.g. \"90%\" (the default)"
            }
            if !ownMax, !ownWarn {
                if !reportedInDefaults {
                    report.add(.defaults, "memory-warn", problem(""), at: layout.place(.defaults, "memory-warn"))
                    reportedInDefaults = true
                }
            } else {
                let from = !ownWarn ? " (memory-warn comes from 'defaults')" : !ownMax ? " (memory-max comes from 'defaults')" : ""
                report.add(scope, "memory-warn", problem(from), at: place)
            }
        }
    }

    private mutating func checkConcurrency(_ concurrency: Int, at place: JobFilePlace) {
        if concurrency < 1 {
            report.add(.top, "concurrency", "\(concurrency) is less than 1; expected how many tasks may run at once, e.g. 4", at: place)
        }
    }

    // MARK: Pools and requests

    /// Checks the pools; those in `unreadable` (reported already) only by name.
    private mutating func checkPools(_ pools: [String: ResourcePool], unreadable: Set<String>, at place: JobFilePlace) {
        var variables: [String: String] = [:]
        for name in pools.keys.sorted() {
            let path = "resources.\(name)"
            if name.isEmpty {
                report.add(.top, "resources", "a pool name is empty; name it, e.g. \"gpu\"", at: place)
            } else if let bad = name.unicodeScalars.first(where: { !($0.isASCIILetterOrDigit || $0 == "_" || $0 == "-") }) {
                report.add(.top, path, "the pool name holds \(Self.describe(bad)); use letters, digits, '_' and '-' (it becomes part of a variable name)", at: place)
            } else {
                let variable = JobFile.resourceVariable(forPool: name)
                if let other = variables[variable] {
                    report.add(.top, path, "pools '\(other)' and '\(name)' would both be given to tasks as \(variable); rename one", at: place)
                } else {
                    variables[variable] = name
                }
            }
            if unreadable.contains(name) { continue }
            switch pools[name]! {
            case let .slots(ids):
                if ids.isEmpty {
                    report.add(.top, path, "the pool has no slots; list at least one id, e.g. [\"0\", \"1\"]", at: place)
                }
                var seen: [String: Int] = [:]
                for (k, id) in ids.enumerated() {
                    if id.isEmpty {
                        report.add(.top, "\(path)[\(k)]", "a slot id is empty", at: place)
                    } else if id.contains(",") {
                        report.add(.top, "\(path)[\(k)]", "\(JobFileText.quote(id)) holds a comma; ids are handed to tasks joined by commas (CUDA_VISIBLE_DEVICES=0,1), so list each one separately: [\"0\", \"1\"]", at: place)
                    } else if let bad = id.unicodeScalars.first(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
                        report.add(.top, "\(path)[\(k)]", "\(JobFileText.quote(id)) holds \(Self.describe(bad)); a slot id cannot", at: place)
                    }
                    if let first = seen[id] {
                        report.add(.top, "\(path)[\(k)]", "slot \(JobFileText.quote(id)) is listed twice (also at \(path)[\(first)]); each slot id must be unique", at: place)
                    } else {
                        seen[id] = k
                    }
                }
            case let .count(total):
                if total < 1 {
                    report.add(.top, path, "\(total) is less than 1; a counted pool holds at least 1", at: place)
                }
                if name == "gpu" {
                    report.add(.top, path, "pool 'gpu' must list its device ids, e.g. [\"0\", \"1\", \"2\", \"3\"], not count them: Overtime sets each task's CUDA_VISIBLE_DEVICES from the ids it is given", at: place)
                }
            }
        }
    }

    /// Checks one task's (or the defaults') requests against the pools.
    private mutating func checkRequests(_ requests: [String: Int], pools: [String: ResourcePool], lenient: Set<String>,
                                        scope: JobFileScope, at place: JobFilePlace) {
        for pool in requests.keys.sorted() {
            let amount = requests[pool]!
            let path = "resources.\(pool)"
            if amount < 1 {
                report.add(scope, path, "asks for \(amount); a request is at least 1 (to use none of the pool, leave it out)", at: place)
            }
            if lenient.contains(pool) { continue }
            guard let available = pools[pool] else {
                if pools.isEmpty {
                    report.add(scope, path, "there is no pool named '\(pool)': the job file declares none; declare it in the top-level 'resources', e.g. \"resources\": {\"\(pool)\": [\"0\", \"1\"]} for slots or {\"\(pool)\": 8} for a count", at: place)
                } else {
                    report.add(scope, path, "there is no pool named '\(pool)'\(JobFileText.suggestion(for: pool, among: Array(pools.keys)))"
                        + " (pools: \(pools.keys.sorted().joined(separator: ", ")))", at: place)
                }
                continue
            }
            switch available {
            case let .slots(ids) where amount > ids.count:
                let shown = ids.count <= 8 ? " (\(ids.joined(separator: ", ")))" : ""
                report.add(scope, path, "asks for \(amount) slots but pool '\(pool)' has only \(ids.count)\(shown), so the task could never start; ask for at most \(ids.count)", at: place)
            case let .count(total) where amount > total:
                report.add(scope, path, "asks for \(amount) but pool '\(pool)' holds \(total) in all, so the task could never start; ask for at most \(total)", at: place)
            default:
                break
            }
        }
    }

    // MARK: Names and dependencies

    /// Checks the name of task `i` and notes where it first appears.
    private mutating func noteName(_ name: String, at i: Int, place: JobFilePlace) {
        let scope = JobFileScope.task(i, named: name)
        if let problem = Self.nameProblem(name) {
            report.add(scope, "name", problem, at: place)
        }
        if name.isEmpty { return }
        if let first = nameIndex[name] {
            report.add(scope, "name", "'\(name)' is already the name of task #\(first + 1); task names must be unique", at: place)
        } else {
            nameIndex[name] = i
        }
    }

    /// What is wrong with a task name, if anything.
    static func nameProblem(_ name: String) -> String? {
        if name.isEmpty {
            return "is empty; expected a name such as \"train\""
        }
        if name.unicodeScalars.contains("{") {
            return "\(JobFileText.quote(name)) is not a template: one name stands for a whole sweep (in 'after' and 'ctl'), and each element is named by its values, as train[lr=0.01,seed=1]; put the placeholders in 'command', 'env' or 'cwd'"
        }
        if let bad = name.unicodeScalars.first(where: { !($0.isASCIILetterOrDigit || $0 == "-" || $0 == "_" || $0 == ".") }) {
            return "\(JobFileText.quote(name)) holds \(describe(bad)); a name is made of letters, digits, '-', '_' and '.' (it names the task's log file)"
        }
        // Every character is ASCII by now: its first byte is its first character, and its
        // UTF-8 count its length, found without walking grapheme clusters.
        if let first = name.utf8.first, first == UInt8(ascii: "-") || first == UInt8(ascii: ".") {
            return "\(JobFileText.quote(name)) starts with '\(name.first!)'; start it with a letter, a digit or '_' (it names the task's log file and is typed in commands)"
        }
        if name.utf8.count > maximumNameLength {
            return "is \(name.utf8.count) characters long; the longest name is \(maximumNameLength) (it names the task's log file)"
        }
        return nil
    }

    private mutating func checkDependencies(of task: JobTask, scope: JobFileScope, among tasks: [JobTask], at place: JobFilePlace) {
        let index = nameIndex
        // Where each name was listed: made only for a task of several dependencies (a chain
        // of a million tasks has one each).
        var seen: [String: Int] = [:]
        let several = task.after.count > 1
        for (k, dependency) in task.after.enumerated() {
            let path = "after[\(k)]"
            let target = dependency.task
            if target.isEmpty {
                report.add(scope, path, "the task name is empty; expected the name of a task to wait for", at: place)
                continue
            }
            if let first = seen[target] {
                report.add(scope, path, "'\(target)' is listed twice (also at after[\(first)]); list each task once, with the condition you mean", at: place)
                continue
            }
            if several { seen[target] = k }
            if target == task.name {
                report.add(scope, path, "'\(target)' cannot wait for itself; remove it from 'after'", at: place)
            } else if let j = index[target] {
                if dependency.sameIndex, let problem = Self.sameIndexProblem(task, on: tasks[j]) {
                    report.add(scope, path + ".same-index", problem, at: place)
                }
            } else if target.contains("[") {
                report.add(scope, path, "'\(target)' names one element; wait for the whole sweep by its name, or for the element with the same index with \"same-index\": true", at: place)
            } else {
                report.add(scope, path, "there is no task named '\(target)'\(suggestion(for: target))", at: place)
            }
        }
    }

    /// Why element i of `task` cannot wait for element i of `other`, if it cannot.
    static func sameIndexProblem(_ task: JobTask, on other: JobTask) -> String? {
        guard let sweep = task.sweep else {
            return "joins the elements of two sweeps or arrays, and this task is neither; drop it to wait for the whole of '\(other.name)'"
        }
        guard let otherSweep = other.sweep else {
            return "'\(other.name)' is neither a sweep nor an array, so it has no elements to join; drop same-index to wait for it"
        }
        for position in 0..<sweep.count {
            let index = sweep.index(at: position)
            if otherSweep.position(ofIndex: index) == nil {
                return "'\(other.name)' has no element of index \(index) (it has \(otherSweep.count) element\(otherSweep.count == 1 ? "" : "s")), so \(sweep.name(at: position, of: task.name)) would wait for nothing; give both the same indices"
            }
        }
        return nil
    }

    /// A program as the tasks that share one copy of their settings (`JobTask`) run it: its
    /// lookup reads the filesystem, and a million tasks run a handful of programs.
    private struct LookedUpCommand: Hashable {
        var program: String
        var settings: ObjectIdentifier
    }

    /// What each command's lookup found (nil: nothing wrong).
    private var lookedUp: [LookedUpCommand: String?] = [:]

    /// How many task names the suggestions for unknown names may look through in all:
    /// each unknown name is compared with every task name, so a file of a million tasks
    /// that all name a missing one would take hours. Past it, an unknown name gets no "did
    /// you mean"; a file of 1,000 tasks gets a suggestion for each of 1,000 unknown names.
    var suggestionBudget = 1_000_000

    private var namesLookedThrough = 0
    /// The task names sorted, and in file order, for suggestions; made when first needed.
    private var sortedNames: [String]?
    private var namesInFileOrder: [String]?

    /// Whether one more suggestion fits in the budget (and counts it).
    private mutating func maySuggest() -> Bool {
        guard namesLookedThrough + nameIndex.count <= suggestionBudget else { return false }
        namesLookedThrough += nameIndex.count
        return true
    }

    /// "; did you mean 'x'?" for an unknown name in `after`, while the budget lasts.
    private mutating func suggestion(for name: String) -> String {
        guard maySuggest() else { return "" }
        if sortedNames == nil { sortedNames = nameIndex.keys.sorted() }
        return JobFileText.suggestion(for: name, among: sortedNames!)
    }

    /// " (did you mean 'x'?)" for an unknown name in `command-made-by`, while the budget
    /// lasts.
    private mutating func aside(for name: String) -> String {
        guard maySuggest() else { return "" }
        if namesInFileOrder == nil { namesInFileOrder = nameIndex.sorted { $0.value < $1.value }.map(\.key) }
        return JobFileText.aside(for: name, among: namesInFileOrder!)
    }

    /// Each command must be found now, not hours in when its task is reached; a task whose
    /// command an earlier task makes names that task (`command-made-by`) instead.
    private mutating func checkCommand(of task: JobTask, scope: JobFileScope,
                                       lookUp: ((_ program: String, _ task: JobTask) -> String?)?, at place: JobFilePlace) {
        if let maker = task.commandMadeBy {
            if maker == task.name {
                report.add(scope, "command-made-by", "names the task itself; name the earlier task that makes the command", at: place)
            } else if nameIndex[maker] == nil {
                report.add(scope, "command-made-by", "there is no task named \(JobFileText.quote(maker))\(aside(for: maker))", at: place)
            }
            return
        }
        // A program named by a placeholder is only known element by element.
        guard let lookUp, let program = task.command.first, task.sweep == nil || Sweep.placeholders(in: program).isEmpty else { return }
        let key = LookedUpCommand(program: program, settings: ObjectIdentifier(task.shared))
        let problem: String?
        if let known = lookedUp[key] {
            problem = known
        } else {
            problem = lookUp(program, task)
            lookedUp[key] = problem
        }
        if let problem {
            report.add(scope, "command", problem, at: place)
        }
    }

    /// Finds the dependency cycles (tasks that wait for each other, so none can start) and
    /// names each one: every task caught in one is on at least one named cycle.
    mutating func checkCycles(_ tasks: [JobTask]) {
        let index = nameIndex
        // A task listed twice is one edge twice, which neither search minds.
        let edges: [[Int]] = tasks.indices.map { i in
            tasks[i].after.compactMap { dependency in
                guard let j = index[dependency.task], j != i else { return nil }
                return j
            }
        }
        for component in Self.cyclicComponents(edges) {
            let members = Set(component)
            var covered = Set<Int>()
            for start in component.sorted() where !covered.contains(start) {
                guard let cycle = Self.shortestCycle(through: start, edges: edges, within: members) else { continue }
                covered.formUnion(cycle)
                let names = (cycle + [start]).map { tasks[$0].name }.joined(separator: " → ")
                report.add(.task(start, named: tasks[start].name), "after",
                           "dependency cycle \(names) (each waits for the next), so none of them can ever start; remove one of these dependencies",
                           cycle: true)
            }
        }
    }

    /// The strongly connected components of more than one task (those that hold a cycle),
    /// by Tarjan's algorithm, without recursion (a chain of thousands of tasks must not
    /// exhaust a thread's stack). A task on its own is passed over without an allocation:
    /// a million tasks are mostly that.
    static func cyclicComponents(_ edges: [[Int]]) -> [[Int]] {
        let n = edges.count
        var order = [Int](repeating: -1, count: n)
        var low = [Int](repeating: 0, count: n)
        var onStack = [Bool](repeating: false, count: n)
        var stack: [Int] = []
        var components: [[Int]] = []
        var counter = 0
        var work: [(node: Int, next: Int)] = []
        for root in 0..<n where order[root] < 0 && !edges[root].isEmpty {
            work.append((root, 0))
            order[root] = counter
            low[root] = counter
            counter += 1
            stack.append(root)
            onStack[root] = true
            while let (node, next) = work.last {
                if next < edges[node].count {
                    work[work.count - 1].next += 1
                    let child = edges[node][next]
                    if order[child] < 0 {
                        order[child] = counter
                        low[child] = counter
                        counter += 1
                        stack.append(child)
                        onStack[child] = true
                        work.append((child, 0))
                    } else if onStack[child] {
                        low[node] = min(low[node], order[child])
                    }
                    continue
                }
                work.removeLast()
                if let parent = work.last?.node {
                    low[parent] = min(low[parent], low[node])
                }
                guard low[node] == order[node] else { continue }
                if stack.last == node {
                    stack.removeLast()
                    onStack[node] = false
                    continue
                }
                var component: [Int] = []
                while let top = stack.popLast() {
                    onStack[top] = false
                    component.append(top)
                    if top == node { break }
                }
                components.append(component)
            }
        }
        return components
    }

    /// The shortest path from `start` back to itself inside `members`, as the tasks on it
    /// (starting with `start`).
    static func shortestCycle(through start: Int, edges: [[Int]], within members: Set<Int>) -> [Int]? {
        var previous: [Int: Int] = [:]
        var queue = [start]
        var head = 0
        while head < queue.count {
            let node = queue[head]
            head += 1
            for next in edges[node] where members.contains(next) {
                if next == start {
                    // Walked back from the end, then turned round: a cycle may hold a
                    // million tasks.
                    var path = [node]
                    while let p = previous[path[path.count - 1]] { path.append(p) }
                    return path.reversed()
                }
                if previous[next] == nil, next != start {
                    previous[next] = node
                    queue.append(next)
                }
            }
        }
        return nil
    }

    /// "a space", "'/'", "U+0000".
    static func describe(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case " ": return "a space"
        case "\t": return "a tab"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F:
            return "a control character (U+\(String(scalar.value, radix: 16, uppercase: true)))"
        default: return "'\(scalar)'"
        }
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetterOrDigit: Bool {
        ("a"..."z").contains(self) || ("A"..."Z").contains(self) || ("0"..."9").contains(self)
    }
}
