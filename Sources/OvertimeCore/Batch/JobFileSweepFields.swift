import OvertimeProtocol

/// The readers of a task's `matrix`, `array` and `max-running`, and the checks of its
/// placeholders (`{lr}`, `{index}`), which need the whole task read.
extension JobFileDecoder {
    /// What a task wrote to make it a sweep, as read.
    struct SweepFields {
        var matrix: MatrixElements?
        var array: ArrayIndices?
        /// An array's `%N`.
        var arrayCap: Int?
        var maxRunning: Int?
        /// Whether `matrix` or `array` was given (read or not): the task is a sweep.
        var given = false
        /// Duration fields written with placeholders, by key.
        var durationTemplates: [String: String] = [:]
    }

    static let sweepFields: Set = ["matrix", "array", "max-running"]
    static let stragglerFields = ["below", "action", "warm-up"]
    static let stragglerSynonyms: [String: String] = [
        "threshold": "below", "ratio": "below", "fraction": "below", "factor": "below",
        "then": "action", "do": "action", "on": "action", "warmup": "warm-up", "grace": "warm-up", "after": "warm-up",
    ]

    /// `{"below": 0.5, "action": "warn", "warm-up": "60s"}`: when a task of a sweep, an
    /// array or a peer group is a straggler, and what is done with it.
    func stragglers(_ field: JobFileField, in fields: JobFileFields) -> StragglerPolicy? {
        let example = "{\"below\": 0.5, \"action\": \"warn\", \"warm-up\": \"60s\"}"
        guard let given = fields.object(field, expected: "an object such as \(example)") else { return nil }
        var policy = StragglerPolicy()
        var parts = JobFileParts()
        let actions = StragglerPolicy.Action.allCases.map { "'\($0.rawValue)'" }
        for item in given {
            switch item.key {
            case "below":
                guard case let .number(n) = item.value else {
                    given.problem(item, "expected a share of the peers' median rate between 0 and 1, e.g. 0.5, got \(JobFileText.show(item.value))")
                    parts.fail()
                    continue
                }
                if n > 0, n < 1 {
                    policy.below = n
                } else {
                    given.problem(item, "\(JobFileText.number(n)) is not between 0 and 1 (both left out); expected a share of the peers' median rate, e.g. 0.5")
                    parts.fail()
                }
            case "action":
                guard let word = parts.read(given.string(item, expected: "\(JobFileText.list(actions))")) else { continue }
                if let action = StragglerPolicy.Action(rawValue: word.lowercased()) {
                    policy.action = action
                } else {
                    let meant = Spelling.closest(to: word, among: StragglerPolicy.Action.allCases.map(\.rawValue))
                    given.problem(item, "\(JobFileText.quote(word)) is not an action\(meant.map { " (did you mean '\($0)'?)" } ?? ""); expected \(JobFileText.list(actions))")
                    parts.fail()
                }
            case "warm-up":
                if let d = parts.read(given.duration(item, allowNone: false, positive: false)?.duration) { policy.warmUp = d }
            default:
                given.unknown(item, .init(isNot: "is not a field of 'stragglers'", fields: Self.stragglerFields, synonyms: Self.stragglerSynonyms))
                parts.fail()
            }
        }
        return parts.allRead ? policy : nil
    }

    /// `"train-gpus"`: the group a task is compared with for stragglers.
    func peerGroup(_ field: JobFileField, in fields: JobFileFields) -> String? {
        guard let name = fields.string(field, expected: "the name of the group of tasks it runs alongside, e.g. \"shards\"") else { return nil }
        if name.isEmpty {
            fields.problem(field, "is empty; name the group, e.g. \"shards\"")
            return nil
        }
        return name
    }

