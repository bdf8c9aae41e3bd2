// Protocol v1, both directions: one JSON object per line, UTF-8, at most 64 KiB a line.
// Unknown fields are ignored; `null` for an optional field means "not given".

public enum ProtocolLimits {
    /// The longest line either side accepts, not counting its newline.
    public static let maxLineLength = 64 * 1024
}

/// One line from a task: its message, and the name its sender gave itself, if the line
/// carried one (`reporter`, on any message; it sticks to the connection).
public struct ChildLine: Sendable, Equatable {
    public var message: ChildMessage
    public var reporter: String?

    public init(_ message: ChildMessage, reporter: String? = nil) {
        self.message = message
        self.reporter = reporter
    }

    /// The longest reporter name kept, in characters; a longer one is cut.
    public static let maxReporterLength = 64
}

extension ChildLine {
    /// Decodes one line (without its newline) sent by a task, with the name it gave its
    /// sender.
    public static func decode(_ line: UnsafeRawBufferPointer) throws(ProtocolError) -> ChildLine {
        var reporter: String?
        let message = try ChildMessage.decode(line, reporter: &reporter)
        return ChildLine(message, reporter: reporter)
    }
}

extension ChildMessage {
    /// Decodes one line (without its newline) sent by a task.
    public static func decode(_ line: UnsafeRawBufferPointer) throws(ProtocolError) -> ChildMessage {
        var reporter: String?
        return try decode(line, reporter: &reporter)
    }

    /// Decodes one line (without its newline) sent by a task; `reporter` is set to the name
    /// it gave its sender, if it gave one. Text fields come out clean of colour codes and
    /// control characters. (The message is returned as it is built, not wrapped with the
    /// name: each copy of a progress message on this path costs.)
    public static func decode(_ line: UnsafeRawBufferPointer, reporter: inout String?) throws(ProtocolError) -> ChildMessage {
        guard line.count <= ProtocolLimits.maxLineLength else {
            throw ProtocolError(.tooLong, "line longer than 64 KiB")
        }
        var r = JSONReader(line)
        var type: MessageType?
        var progress = Progress()
        var seconds: Double?
        var why: String?
        var value: JSONValue?
        var name: String?
        var window: Double?
        var first = true
        try r.beginObject()
        while let key = try r.nextKey(first: &first) {
            if r.token(key, equals: "type") {
                guard try r.peekKind() == .string else { throw ProtocolError(.wrongType, "`type` must be a string") }
                let name = try r.readStringToken()
                guard let t = MessageType(r, name) else {
                    throw ProtocolError(.unknownType, "unknown type \"\(r.string(name).prefix(32))\"")
                }
                type = t
            } else if r.token(key, equals: "completed") {
                progress.completed = try r.readCount("completed")
            } else if r.token(key, equals: "total") {
                progress.total = try r.readCount("total")
            } else if r.token(key, equals: "fraction") {
                if let f = try r.readOptionalNumber("fraction") {
                    guard f >= 0, f <= 1 else { throw ProtocolError(.outOfRange, "`fraction` must be within 0…1") }
                    progress.fraction = f
                }
            } else if r.token(key, equals: "title") {
                progress.title = try r.readOptionalString("title").map(TerminalText.stripped)
            } else if r.token(key, equals: "detail") {
                progress.detail = try r.readOptionalString("detail").map(TerminalText.stripped)
            } else if r.token(key, equals: "bar") {
                progress.bar = try r.readOptionalString("bar").map(TerminalText.stripped)
            } else if r.token(key, equals: "closed") {
                progress.closed = try r.readOptionalBool("closed") ?? false
            } else if r.token(key, equals: "reporter") {
                reporter = try r.readOptionalString("reporter").flatMap(ChildLine.reporterName)
            } else if r.token(key, equals: "seconds") {
                seconds = try r.readOptionalNumber("seconds")
            } else if r.token(key, equals: "why") {
                why = try r.readOptionalString("why")
            } else if r.token(key, equals: "value") {
                value = try r.readValue()
            } else if r.token(key, equals: "name") {
                name = try r.readOptionalString("name")
            } else if r.token(key, equals: "window") {
                window = try r.readOptionalNumber("window")
            } else {
                try r.skipValue()
            }
        }
        try r.finish()
        guard let type else { throw ProtocolError(.missingType, "no `type` field") }
        switch type {
        case .progress: return .progress(progress)
        case .heartbeat: return .heartbeat
        case .ready: return .ready
        case .extend:
            guard let seconds else { throw ProtocolError(.wrongType, "`extend` needs `seconds`") }
            guard seconds > 0 else { throw ProtocolError(.outOfRange, "`seconds` must be > 0") }
            return .extend(seconds: seconds, why: why)
        case .result:
            guard let value else { throw ProtocolError(.wrongType, "`result` needs `value`") }
            return .result(value)
        case .phase:
            guard let name = name.flatMap(ChildLine.phaseName) else {
                throw ProtocolError(.wrongType, "`phase` needs a `name`")
            }
            if let window, !(window >= 0 && window.isFinite) {
                throw ProtocolError(.outOfRange, "`window` must be ≥ 0 seconds (0: no limit in this phase)")
            }
            return .phase(name: name, window: window)
        }
    }
}

