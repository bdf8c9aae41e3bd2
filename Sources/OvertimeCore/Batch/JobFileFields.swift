import OvertimeProtocol

/// Where in its scope a problem sits: problems come out in the order the file lists what
/// they are about, whichever pass (reading or checking) found them.
///
/// `field` is the position of the scope's field (the top level's for `defaults`, whose
/// fields are read after the top level's and are told apart by `within`); a check that
/// needs the whole scope sits after its fields. Problems at the same place keep the order
/// they were found in.
struct JobFilePlace: Comparable {
    var field: Int
    var within = 0

    /// A job built in code has no file: its problems keep the checker's order.
    static let unplaced = JobFilePlace(field: 0)

    static func < (a: JobFilePlace, b: JobFilePlace) -> Bool {
        (a.field, a.within) < (b.field, b.within)
    }
}

/// The problems of one reading, shared by the readers of nested objects so that each
/// problem is recorded where it was found.
final class JobFileReport {
    var problems = JobFileProblems()
    /// The place of the scope field being read.
    var place = JobFilePlace.unplaced

    func add(_ scope: JobFileScope, _ path: String?, _ message: String) {
        problems.add(scope, path, message, at: place)
    }
}

/// One value of a job file and its path there ("budget", "retries.on[1]", "resources.gpu").
///
/// The key and path are spelt out only when asked for (mostly for a message): a file of a
/// million tasks has millions of fields, nearly all read without a word.
struct JobFileField {
    let value: JSONValue
    /// The member's name; for an array's item, the array's key.
    private let name: String
    /// The item's position, for an array's item.
    private let index: Int?
    /// The path of the object holding the member (or the array); nil at a scope's own level.
    private let parent: String?

    /// A member of the object at `parent`.
    init(key: String, value: JSONValue, parent: String?) {
        self.value = value
        name = key
        index = nil
        self.parent = parent
    }

    /// Item `index` of the array `array`.
    init(item index: Int, of array: JobFileField, value: JSONValue) {
        self.value = value
        name = array.key
        self.index = index
        parent = array.parent
    }

    /// "budget"; "command[0]" for an item.
    var key: String {
        index.map { "\(name)[\($0)]" } ?? name
    }

    /// "retries.on[1]".
    var path: String {
        let member = parent.map { "\($0).\(name)" } ?? name
        return index.map { "\(member)[\($0)]" } ?? member
    }
}

/// Whether every part of a value made of several (a retry policy, a dependency) could be
/// read: one that could not is dropped whole, its problems already reported.
struct JobFileParts {
    private(set) var allRead = true

    /// `value`, noting when it could not be read.
    mutating func read<T>(_ value: T?) -> T? {
        if value == nil { allRead = false }
        return value
    }

    mutating func fail() {
        allRead = false
    }
}

/// One JSON object of a job file, at a scope and a path: reads its fields by type, naming
/// the field's path in every problem, and reports fields that are unknown (with the one
/// that was meant, by synonym or spelling) or given twice. Problems go to the shared
/// report and reading goes on, so a file's problems are all named at once.
struct JobFileFields: Sequence {
    let members: [(key: String, value: JSONValue)]
    let scope: JobFileScope
    /// The object's own path ("retries", "after[0]"); nil for a scope's own fields.
    let path: String?
    let report: JobFileReport

    /// Wraps `members` and reports each field given more than once.
    init(_ members: [(key: String, value: JSONValue)], scope: JobFileScope, path: String? = nil, report: JobFileReport) {
        self.members = members
        self.scope = scope
        self.path = path
        self.report = report
        noteRepeatedFields()
    }

    func path(of key: String) -> String {
        path.map { "\($0).\(key)" } ?? key
    }

    func makeIterator() -> Iterator {
        Iterator(rest: members[...], path: path)
    }

    struct Iterator: IteratorProtocol {
        var rest: ArraySlice<(key: String, value: JSONValue)>
        let path: String?

        mutating func next() -> JobFileField? {
            guard let (key, value) = rest.popFirst() else { return nil }
            return JobFileField(key: key, value: value, parent: path)
        }
    }