    /// `{"lr": [0.01, 0.001], "seed": [1, 2], "include": [...], "exclude": [...]}`.
    func matrix(_ field: JobFileField, in fields: JobFileFields) -> MatrixElements? {
        let example = "an object of keys and their values, e.g. {\"lr\": [\"1e-3\", \"3e-4\"], \"seed\": [1, 2]}"
        guard let given = fields.object(field, expected: example) else { return nil }
        var lists: [(key: String, values: [String])] = []
        var include: [[(key: String, value: String)]] = []
        var exclude: [[(key: String, value: String)]] = []
        var allRead = true
        for item in given {
            switch item.key {
            case "include", "exclude":
                guard let entries = given.array(item, expected: "a list of objects of keys and values, e.g. [{\"lr\": \"1e-2\", \"seed\": 1}]") else {
                    allRead = false
                    continue
                }
                var read: [[(key: String, value: String)]] = []
                for entry in entries {
                    guard let pairs = given.object(entry, expected: "an object of keys and values, e.g. {\"lr\": \"1e-2\", \"seed\": 1}") else {
                        allRead = false
                        continue
                    }
                    var combination: [(key: String, value: String)] = []
                    for pair in pairs {
                        if let problem = Self.matrixKeyProblem(pair.key) {
                            pairs.problem(pair, problem)
                            allRead = false
                        } else if let text = matrixValue(pair, in: pairs) {
                            combination.append((pair.key, text))
                        } else {
                            allRead = false
                        }
                    }
                    if combination.isEmpty, allRead { given.problem(entry, "is empty; name at least one key") }
                    read.append(combination)
                }
                if item.key == "include" { include = read } else { exclude = read }
            default:
                if let problem = Self.matrixKeyProblem(item.key) {
                    given.problem(item, problem)
                    allRead = false
                    continue
                }
                guard let values = given.array(item, expected: "a list of values, e.g. [1, 2, 3]") else {
                    allRead = false
                    continue
                }
                if values.isEmpty {
                    given.problem(item, "is empty; list at least one value (or leave the key out)")
                    allRead = false
                }
                var texts: [String] = []
                for value in values {
                    guard let text = matrixValue(value, in: given) else { continue }
                    if texts.contains(text) {
                        given.problem(value, "\(JobFileText.quote(text)) is listed twice; each value makes its own elements")
                    }
                    texts.append(text)
                }
                if texts.count != values.count { allRead = false }
                lists.append((item.key, texts))
            }
        }
        guard allRead else { return nil }
        if lists.isEmpty, include.isEmpty {
            fields.problem(field, "has no keys; expected \(example)")
            return nil
        }
        for (which, entries) in [("exclude", exclude), ("include", include)] {
            for (k, entry) in entries.enumerated() {
                for pair in entry where which == "exclude" && !lists.contains(where: { $0.key == pair.key }) {
                    fields.problem(at: "\(field.path).exclude[\(k)].\(pair.key)", "is not a key of the matrix\(JobFileText.aside(for: pair.key, among: lists.map(\.key))); exclude names the matrix's own keys")
                    return nil
                }
            }
        }
        guard let matrix = MatrixElements.combine(lists, include: include, exclude: exclude) else {
            fields.problem(field, "makes more than \(JobElements.grouped(MatrixElements.maximumCount)) elements; for more, use an 'array' and compute the values from {index}")
            return nil
        }
        if matrix.count == 0 {
            fields.problem(field, "makes no elements: 'exclude' takes away every combination")
            return nil
        }
        return matrix
    }

    /// A matrix value: a string, a number (as JSON writes it) or a boolean, as text.
    private func matrixValue(_ field: JobFileField, in fields: JobFileFields) -> String? {
        switch field.value {
        case let .string(text): return text
        case let .number(n): return JobFileText.number(n)
        case let .bool(b): return b ? "true" : "false"
        default:
            fields.problem(field, "expected a string, a number or true/false, got \(JobFileText.show(field.value))")
            return nil
        }
    }

    static func matrixKeyProblem(_ key: String) -> String? {
        if key == "index" { return "'index' is the element's index ({index}); name the key otherwise" }
        if key.isEmpty || !key.unicodeScalars.allSatisfy(MatrixElements.isKeyCharacter) {
            return "is not a key a placeholder can name; a key is letters, digits, '_' and '-', e.g. \"lr\""
        }
        return nil
    }

    /// `"0-999%50"` (Slurm's syntax) or a list of indices.
    func array(_ field: JobFileField, in fields: JobFileFields) -> (indices: ArrayIndices, cap: Int?)? {
        switch field.value {
        case let .string(text):
            do {
                let (indices, cap) = try ArrayIndices.parse(text)
                if indices.repeatsAnIndex {
                    fields.problem(field, "\(JobFileText.quote(text)) lists an index twice; each index is one element")
                    return nil
                }
                return (indices, cap)
            } catch {
                fields.problem(field, error.message)
                return nil
            }
        case .number:
            guard let n = fields.wholeNumber(field, "a range such as \"0-999\"") else { return nil }
            fields.problem(field, "\(n) is one index; for \(n) elements write \"0-\(n - 1)\", or [\(n)] for the one index \(n)")
            return nil
        case .array:
            let items = fields.items(field) ?? []
            if items.isEmpty {
                fields.problem(field, "is empty; list at least one index")
                return nil
            }
            var indices = ArrayIndices()
            var allRead = true
            for item in items {
                guard case let .number(n) = item.value, n >= 0, n == n.rounded(), n < 1e15 else {
                    fields.problem(item, "expected an index (a whole number from 0), got \(JobFileText.show(item.value))")
                    allRead = false
                    continue
                }
                indices.append(start: Int(n), step: 1, count: 1)
            }
            guard allRead else { return nil }
            if indices.repeatsAnIndex {
                fields.problem(field, "lists an index twice; each index is one element")
                return nil
            }
            return (indices, nil)
        default:
            fields.problem(field, "expected indices such as \"0-999\", \"0-999%50\" or [1, 5, 7], got \(JobFileText.show(field.value))")
            return nil
        }
    }

