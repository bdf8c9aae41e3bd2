import CYAML
import OvertimeProtocol

/// Why a YAML text was refused, and where.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong: libyaml's words for a syntax error, else which rule of a job file's
    /// YAML the text breaks.
    public var problem: String
    /// True when libyaml refused the text (it is not YAML at all); false when it is YAML
    /// that a job file may not be (a tag, a duplicate key, an alias bomb, …).
    public var isSyntax: Bool
    /// Where, both from 1; a column counts characters, not bytes.
    public var line: Int
    public var column: Int
    /// What libyaml was reading when it failed, and where that began: "while parsing a
    /// block mapping from line 2, column 5".
    public var context: String?
    /// What to do about it, said after the place.
    public var advice: String?

    public init(_ problem: String, isSyntax: Bool = false, line: Int, column: Int, context: String? = nil, advice: String? = nil) {
        self.problem = problem
        self.isSyntax = isSyntax
        self.line = line
        self.column = column
        self.context = context
        self.advice = advice
    }

    /// "the key 'name' is given a second time at line 4, column 5; it is first at line 2: keep one".
    public var description: String {
        "\(problem) at line \(line), column \(column)" + (context.map { ", " + $0 } ?? "") + (advice.map { "; " + $0 } ?? "")
    }
}

/// One YAML document read into the `JSONValue` tree the JSON reader gives, or written as
/// JSON text without ever being one tree: the items of one top-level sequence (a job
/// file's `tasks`) are written as they are read, one at a time. A file of a million tasks
/// then goes to the job file's JSON reader, which reads it a task at a time too, and is
/// never a million-task tree beside the model made of it.
///
/// What it refuses: anything libyaml does; tags other than the standard ones
/// (`!!python/object`, `!Ref`, `!!binary`); a key given twice in a mapping; a key that is a
/// sequence or a mapping; an alias to no anchor; aliases that expand past `aliasBudget`;
/// more than one document. Merge keys (`<<: *defaults`) are taken as PyYAML takes them.
/// Scalars are read by YAML 1.2's core schema (`YAMLScalars`).
public enum YAMLDocument {
    /// The document as one tree; nil when the text holds none (it is empty, or comments
    /// only).
    /// - Throws: `YAMLError` for the first thing wrong, with its line and column.
    public static func value(_ bytes: [UInt8]) throws(YAMLError) -> JSONValue? {
        try YAMLReader.read(bytes, streaming: nil).root
    }

    /// The document as compact JSON text; nil when the text holds none. When the top level
    /// is a mapping whose member `key` is written out as a sequence (not an alias), each
    /// item of it is written as soon as it is read and then let go, and that member is
    /// written first: the others' order is kept.
    ///
    /// Non-finite numbers (`.inf`, `.nan`) are written as `null`, as JSON has none.
    /// - Throws: `YAMLError` for the first thing wrong, with its line and column.
    public static func jsonText(_ bytes: [UInt8], streaming key: String) throws(YAMLError) -> [UInt8]? {
        let (root, member, streamed) = try YAMLReader.read(bytes, streaming: key)
        guard let root else { return nil }
        // `{"key":[…items…]` so far, when that member was streamed; else nothing.
        var json = streamed
        guard let member, case let .object(members) = root else {
            json.value(root)
            return json.bytes
        }
        for (k, field) in members.enumerated() where k != member {
            json.key(field.key)
            json.value(field.value)
        }
        json.endObject()
        return json.bytes
    }

    /// How many nodes the aliases of a text of `byteCount` bytes may stand for in all.
    ///
    /// An alias repeats a node without its text: ten lines of aliases to aliases (the
    /// "billion laughs") stand for a billion nodes, and whatever reads the tree pays for
    /// each. Written out, a node takes at least two bytes, so a file's own nodes are at most
    /// half its size, and the job file's size check judges memory by that size. Letting
    /// aliases add four nodes per byte keeps a file's work within a small factor of what its
    /// size says, while `<<: *defaults` in each of a million tasks stays far inside it
    /// (about twenty nodes per task of forty-odd bytes). Small files get a million nodes,
    /// a fraction of a second of work, whatever their size.
    public static func aliasBudget(byteCount: Int) -> Int {
        1_000_000 + 4 * byteCount
    }
}