    /// The last value given for `key` (the one a repeated field ends with).
    func last(_ key: String) -> JSONValue? {
        members.last { $0.key == key }?.value
    }

    func contains(_ key: String) -> Bool {
        members.contains { $0.key == key }
    }

    /// Each field may appear once; JSON readers disagree on which of two copies wins.
    private func noteRepeatedFields() {
        // An object of a few fields (a task, mostly) is looked over without a table.
        if members.count <= 8 {
            for (i, member) in members.enumerated() where members[..<i].count(where: { $0.key == member.key }) == 1 {
                report.add(scope, path(of: member.key), "is given more than once; keep one")
            }
            return
        }
        var counts: [String: Int] = [:]
        for member in members {
            counts[member.key, default: 0] += 1
            if counts[member.key] == 2 {
                report.add(scope, path(of: member.key), "is given more than once; keep one")
            }
        }
    }

    // MARK: Problems

    /// A problem with `field` (or with the object itself when nil).
    func problem(_ field: JobFileField?, _ message: String) {
        report.add(scope, field?.path ?? path, message)
    }

    func problem(at path: String, _ message: String) {
        report.add(scope, path, message)
    }

    /// How an unknown field is answered: what the object is, and how its fields are listed.
    struct Known {
        /// "is not a field of 'retries'".
        var isNot: String
        var fields: [String]
        var synonyms: [String: String] = [:]
        /// How the list is introduced: "its fields", "they are".
        var listed = "its fields"
        /// Whether the list is shown after a suggestion too (or only when there is none).
        var alwaysList = true
        /// The list as shown, when it is not `fields` in full.
        var shownList: String?
    }

    /// Reports `field` as unknown, with the field that was probably meant.
    func unknown(_ field: JobFileField, _ known: Known) {
        let list = " (\(known.listed): \(known.shownList ?? known.fields.joined(separator: ", ")))"
        if let meant = Spelling.closest(to: field.key, among: known.fields, synonyms: known.synonyms) {
            problem(field, "\(known.isNot); did you mean '\(meant)'?" + (known.alwaysList ? list : ""))
        } else {
            problem(field, known.isNot + list)
        }
    }

    // MARK: Typed reads

    /// The items of an array, each with its path ("command[0]").
    func items(_ field: JobFileField) -> [JobFileField]? {
        guard case let .array(values) = field.value else { return nil }
        return values.indices.map { k in JobFileField(item: k, of: field, value: values[k]) }
    }

    /// An array's items, or a problem ("expected …, got …") naming what was expected.
    func array(_ field: JobFileField, expected: String) -> [JobFileField]? {
        if let items = items(field) { return items }
        problem(field, "expected \(expected), got \(JobFileText.show(field.value))")
        return nil
    }

    /// A nested object, its fields' paths under this field's (nil when it is none).
    func nested(_ field: JobFileField) -> JobFileFields? {
        guard case let .object(members) = field.value else { return nil }
        return JobFileFields(members, scope: scope, path: field.path, report: report)
    }

    /// A nested object, or a problem naming what was expected.
    func object(_ field: JobFileField, expected: String) -> JobFileFields? {
        if let object = nested(field) { return object }
        problem(field, "expected \(expected), got \(JobFileText.show(field.value))")
        return nil
    }

    /// A string, or a problem naming what was expected.
    func string(_ field: JobFileField, expected: String) -> String? {
        if case let .string(text) = field.value { return text }
        problem(field, "expected \(expected), got \(JobFileText.show(field.value))")
        return nil
    }

    /// A string where a number or a bool is easily written by mistake (an argument, a
    /// variable's value): those are answered with the quoted form.
    func quotedString(_ field: JobFileField, ifNull: String? = nil) -> String? {
        switch field.value {
        case let .string(text):
            return text
        case .number, .bool:
            let shown = JobFileText.show(field.value)
            problem(field, "expected a string, got \(shown); quote it: \"\(shown)\"")
        case .null where ifNull != nil:
            problem(field, ifNull!)
        default:
            problem(field, "expected a string, got \(JobFileText.show(field.value))")
        }
        return nil
    }