    /// The sweep the task's fields make, checking what needs them all: one of `matrix` and
    /// `array`, a cap given once, placeholders that name keys, budget fields that read for
    /// every element, and a plain `name`.
    func sweep(_ given: SweepFields, command: [String]?, settings: TaskSettingValues, name: String,
               in fields: JobFileFields) -> Sweep? {
        guard given.given else {
            if given.maxRunning != nil {
                fields.problem(at: "max-running", "caps the running elements of a 'matrix' or an 'array', and the task has neither")
            }
            for key in given.durationTemplates.keys.sorted() {
                fields.problem(at: key, "\(JobFileText.quote(given.durationTemplates[key]!)) holds a placeholder, but the task has no 'matrix' or 'array' to fill it")
            }
            return nil
        }
        if fields.contains("matrix"), fields.contains("array") {
            fields.problem(at: "array", "a task is a 'matrix' or an 'array', not both; for every index of every combination, add the index as a matrix key")
            return nil
        }
        if given.arrayCap != nil, given.maxRunning != nil {
            fields.problem(at: "max-running", "the array's '%\(given.arrayCap!)' caps it already; give the cap once")
        }
        let elements: Sweep.Elements
        if let matrix = given.matrix {
            elements = .matrix(matrix)
        } else if let array = given.array {
            elements = .array(array)
        } else {
            return nil  // not read; said so
        }
        let sweep = Sweep(elements: elements, maxRunning: given.maxRunning ?? given.arrayCap, durationTemplates: given.durationTemplates)
        // Every text a placeholder may be in, with where it was written.
        var texts: [(path: String, text: String)] = []
        for (k, argument) in (command ?? []).enumerated() { texts.append(("command[\(k)]", argument)) }
        for (variable, value) in (settings.env ?? [:]).sorted(by: { $0.key < $1.key }) { texts.append(("env.\(variable)", value)) }
        if let directory = settings.cwd { texts.append(("cwd", directory)) }
        for key in given.durationTemplates.keys.sorted() { texts.append((key, given.durationTemplates[key]!)) }
        let keys = sweep.keys
        var missing: Set<String> = []
        for (path, text) in texts {
            for word in Sweep.placeholders(in: text) where !keys.contains(word) {
                // A brace text that is no key is left as written (`${HOME}`); one a letter
                // or two from a key was meant to be it.
                if let meant = Spelling.closest(to: word, among: keys) {
                    fields.problem(at: path, "{\(word)} is not a key of the \(sweep.kind) (did you mean {\(meant)}?); the keys are \(JobFileText.list(keys.map { "{\($0)}" }, "and"))")
                }
            }
            missing.formUnion(Sweep.placeholders(in: text).filter { keys.contains($0) })
        }
        if case let .matrix(matrix) = elements {
            // A key that `include` added may be missing from some elements.
            for key in missing.sorted() where key != "index" {
                let k = matrix.keys.firstIndex(of: key)!
                if let position = (0..<matrix.count).first(where: { matrix.value(k, at: $0) == nil }) {
                    fields.problem(at: "matrix.include", "element \(sweep.name(at: position, of: name)) has no value for {\(key)}, which the task uses; give '\(key)' in every include entry that makes an element, or leave {\(key)} out")
                }
            }
        }
        // The budget fields are read for each element: a matrix's every one, an array's
        // first and last (only its digits change).
        if !given.durationTemplates.isEmpty {
            let positions: [Int] = switch elements {
            case .matrix: Array(0..<sweep.count)
            case .array: [0, sweep.count - 1]
            }
            for position in positions {
                if case let .failure(problem) = sweep.policy(over: BudgetPolicy.default, at: position) {
                    fields.problem(at: problem.key, "for element \(sweep.name(at: position, of: name)), \(JobFileText.quote(problem.text)): \(problem.message)")
                    break
                }
            }
        }
        return sweep
    }
}

extension JSONValue {
    /// A string that holds a placeholder (`"{budget}"`), as written.
    var placeholderText: String? {
        guard case let .string(text) = self, !Sweep.placeholders(in: text).isEmpty else { return nil }
        return text
    }
}

extension Sweep {
    /// "matrix" or "array", as a message names it.
    var kind: String {
        switch elements {
        case .matrix: "matrix"
        case .array: "array"
        }
    }
}
