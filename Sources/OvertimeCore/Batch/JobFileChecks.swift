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

/// The problems found so far, kept in reading order: the file's own fields, then each task
/// in turn, then the dependency cycles (which belong to no single task).
struct JobFileProblems {
    private var top: [String] = []
    private var tasks: [Int: [String]] = [:]
    private var cycles: [String] = []

    /// Records "label field 'path': message" ("… field 'path' is …" when the message
    /// starts with "is ").
    mutating func add(_ scope: JobFileScope, _ field: String?, _ message: String, cycle: Bool = false) {
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
        switch scope {
        case .top, .defaults: top.append(text)
        case let .task(index, _): tasks[index, default: []].append(text)
        }
    }

    var isEmpty: Bool { top.isEmpty && tasks.isEmpty && cycles.isEmpty }

    var all: [String] {
        top + tasks.keys.sorted().flatMap { tasks[$0]! } + cycles
    }
}

/// The checks a scheduler relies on, run on the model: on a parsed file (after the
/// decoder's own checks of types and values) and on a job built in code.
struct JobFileChecker {
    /// What the decoder already checked (as it read each field, to report in file order).
    struct Skips {
        /// Names were checked as they were read (`noteName`).
        var namesNoted = false
        /// Requests and pools were checked as they were read.
        var resources = false
        var concurrency = false
        var emptyTasks = false
    }

    var report = JobFileProblems()
    var problems: [String] { report.all }

    /// The longest task name: it becomes part of a file name.
    static let maximumNameLength = 100

    /// Where each name first appears.
    private(set) var nameIndex: [String: Int] = [:]

    mutating func check(_ file: JobFile, skips: Skips) {
        if !skips.concurrency {
            checkConcurrency(file.concurrency)
        }
        if !skips.emptyTasks, file.tasks.isEmpty {
            report.add(.top, "tasks", "the list is empty; a job file needs at least one task")
        }
        if !skips.resources {
            checkPools(file.resources)
        }
        if !skips.namesNoted {
            for (i, task) in file.tasks.enumerated() {
                noteName(task.name, at: i)
            }
        }
        for (i, task) in file.tasks.enumerated() {
            let scope = JobFileScope.task(i, named: task.name)
            checkDependencies(of: task, scope: scope)
            if !skips.resources {
                checkRequests(task.resources, pools: file.resources, scope: scope)
            }
        }
        checkCycles(file.tasks)
    }

    mutating func checkConcurrency(_ concurrency: Int) {
        if concurrency < 1 {
            report.add(.top, "concurrency", "\(concurrency) is less than 1; expected how many tasks may run at once, e.g. 4")
        }
    }

    // MARK: Pools and requests

    /// Checks the pools; those in `unreadable` (reported already) only by name.
    mutating func checkPools(_ pools: [String: ResourcePool], unreadable: Set<String> = []) {
        var variables: [String: String] = [:]
        for name in pools.keys.sorted() {
            let path = "resources.\(name)"
            if name.isEmpty {
                report.add(.top, "resources", "a pool name is empty; name it, e.g. \"gpu\"")
            } else if let bad = name.unicodeScalars.first(where: { !($0.isASCIILetterOrDigit || $0 == "_" || $0 == "-") }) {
                report.add(.top, path, "the pool name holds \(Self.describe(bad)); use letters, digits, '_' and '-' (it becomes part of a variable name)")
            } else {
                let variable = JobFile.resourceVariable(forPool: name)
                if let other = variables[variable] {
                    report.add(.top, path, "pools '\(other)' and '\(name)' would both be given to tasks as \(variable); rename one")
                } else {
                    variables[variable] = name
                }
            }
            if unreadable.contains(name) { continue }
            switch pools[name]! {
            case let .slots(ids):
                if ids.isEmpty {
                    report.add(.top, path, "the pool has no slots; list at least one id, e.g. [\"0\", \"1\"]")
                }
                var seen: [String: Int] = [:]
                for (k, id) in ids.enumerated() {
                    if id.isEmpty {
                        report.add(.top, "\(path)[\(k)]", "a slot id is empty")
                    } else if id.contains(",") {
                        report.add(.top, "\(path)[\(k)]", "\(JobFileText.quote(id)) holds a comma; ids are handed to tasks joined by commas (CUDA_VISIBLE_DEVICES=0,1), so list each one separately: [\"0\", \"1\"]")
                    } else if let bad = id.unicodeScalars.first(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
                        report.add(.top, "\(path)[\(k)]", "\(JobFileText.quote(id)) holds \(Self.describe(bad)); a slot id cannot")
                    }
                    if let first = seen[id] {
                        report.add(.top, "\(path)[\(k)]", "slot \(JobFileText.quote(id)) is listed twice (also at \(path)[\(first)]); each slot id must be unique")
                    } else {
                        seen[id] = k
                    }
                }
            case let .count(total):
                if total < 1 {
                    report.add(.top, path, "\(total) is less than 1; a counted pool holds at least 1")
                }
                if name == "gpu" {
                    report.add(.top, path, "pool 'gpu' must list its device ids, e.g. [\"0\", \"1\", \"2\", \"3\"], not count them: Overtime sets each task's CUDA_VISIBLE_DEVICES from the ids it is given")
                }
            }
        }
    }