extension ChildLine {
    /// A reporter's name as kept: clean, trimmed, at most `maxReporterLength` characters;
    /// nil when nothing is left.
    static func reporterName(_ raw: String) -> String? {
        let clean = TerminalText.stripped(raw)
        let trimmed = clean.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed()
        guard !trimmed.isEmpty else { return nil }
        return String(trimmed.prefix(maxReporterLength))
    }

    /// A phase's name as kept: the same rules as a reporter's.
    public static func phaseName(_ raw: String) -> String? {
        reporterName(raw)
    }
}

extension ChildLine {
    /// Decodes one line given as bytes.
    public static func decode(_ line: [UInt8]) throws(ProtocolError) -> ChildLine {
        try line.withUnsafeBytes { buffer in
            Result { () throws(ProtocolError) in try decode(buffer) }
        }.get()
    }
}

extension ChildMessage {
    /// Decodes one line given as bytes.
    public static func decode(_ line: [UInt8]) throws(ProtocolError) -> ChildMessage {
        try line.withUnsafeBytes { buffer in
            Result { () throws(ProtocolError) in try decode(buffer) }
        }.get()
    }

    /// This message as one protocol line, newline included (what a worker library sends).
    /// - Parameter reporter: the name this connection goes by (docs/protocol.md), said once.
    public func encoded(reporter: String? = nil) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        switch self {
        case let .progress(p):
            w.key("type"); w.string("progress")
            if let c = p.completed { w.key("completed"); w.int(c) }
            if let t = p.total { w.key("total"); w.int(t) }
            if let f = p.fraction { w.key("fraction"); w.number(f) }
            if let s = p.title { w.key("title"); w.string(s) }
            if let s = p.detail { w.key("detail"); w.string(s) }
            if let s = p.bar { w.key("bar"); w.string(s) }
            if p.closed { w.key("closed"); w.bool(true) }
        case .heartbeat:
            w.key("type"); w.string("heartbeat")
        case let .extend(seconds, why):
            w.key("type"); w.string("extend")
            w.key("seconds"); w.number(seconds)
            if let why { w.key("why"); w.string(why) }
        case .ready:
            w.key("type"); w.string("ready")
        case let .result(value):
            w.key("type"); w.string("result")
            w.key("value"); w.value(value)
        case let .phase(name, window):
            w.key("type"); w.string("phase")
            w.key("name"); w.string(name)
            if let window { w.key("window"); w.number(window) }
        }
        if let reporter { w.key("reporter"); w.string(reporter) }
        w.endObject()
        w.raw("\n")
        return w.bytes
    }
}