/// libyaml's event parser over one text, building `JSONValue`s node by node. A struct
/// rather than a class: a class's stored properties are checked for exclusive access at
/// run time, on every event.
private struct YAMLReader: ~Copyable {
    /// Deeper than the JSON reader allows is not a job file; the bound keeps the recursion
    /// below off the end of the stack.
    static let maxDepth = 64

    private let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
    private var event = yaml_event_t()
    private let bytes: UnsafeBufferPointer<UInt8>
    /// Each anchor's node as built, with the nodes it stands for (its aliases' included).
    private var anchors: [String: Built] = [:]
    private var aliasNodes = 0
    private let aliasBudget: Int
    /// The streamed member, written as its items are read.
    private var json = JSONWriter(capacity: 0)

    /// A node as built: its value, how many nodes it stands for, and, for a scalar, its text
    /// (what it is as a key).
    private struct Built {
        var value: JSONValue
        var nodes: Int
        var text: String?
    }

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        aliasBudget = YAMLDocument.aliasBudget(byteCount: bytes.count)
        yaml_parser_initialize(parser)
        yaml_parser_set_input_string(parser, bytes.baseAddress, bytes.count)
    }

    deinit {
        var last = event  // the same strings: deleting the copy frees them
        yaml_event_delete(&last)
        yaml_parser_delete(parser)
        parser.deallocate()
    }

    /// Reads the one document of `bytes`. When `key` names a top-level member written as a
    /// sequence, that member is written as JSON as its items are read (`{"key":[…]`),
    /// stands in the tree as an empty array, and its position among the members is
    /// returned.
    static func read(_ bytes: [UInt8], streaming key: String?) throws(YAMLError) -> (root: JSONValue?, member: Int?, streamed: JSONWriter) {
        try bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(YAMLError) in
                var reader = YAMLReader(buffer)
                let (root, member) = try reader.document(streaming: key)
                return (root, member, reader.json)
            }
        }.get()
    }

    private mutating func document(streaming key: String?) throws(YAMLError) -> (root: JSONValue?, member: Int?) {
        try next()  // the stream's start
        try next()
        if event.type == YAML_STREAM_END_EVENT { return (nil, nil) }
        try next()
        var member: Int?
        let root: Built
        if let key, event.type == YAML_MAPPING_START_EVENT {
            root = try mapping(depth: 0, streaming: key, member: &member)
        } else {
            root = try node(depth: 0)
        }
        try next()  // the document's end
        try next()
        if event.type == YAML_DOCUMENT_START_EVENT {
            throw refusal("a second document starts", "a job file is one YAML document (remove this '---' and what follows, or split the file)")
        }
        return (root.value, member)
    }

    // MARK: Events

    /// Replaces the current event with the next one.
    private mutating func next() throws(YAMLError) {
        yaml_event_delete(&event)
        guard yaml_parser_parse(parser, &event) == 1 else { throw syntaxError() }
    }

    private func syntaxError() -> YAMLError {
        let p = parser.pointee
        let problem = p.problem.map { String(cString: $0) } ?? "unreadable YAML"
        if p.error == YAML_READER_ERROR {
            // The reader's marks are not kept: find the line and column of the byte.
            let byte = p.problem_value == -1 ? "" : " (byte 0x\(String(p.problem_value, radix: 16)))"
            let position = TextPosition(of: p.problem_offset, in: bytes)
            return YAMLError(problem + byte + "; a job file must be UTF-8 text", isSyntax: true, line: position.line, column: position.column)
        }
        let context = p.context.map { "\(String(cString: $0)) from line \(p.context_mark.line + 1), column \(p.context_mark.column + 1)" }
        return YAMLError(problem, isSyntax: true, line: p.problem_mark.line + 1, column: p.problem_mark.column + 1, context: context)
    }

    /// A rule of this reader broken at the current event's start.
    private func refusal(_ problem: String, _ advice: String? = nil) -> YAMLError {
        YAMLError(problem, line: event.start_mark.line + 1, column: event.start_mark.column + 1, advice: advice)
    }

    private static func text(_ pointer: UnsafeMutablePointer<yaml_char_t>?, _ length: Int) -> String {
        guard let pointer else { return "" }
        return String(decoding: UnsafeBufferPointer(start: pointer, count: length), as: UTF8.self)
    }

    private static func text(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    // MARK: Nodes

    /// The node whose first event is the current one; on return the current event is its last.
    private mutating func node(depth: Int) throws(YAMLError) -> Built {
        switch event.type {
        case YAML_SCALAR_EVENT:
            return try scalar()
        case YAML_ALIAS_EVENT:
            return try alias()
        case YAML_SEQUENCE_START_EVENT:
            return try sequence(depth: depth)
        case YAML_MAPPING_START_EVENT:
            var member: Int?
            return try mapping(depth: depth, streaming: nil, member: &member)
        default:
            throw refusal("unexpected YAML event")
        }
    }

    private mutating func scalar() throws(YAMLError) -> Built {
        let s = event.data.scalar
        let text = Self.text(s.value, s.length)
        let value: JSONValue
        switch Self.text(s.tag) {
        case nil:
            value = s.style == YAML_PLAIN_SCALAR_STYLE ? YAMLScalars.resolvePlain(text) : .string(text)
        case "!"?:
            value = .string(text)
        case let tag?:
            let name = try allowedTag(tag)
            guard let typed = YAMLScalars.resolve(text, tag: name) else {
                if name == "map" || name == "seq" {
                    throw refusal("the tag '!!\(name)' is on a scalar", "it belongs on a \(name == "map" ? "mapping" : "sequence")")
                }
                throw refusal("'\(text)' is not a value of its tag '!!\(name)'")
            }
            value = typed
        }
        return anchored(Built(value: value, nodes: 1, text: text), Self.text(s.anchor))
    }

    /// The name after `tag:yaml.org,2002:` of a tag a job file may carry.
    private func allowedTag(_ tag: String) throws(YAMLError) -> String {
        let name = tag.hasPrefix(YAMLScalars.standardPrefix) ? String(tag.dropFirst(YAMLScalars.standardPrefix.count)) : ""
        guard YAMLScalars.allowedTags.contains(name) else {
            throw refusal("the tag '\(YAMLScalars.shortTag(tag))' is not allowed", "a job file holds plain data: the tags it may use are !!str, !!int, !!float, !!bool, !!null, !!map and !!seq")
        }
        return name
    }

    private func collectionTag(_ tag: String?, expected: String) throws(YAMLError) {
        guard let tag, tag != "!" else { return }
        let name = try allowedTag(tag)
        if name != expected {
            throw refusal("the tag '!!\(name)' is on a \(expected == "map" ? "mapping" : "sequence")", "leave it out")
        }
    }

    private mutating func alias() throws(YAMLError) -> Built {
        let name = Self.text(event.data.alias.anchor) ?? ""
        guard let target = anchors[name] else {
            throw refusal("the alias '*\(name)' refers to no anchor", "an anchor '&\(name)' must come before it")
        }
        aliasNodes += target.nodes
        if aliasNodes > aliasBudget {
            throw refusal("the aliases up to here stand for more than \(aliasBudget) nodes", "more than a job file of this size may expand to (an alias bomb?): write the repeated parts out, or repeat less")
        }
        return target
    }

    /// Keeps `built` under `anchor`, for the aliases after it.
    private mutating func anchored(_ built: Built, _ anchor: String?) -> Built {
        if let anchor { anchors[anchor] = built }
        return built
    }

    private mutating func sequence(depth: Int) throws(YAMLError) -> Built {
        let start = event.data.sequence_start
        let anchor = Self.text(start.anchor)
        try collectionTag(Self.text(start.tag), expected: "seq")
        if depth >= Self.maxDepth { throw refusal("nested more than \(Self.maxDepth) deep") }
        var items: [JSONValue] = []
        var nodes = 1
        while true {
            try next()
            if event.type == YAML_SEQUENCE_END_EVENT { break }
            let built = try node(depth: depth + 1)
            nodes += built.nodes
            items.append(built.value)
        }
        return anchored(Built(value: .array(items), nodes: nodes), anchor)
    }

    /// A mapping. At the top (`streaming` given), the member named `streaming`, when it is
    /// written as a sequence with no anchor, is written to `json` instead of built, and
    /// `member` is set to its position.
    private mutating func mapping(depth: Int, streaming key: String?, member: inout Int?) throws(YAMLError) -> Built {
        let start = event.data.mapping_start
        let anchor = Self.text(start.anchor)
        try collectionTag(Self.text(start.tag), expected: "map")
        if depth >= Self.maxDepth { throw refusal("nested more than \(Self.maxDepth) deep") }
        // Written keys in order, and where each `<<` merged its mappings in.
        var members: [(key: String, value: JSONValue)] = []
        var merged: [(at: Int, mappings: [[(key: String, value: JSONValue)]])] = []
        var lines = KeyLines()
        var streamed: String?
        var nodes = 1
        while true {
            try next()
            if event.type == YAML_MAPPING_END_EVENT { break }
            let (name, isMerge) = try mappingKey(noting: &lines)
            nodes += 1
            try next()
            let value: Built
            if name == key, event.type == YAML_SEQUENCE_START_EVENT, event.data.sequence_start.anchor == nil {
                json = JSONWriter(capacity: bytes.count + bytes.count / 4)  // a file of tasks, with quotes added
                json.beginObject()
                json.key(name)
                try write(depth: depth + 1)
                value = Built(value: .array([]), nodes: 1)
                streamed = name
            } else {
                value = try node(depth: depth + 1)
            }
            nodes += value.nodes
            if isMerge {
                merged.append((members.count, try mergedMappings(value.value)))
            } else {
                members.append((name, value.value))
            }
        }
        if !merged.isEmpty { members = Self.merging(merged, into: members, written: lines) }
        if let streamed { member = members.firstIndex { $0.key == streamed } }
        return anchored(Built(value: .object(members), nodes: nodes), anchor)
    }

    /// The current event as a key, noted in `lines`: a scalar's text (an alias to a scalar
    /// too), and whether it is the merge key `<<` (plain and untagged, as PyYAML takes it).
    private mutating func mappingKey(noting lines: inout KeyLines) throws(YAMLError) -> (String, isMerge: Bool) {
        var text: String?
        var isMerge = false
        switch event.type {
        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            text = try scalar().text
            isMerge = text == "<<" && s.style == YAML_PLAIN_SCALAR_STYLE && s.tag == nil
        case YAML_ALIAS_EVENT:
            text = try alias().text
        default:
            break
        }
        guard let name = text else {
            throw refusal("a key that is a sequence or a mapping", "the keys of a job file are names")
        }
        if let first = lines.note(name, line: event.start_mark.line + 1) {
            if isMerge { throw refusal("a second merge key '<<'", "merge several mappings with one: <<: [*a, *b]") }
            throw refusal("the key '\(name)' is given a second time", "it is first at line \(first): keep one")
        }
        return (name, isMerge)
    }

    // MARK: Nodes written as read

    /// Writes the node whose first event is the current one to `json`, as `node` would read
    /// it, without building it: a million tasks cost no tree each. A collection with an
    /// anchor is built (its aliases need it), as are scalars and aliases.
    private mutating func write(depth: Int) throws(YAMLError) {
        switch event.type {
        case YAML_SEQUENCE_START_EVENT where event.data.sequence_start.anchor == nil:
            try collectionTag(Self.text(event.data.sequence_start.tag), expected: "seq")
            if depth >= Self.maxDepth { throw refusal("nested more than \(Self.maxDepth) deep") }
            json.beginArray()
            while true {
                try next()
                if event.type == YAML_SEQUENCE_END_EVENT { break }
                try write(depth: depth + 1)
            }
            json.endArray()
        case YAML_MAPPING_START_EVENT where event.data.mapping_start.anchor == nil:
            try collectionTag(Self.text(event.data.mapping_start.tag), expected: "map")
            if depth >= Self.maxDepth { throw refusal("nested more than \(Self.maxDepth) deep") }
            json.beginObject()
            var lines = KeyLines()
            var merged: [[(key: String, value: JSONValue)]] = []
            while true {
                try next()
                if event.type == YAML_MAPPING_END_EVENT { break }
                let (name, isMerge) = try mappingKey(noting: &lines)
                try next()
                if isMerge {
                    merged += try mergedMappings(node(depth: depth + 1).value)
                } else {
                    json.key(name)
                    try write(depth: depth + 1)
                }
            }
            // Merged keys last: only now is every written key known.
            for member in Self.merging([(0, merged)], into: [], written: lines) {
                json.key(member.key)
                json.value(member.value)
            }
            json.endObject()
        default:
            json.value(try node(depth: depth).value)
        }
    }

    /// What a `<<` merges: a mapping, or a sequence of mappings.
    private func mergedMappings(_ value: JSONValue) throws(YAMLError) -> [[(key: String, value: JSONValue)]] {
        switch value {
        case let .object(members):
            return [members]
        case let .array(items):
            var mappings: [[(key: String, value: JSONValue)]] = []
            for case let .object(members) in items { mappings.append(members) }
            if mappings.count == items.count { return mappings }
        default:
            break
        }
        throw refusal("a merge key '<<' given something else than mappings", "it takes a mapping or a sequence of mappings, e.g. <<: *defaults or <<: [*a, *b]")
    }

    /// A mapping's members with its merges in, as PyYAML does it: a written key wins over
    /// a merged one, and among merged mappings the one named first wins. Merged keys stand
    /// where their `<<` stood.
    private static func merging(_ merged: [(at: Int, mappings: [[(key: String, value: JSONValue)]])],
                                into written: [(key: String, value: JSONValue)],
                                written keys: KeyLines) -> [(key: String, value: JSONValue)] {
        var result: [(key: String, value: JSONValue)] = []
        var taken = Set<String>()
        var next = 0
        for (at, mappings) in merged {
            result += written[next..<at]
            next = at
            for mapping in mappings {
                for member in mapping where !keys.contains(member.key) && taken.insert(member.key).inserted {
                    result.append(member)
                }
            }
        }
        return result + written[next...]
    }
}

/// The line of each key of a mapping so far: a short list searched in order, since most
/// mappings have a few keys (a dictionary per task would cost a job file of a million
/// tasks a tenth of its reading), and a dictionary once the list grows long.
private struct KeyLines {
    private var list: [(key: String, line: Int)] = []
    private var table: [String: Int]?

    /// Notes `key` at `line`; returns the line it was at before, if it was.
    mutating func note(_ key: String, line: Int) -> Int? {
        if table == nil, list.count == 16 {
            table = Dictionary(list, uniquingKeysWith: { first, _ in first })
        }
        if table != nil { return table!.updateValue(line, forKey: key) }
        if let earlier = list.first(where: { $0.key == key }) { return earlier.line }
        list.append((key, line))
        return nil
    }

    func contains(_ key: String) -> Bool {
        if let table { return table[key] != nil }
        return list.contains { $0.key == key }
    }
}