    /// An integer written as a JSON number.
    func wholeNumber(_ field: JobFileField, _ expected: String) -> Int? {
        if case let .number(n) = field.value, n == n.rounded(), abs(n) <= 9_007_199_254_740_992 {
            return Int(n)
        }
        let unquoted: String? = if case let .string(text) = field.value, Int(text.trimmingSpaces) != nil { text.trimmingSpaces } else { nil }
        wrongValue(field, expected: "a whole number", unquoted: unquoted, example: expected)
        return nil
    }

    func bool(_ field: JobFileField) -> Bool? {
        if case let .bool(b) = field.value { return b }
        // YAML 1.1 read these as booleans, and many YAML files still use them.
        if case let .string(text) = field.value, let meant = Self.yamlOneOneBooleans[text.lowercased()] {
            problem(field, "expected true or false, got \(JobFileText.quote(text)): '\(text)' is a string in YAML 1.2; write \(meant)")
            return nil
        }
        let unquoted: String? = if case let .string(text) = field.value, text == "true" || text == "false" { text } else { nil }
        wrongValue(field, expected: "true or false", unquoted: unquoted)
        return nil
    }

    static let yamlOneOneBooleans = ["yes": true, "no": false, "on": true, "off": false, "y": true, "n": false]

    /// The problem with a value of the wrong type: one written in quotes that should not
    /// be (`unquoted`, as it should be written), null, or anything else.
    private func wrongValue(_ field: JobFileField, expected: String, unquoted: String?, example: String? = nil) {
        switch field.value {
        case let .string(text) where unquoted != nil:
            problem(field, "expected \(expected), got \(JobFileText.quote(text)); write \(unquoted!) without quotes")
        case .null:
            problem(field, Self.nullAdvice(allowNone: false))
        default:
            problem(field, "expected \(expected)\(example.map { " (\($0))" } ?? ""), got \(JobFileText.show(field.value))")
        }
    }

    /// A duration: a string as on the command line (`30s`, `1h30m`, `none` where allowed)
    /// or a number of seconds.
    func duration(_ field: JobFileField, allowNone: Bool, positive: Bool) -> DurationLimit? {
        let value = field.value
        let orNone = allowNone ? ", or \"none\" for no limit" : ""
        var result: Duration
        switch value {
        case let .string(text):
            do {
                guard let d = try DurationText.parse(text, allowNone: allowNone) else { return DurationLimit(duration: nil) }
                result = d
            } catch {
                if let meant = Self.durationMeant(by: text) {
                    problem(field, "\(JobFileText.quote(text)) is not a duration; write \"\(meant)\" (durations look like 30s, 1.5s, 250ms, 5m or 1h30m)")
                } else {
                    problem(field, error.message + orNone)
                }
                return nil
            }
        case let .number(seconds):
            if seconds < 0 {
                problem(field, "\(JobFileText.number(seconds)) is negative; expected a number of seconds, or \(DurationText.examples)\(orNone)")
                return nil
            }
            guard seconds * 1e9 <= Double(DurationText.maximum.nanoseconds) else {
                problem(field, "\(JobFileText.number(seconds)) seconds is too long; the longest duration is 100 years")
                return nil
            }
            // 0 is no limit, as with GNU `timeout 0` (and "0s" in the string form); a tiny
            // value that rounds to nothing is not 0, and is refused below as too short.
            if allowNone, seconds == 0 { return DurationLimit(duration: nil) }
            result = .nanoseconds(Int64((seconds * 1e9).rounded()))
        case .null:
            problem(field, Self.nullAdvice(allowNone: allowNone))
            return nil
        default:
            problem(field, "expected \(DurationText.examples) (as a string), or a number of seconds\(orNone), got \(JobFileText.show(value))")
            return nil
        }
        if positive, result <= .zero {
            problem(field, "\(JobFileText.show(value)) is too short: it must be longer than 0" + (allowNone ? "; for no limit write \"none\"" : ""))
            return nil
        }
        return DurationLimit(duration: result)
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

    static func nullAdvice(allowNone: Bool) -> String {
        "null is not a value here; leave the field out to get the default" + (allowNone ? ", or write \"none\" for no limit" : "")
    }
}