extension SupervisorMessage {
    /// This message as one protocol line, newline included.
    public func encoded() -> [UInt8] {
        var w = JSONWriter(capacity: 64)
        w.beginObject()
        switch self {
        case let .budget(remaining, granted):
            w.key("type"); w.string("budget")
            w.key("remaining")
            if let remaining { w.seconds(remaining) } else { w.null() }
            if let granted { w.key("granted"); w.bool(granted) }
        case let .expiring(remaining):
            w.key("type"); w.string("expiring")
            w.key("remaining"); w.seconds(remaining)
        case let .cancel(reason, grace, why):
            w.key("type"); w.string("cancel")
            w.key("reason"); w.string(reason.rawValue)
            w.key("grace"); w.seconds(grace)
            if let why { w.key("why"); w.string(why) }
        case let .warning(resource, used, limit):
            w.key("type"); w.string("warning")
            w.key("resource"); w.string(resource)
            w.key("used"); w.int(Int(clamping: used))
            w.key("limit"); w.int(Int(clamping: limit))
        case let .advice(action, remaining, why):
            w.key("type"); w.string("advice")
            w.key("do"); w.string(action)
            w.key("remaining"); w.seconds(remaining)
            w.key("why"); w.string(why)
        }
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    /// Decodes one line sent by the supervisor (what a worker library reads).
    public static func decode(_ line: UnsafeRawBufferPointer) throws(ProtocolError) -> SupervisorMessage {
        guard line.count <= ProtocolLimits.maxLineLength else {
            throw ProtocolError(.tooLong, "line longer than 64 KiB")
        }
        var r = JSONReader(line)
        var type: String?
        var remaining: Double?
        var granted: Bool?
        var reason: String?
        var grace: Double?
        var resource: String?
        var used: Double?
        var limit: Double?
        var why: String?
        var action: String?
        var first = true
        try r.beginObject()
        while let key = try r.nextKey(first: &first) {
            if r.token(key, equals: "type") {
                type = try r.readOptionalString("type")
            } else if r.token(key, equals: "remaining") {
                remaining = try r.readOptionalNumber("remaining")
            } else if r.token(key, equals: "granted") {
                if try r.peekKind() == .null { try r.readNull() } else {
                    guard try r.peekKind() == .bool else { throw ProtocolError(.wrongType, "`granted` must be a boolean") }
                    granted = try r.readBool()
                }
            } else if r.token(key, equals: "reason") {
                reason = try r.readOptionalString("reason")
            } else if r.token(key, equals: "grace") {
                grace = try r.readOptionalNumber("grace")
            } else if r.token(key, equals: "resource") {
                resource = try r.readOptionalString("resource")
            } else if r.token(key, equals: "used") {
                used = try r.readOptionalNumber("used")
            } else if r.token(key, equals: "limit") {
                limit = try r.readOptionalNumber("limit")
            } else if r.token(key, equals: "why") {
                why = try r.readOptionalString("why")
            } else if r.token(key, equals: "do") {
                action = try r.readOptionalString("do")
            } else {
                try r.skipValue()
            }
        }
        try r.finish()
        switch type {
        case nil: throw ProtocolError(.missingType, "no `type` field")
        case "budget": return .budget(remaining: remaining, granted: granted)
        case "expiring":
            guard let remaining else { throw ProtocolError(.wrongType, "`expiring` needs `remaining`") }
            return .expiring(remaining: remaining)
        case "cancel":
            guard let reasonText = reason, let reason = CancelReason(rawValue: reasonText) else {
                throw ProtocolError(.wrongType, "`cancel` needs a known `reason`")
            }
            return .cancel(reason: reason, grace: grace ?? 0, why: why)
        case "warning":
            guard let resource, let used, let limit else {
                throw ProtocolError(.wrongType, "`warning` needs `resource`, `used` and `limit`")
            }
            // Sizes are counts of bytes, refused below zero as `completed` and `total` are.
            guard used >= 0, limit >= 0 else {
                throw ProtocolError(.outOfRange, "`used` and `limit` must be ≥ 0")
            }
            return .warning(resource: resource, used: UInt64(min(used, 1.8e19)), limit: UInt64(min(limit, 1.8e19)))
        case "advice":
            guard let action, let remaining else { throw ProtocolError(.wrongType, "`advice` needs `do` and `remaining`") }
            return .advice(action: action, remaining: remaining, why: why ?? "")
        case let other?:
            throw ProtocolError(.unknownType, "unknown type \"\(other.prefix(32))\"")
        }
    }
}

/// The child-to-supervisor types, recognised from the bytes of the `type` field.
enum MessageType {
    case progress, heartbeat, extend, ready, result, phase

    init?(_ r: borrowing JSONReader, _ token: JSONReader.StringToken) {
        if r.token(token, equals: "progress") { self = .progress }
        else if r.token(token, equals: "heartbeat") { self = .heartbeat }
        else if r.token(token, equals: "extend") { self = .extend }
        else if r.token(token, equals: "ready") { self = .ready }
        else if r.token(token, equals: "result") { self = .result }
        else if r.token(token, equals: "phase") { self = .phase }
        else { return nil }
    }
}

extension JSONReader {
    /// An optional string field: a string, or `null` for "not given".
    mutating func readOptionalString(_ field: StaticString) throws(ProtocolError) -> String? {
        switch try peekKind() {
        case .string: return try readString()
        case .null:
            try readNull()
            return nil
        default: throw ProtocolError(.wrongType, "`\(field)` must be a string")
        }
    }

    /// An optional boolean field: true, false, or `null` for "not given".
    mutating func readOptionalBool(_ field: StaticString) throws(ProtocolError) -> Bool? {
        switch try peekKind() {
        case .bool: return try readBool()
        case .null:
            try readNull()
            return nil
        default: throw ProtocolError(.wrongType, "`\(field)` must be true or false")
        }
    }

    /// An optional number field: a finite number, or `null` for "not given".
    mutating func readOptionalNumber(_ field: StaticString) throws(ProtocolError) -> Double? {
        switch try peekKind() {
        case .number: return try readNumber()
        case .null:
            try readNull()
            return nil
        default: throw ProtocolError(.wrongType, "`\(field)` must be a number")
        }
    }

    /// An optional count: an integer ≥ 0 (written as JSON integers or as 3.0).
    mutating func readCount(_ field: StaticString) throws(ProtocolError) -> Int? {
        guard let d = try readOptionalNumber(field) else { return nil }
        guard d >= 0, d == d.rounded(), d <= 9_007_199_254_740_992 else {
            throw ProtocolError(.outOfRange, "`\(field)` must be an integer ≥ 0")
        }
        return Int(d)
    }
}