    /// Checks one task's (or the defaults') requests against the pools.
    mutating func checkRequests(_ requests: [String: Int], pools: [String: ResourcePool], lenient: Set<String> = [],
                                scope: JobFileScope) {
        for pool in requests.keys.sorted() {
            let amount = requests[pool]!
            let path = "resources.\(pool)"
            if amount < 1 {
                report.add(scope, path, "asks for \(amount); a request is at least 1 (to use none of the pool, leave it out)")
            }
            if lenient.contains(pool) { continue }
            guard let available = pools[pool] else {
                if pools.isEmpty {
                    report.add(scope, path, "there is no pool named '\(pool)': the job file declares none; declare it in the top-level 'resources', e.g. \"resources\": {\"\(pool)\": [\"0\", \"1\"]} for slots or {\"\(pool)\": 8} for a count")
                } else {
                    report.add(scope, path, "there is no pool named '\(pool)'\(JobFileText.suggestion(for: pool, among: Array(pools.keys)))"
                        + " (pools: \(pools.keys.sorted().joined(separator: ", ")))")
                }
                continue
            }
            switch available {
            case let .slots(ids) where amount > ids.count:
                let shown = ids.count <= 8 ? " (\(ids.joined(separator: ", ")))" : ""
                report.add(scope, path, "asks for \(amount) slots but pool '\(pool)' has only \(ids.count)\(shown), so the task could never start; ask for at most \(ids.count)")
            case let .count(total) where amount > total:
                report.add(scope, path, "asks for \(amount) but pool '\(pool)' holds \(total) in all, so the task could never start; ask for at most \(total)")
            default:
                break
            }
        }
    }

    // MARK: Names and dependencies

    /// Checks the name of task `i` and notes where it first appears.
    mutating func noteName(_ name: String, at i: Int) {
        let scope = JobFileScope.task(i, named: name)
        if let problem = Self.nameProblem(name) {
            report.add(scope, "name", problem)
        }
        if name.isEmpty { return }
        if let first = nameIndex[name] {
            report.add(scope, "name", "'\(name)' is already the name of task #\(first + 1); task names must be unique")
        } else {
            nameIndex[name] = i
        }
    }

    /// What is wrong with a task name, if anything.
    static func nameProblem(_ name: String) -> String? {
        if name.isEmpty {
            return "is empty; expected a name such as \"train\""
        }
        if let bad = name.unicodeScalars.first(where: { !($0.isASCIILetterOrDigit || $0 == "-" || $0 == "_" || $0 == ".") }) {
            return "\(JobFileText.quote(name)) holds \(describe(bad)); a name is made of letters, digits, '-', '_' and '.' (it names the task's log file)"
        }
        if name.hasPrefix("-") || name.hasPrefix(".") {
            return "\(JobFileText.quote(name)) starts with '\(name.first!)'; start it with a letter, a digit or '_' (it names the task's log file and is typed in commands)"
        }
        if name.count > maximumNameLength {
            return "is \(name.count) characters long; the longest name is \(maximumNameLength) (it names the task's log file)"
        }
        return nil
    }

    mutating func checkDependencies(of task: JobTask, scope: JobFileScope) {
        let index = nameIndex
        var seen: [String: Int] = [:]
        for (k, dependency) in task.after.enumerated() {
            let path = "after[\(k)]"
            let target = dependency.task
            if target.isEmpty {
                report.add(scope, path, "the task name is empty; expected the name of a task to wait for")
                continue
            }
            if let first = seen[target] {
                report.add(scope, path, "'\(target)' is listed twice (also at after[\(first)]); list each task once, with the condition you mean")
                continue
            }
            seen[target] = k
            if target == task.name {
                report.add(scope, path, "'\(target)' cannot wait for itself; remove it from 'after'")
            } else if index[target] == nil {
                report.add(scope, path, "there is no task named '\(target)'\(JobFileText.suggestion(for: target, among: Array(index.keys).sorted()))")
            }
        }
    }

    /// Finds the dependency cycles (tasks that wait for each other, so none can start) and
    /// names each one: every task caught in one is on at least one named cycle.
    mutating func checkCycles(_ tasks: [JobTask]) {
        let index = nameIndex
        let edges: [[Int]] = tasks.enumerated().map { i, task in
            var seen = Set<Int>()
            return task.after.compactMap { dependency in
                guard let j = index[dependency.task], j != i, seen.insert(j).inserted else { return nil }
                return j
            }
        }
        for component in Self.stronglyConnectedComponents(edges) where component.count > 1 {
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

    /// Tarjan's algorithm, without recursion (a chain of thousands of tasks must not
    /// exhaust a thread's stack).
    static func stronglyConnectedComponents(_ edges: [[Int]]) -> [[Int]] {
        let n = edges.count
        var order = [Int](repeating: -1, count: n)
        var low = [Int](repeating: 0, count: n)
        var onStack = [Bool](repeating: false, count: n)
        var stack: [Int] = []
        var components: [[Int]] = []
        var counter = 0
        for root in 0..<n where order[root] < 0 {
            var work: [(node: Int, next: Int)] = [(root, 0)]
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
                if low[node] == order[node] {
                    var component: [Int] = []
                    while let top = stack.popLast() {
                        onStack[top] = false
                        component.append(top)
                        if top == node { break }
                    }
                    components.append(component)
                }
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
                    var path = [node]
                    while let p = previous[path[0]] { path.insert(p, at: 0) }
                    return path
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
