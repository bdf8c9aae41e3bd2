import OvertimeProtocol
import Testing

/// Strings that need escaping, or could trip an encoder, in titles, reasons and result values.
let trickyStrings: [String] = [
    "", "plain", "say \"hi\"", "back\\slash", "\\\"", "line\nbreak", "crlf\r\n", "tab\there", "\n",
    "\u{0}", "nul\u{0}inside", "\u{1}\u{8}\u{B}\u{C}\u{1B}\u{1F}", "\u{7F}", "</script>", "a/b", "{\"type\":\"heartbeat\"}\n",
    "é", "日本", "😀", "👩‍👩‍👧‍👦", "\u{2028}\u{2029}", "\u{FEFF}bom", "\u{10FFFF}", "e\u{301}",
    String(repeating: "\"\\\n", count: 100),
]

/// Encodes, checks the line shape, and decodes again.
func childRoundTrip(_ message: ChildMessage) throws -> ChildMessage {
    let line = message.encoded()
    // One line: exactly one newline, at the end (escaped newlines stay inside strings as \n).
    #expect(line.last == 0x0A, "\(show(line))")
    #expect(line.filter { $0 == 0x0A }.count == 1, "\(show(line))")
    #expect(line.count <= ProtocolLimits.maxLineLength + 1)
    return try ChildMessage.decode(Array(line.dropLast()))
}

func supervisorRoundTrip(_ message: SupervisorMessage) throws -> SupervisorMessage {
    let line = message.encoded()
    #expect(line.last == 0x0A, "\(show(line))")
    #expect(line.filter { $0 == 0x0A }.count == 1, "\(show(line))")
    return try decodeSupervisor(Array(line.dropLast()))
}

@Suite("Round trips: encode → decode")
struct RoundTripTests {
    // MARK: child messages

    static let childMessages: [ChildMessage] = [
        .heartbeat, .ready,
        .progress(Progress()),
        .progress(Progress(completed: 0, total: 0)),
        .progress(Progress(completed: 3, total: 10)),
        .progress(Progress(completed: 9_007_199_254_740_992)),
        .progress(Progress(fraction: 0)), .progress(Progress(fraction: 1)), .progress(Progress(fraction: 0.1)),
        .progress(Progress(fraction: 1.0 / 3.0)), .progress(Progress(fraction: .leastNonzeroMagnitude)),
        .progress(Progress(completed: 1, total: 2, fraction: 0.5, title: "Indexing", detail: "file 1 of 2")),
        .extend(seconds: 30, why: nil), .extend(seconds: 0.001, why: "x"), .extend(seconds: 1e-9, why: nil),
        .extend(seconds: 123.456789, why: "slow \"mirror\"\n"), .extend(seconds: 1e300, why: nil),
        .result(.null), .result(.bool(false)), .result(.number(-0.5)), .result(.string("")),
        .result(.array([])), .result(.object([])),
        .result(.object([
            ("n", .number(42)), ("f", .number(0.1)), ("big", .number(1e300)), ("tiny", .number(-1e-300)),
            ("huge int", .number(1.2345678901234568e17)), ("neg", .number(-7)),
            ("list", .array([.null, .bool(true), .string("x"), .array([.array([])]), .object([("k", .null)])])),
            ("dup", .number(1)), ("dup", .number(2)),
        ])),
    ]

    @Test("ChildMessage encode → decode gives the same message", arguments: childMessages)
    func child(message: ChildMessage) throws {
        #expect(try childRoundTrip(message) == message)
    }

    @Test("strings needing escapes survive a child round trip", arguments: trickyStrings)
    func childStrings(text: String) throws {
        // A progress message's text arrives without control characters (it is for terminals).
        let clean = TerminalText.stripped(text)
        let progress = ChildMessage.progress(Progress(title: text, detail: text))
        #expect(try childRoundTrip(progress) == .progress(Progress(title: clean, detail: clean)))
        let extend = ChildMessage.extend(seconds: 1, why: text)
        #expect(try childRoundTrip(extend) == extend)
        // As a value and as a key.
        let result = ChildMessage.result(.object([(text, .array([.string(text)]))]))
        #expect(try childRoundTrip(result) == result)
        // Scalar for scalar, not only canonically equivalent.
        guard case let .progress(p) = try childRoundTrip(progress) else { return }
        #expect(p.title.map { Array($0.unicodeScalars) } == Array(clean.unicodeScalars))
    }

    @Test("exact encodings of child messages", arguments: [
        (ChildMessage.heartbeat, #"{"type":"heartbeat"}"#),
        (.ready, #"{"type":"ready"}"#),
        (.progress(Progress(completed: 3, total: 10)), #"{"type":"progress","completed":3,"total":10}"#),
        (.progress(Progress(fraction: 0.5, title: "a\"b", detail: "c\nd")), #"{"type":"progress","fraction":0.5,"title":"a\"b","detail":"c\nd"}"#),
        (.extend(seconds: 30, why: "w"), #"{"type":"extend","seconds":30,"why":"w"}"#),
        (.extend(seconds: 1.5, why: nil), #"{"type":"extend","seconds":1.5}"#),
        (.result(.object([("a", .array([.number(1), .null]))])), #"{"type":"result","value":{"a":[1,null]}}"#),
    ])
    func childEncoding(message: ChildMessage, text: String) {
        #expect(message.encoded() == utf8(text + "\n"))
    }

    // MARK: supervisor messages

    static let supervisorMessages: [SupervisorMessage] = [
        .budget(remaining: nil, granted: nil), .budget(remaining: nil, granted: true),
        .budget(remaining: 12.5, granted: nil), .budget(remaining: 30, granted: true), .budget(remaining: 0, granted: false),
        .budget(remaining: 0.001, granted: nil), .budget(remaining: 86_400.125, granted: false),
        .expiring(remaining: 5), .expiring(remaining: 0.25), .expiring(remaining: 0),
        // Sizes in bytes, up to 2^53: past it a JSON number (a double to most readers) is no
        // longer exact, and no task's memory comes near 8 PiB.
        .warning(resource: "memory", used: 0, limit: 0), .warning(resource: "memory", used: 1, limit: 1),
        .warning(resource: "memory", used: 943_718_400, limit: 1_048_576_000),
        .warning(resource: "memory", used: 17_179_869_184, limit: 16_106_127_360),
        .warning(resource: "memory", used: 9_007_199_254_740_992, limit: 9_007_199_254_740_992),
        .warning(resource: "gpu-memory", used: 3, limit: 4),
    ] + CancelReason.allCases.flatMap { [SupervisorMessage.cancel(reason: $0, grace: 10), .cancel(reason: $0, grace: 0.5)] }

    // Values are whole milliseconds here; rounding of finer values is tested below.
    @Test("SupervisorMessage encode → decode gives the same message", arguments: supervisorMessages)
    func supervisor(message: SupervisorMessage) throws {
        #expect(try supervisorRoundTrip(message) == message)
    }

    @Test("exact encodings of supervisor messages", arguments: [
        (SupervisorMessage.budget(remaining: nil, granted: nil), #"{"type":"budget","remaining":null}"#),
        (.budget(remaining: 12.3456, granted: true), #"{"type":"budget","remaining":12.346,"granted":true}"#),
        (.budget(remaining: 30, granted: false), #"{"type":"budget","remaining":30,"granted":false}"#),
        (.expiring(remaining: 29.9996), #"{"type":"expiring","remaining":30}"#),
        (.cancel(reason: .timeout, grace: 5), #"{"type":"cancel","reason":"timeout","grace":5}"#),
        (.cancel(reason: .dependency, grace: 0.0004), #"{"type":"cancel","reason":"dependency","grace":0}"#),
        (.cancel(reason: .memory, grace: 10), #"{"type":"cancel","reason":"memory","grace":10}"#),
        (.warning(resource: "memory", used: 943_718_400, limit: 1_048_576_000),
         #"{"type":"warning","resource":"memory","used":943718400,"limit":1048576000}"#),
    ])
    func supervisorEncoding(message: SupervisorMessage, text: String) {
        #expect(message.encoded() == utf8(text + "\n"))
    }

    @Test("seconds are sent rounded to the millisecond", arguments: [
        (1.23456, 1.235), (1.2344, 1.234), (0.0004, 0), (59.9999, 60), (2, 2), (0.1, 0.1), (1e-9, 0),
    ])
    func secondsRounded(seconds: Double, sent: Double) throws {
        #expect(try supervisorRoundTrip(.expiring(remaining: seconds)) == .expiring(remaining: sent))
        #expect(try supervisorRoundTrip(.budget(remaining: seconds, granted: nil)) == .budget(remaining: sent, granted: nil))
        #expect(try supervisorRoundTrip(.cancel(reason: .user, grace: seconds)) == .cancel(reason: .user, grace: sent))
    }

    @Test("an infinite budget is sent as null, i.e. unlimited")
    func infiniteBudget() throws {
        #expect(SupervisorMessage.budget(remaining: .infinity, granted: nil).encoded() == utf8(#"{"type":"budget","remaining":null}"# + "\n"))
        #expect(try supervisorRoundTrip(.budget(remaining: .infinity, granted: true)) == .budget(remaining: nil, granted: true))
    }
}

/// The worker-library direction: what a child reads from the supervisor.
@Suite("SupervisorMessage.decode")
struct SupervisorDecodeTests {
    @Test("valid lines, with unknown fields and nulls")
    func valid() throws {
        #expect(try decodeSupervisor(utf8(#"{"type":"budget","remaining":12.5,"granted":true,"x":{"y":[1]}}"#))
            == .budget(remaining: 12.5, granted: true))
        #expect(try decodeSupervisor(utf8(#"{"type":"budget"}"#)) == .budget(remaining: nil, granted: nil))
        #expect(try decodeSupervisor(utf8(#"{"type":"budget","remaining":null,"granted":null}"#)) == .budget(remaining: nil, granted: nil))
        #expect(try decodeSupervisor(utf8(#"{"remaining":3,"type":"expiring"}"#)) == .expiring(remaining: 3))
        #expect(try decodeSupervisor(utf8("{\"type\":\"cancel\",\"reason\":\"shutdown\",\"grace\":2}\r")) == .cancel(reason: .shutdown, grace: 2))
        #expect(try decodeSupervisor(utf8(#"{"type":"cancel","reason":"fail-fast","grace":2}"#)) == .cancel(reason: .failFast, grace: 2))
        // grace is optional: a missing one means no grace at all.
        #expect(try decodeSupervisor(utf8(#"{"type":"cancel","reason":"user"}"#)) == .cancel(reason: .user, grace: 0))
        #expect(try decodeSupervisor(utf8(#"{"type":"c\u0061ncel","reason":"us\u0065r"}"#)) == .cancel(reason: .user, grace: 0))
        #expect(try decodeSupervisor(utf8(#"{"type":"cancel","reason":"memory","grace":10}"#)) == .cancel(reason: .memory, grace: 10))
    }

    @Test("a warning decodes in any field order, with unknown fields, sizes written as 3.0 or 1e9")
    func warning() throws {
        #expect(try decodeSupervisor(utf8(#"{"type":"warning","resource":"memory","used":943718400,"limit":1048576000}"#))
            == .warning(resource: "memory", used: 943_718_400, limit: 1_048_576_000))
        #expect(try decodeSupervisor(utf8(#"{"limit":4,"used":3,"resource":"memory","type":"warning","level":{"x":[1]}}"#))
            == .warning(resource: "memory", used: 3, limit: 4))
        #expect(try decodeSupervisor(utf8(#"{"type":"warning","resource":"memory","used":3.0,"limit":1e9}"#))
            == .warning(resource: "memory", used: 3, limit: 1_000_000_000))
        // A resource this library does not know yet still decodes: the worker decides what
        // to do with it, and a newer supervisor's warning must not become a protocol error.
        #expect(try decodeSupervisor(utf8(#"{"type":"warning","resource":"gpu-memory","used":1,"limit":2}"#))
            == .warning(resource: "gpu-memory", used: 1, limit: 2))
    }

    @Test("a size beyond 64 bits is held at the largest, not a crash")
    func warningBeyondSixtyFourBits() throws {
        guard case let .warning(_, used, limit) = try decodeSupervisor(utf8(#"{"type":"warning","resource":"memory","used":1e30,"limit":1e300}"#)) else {
            Issue.record("not a warning")
            return
        }
        #expect(used >= 1 << 63 && limit >= 1 << 63, "\(used) \(limit)")
    }

    @Test("a warning without its fields, or with sizes that are not sizes, is refused", arguments: [
        (#"{"type":"warning"}"#, ProtocolError.Kind.wrongType),
        (#"{"type":"warning","used":3,"limit":4}"#, .wrongType),
        (#"{"type":"warning","resource":"memory","limit":4}"#, .wrongType),
        (#"{"type":"warning","resource":"memory","used":3}"#, .wrongType),
        (#"{"type":"warning","resource":null,"used":3,"limit":4}"#, .wrongType),
        (#"{"type":"warning","resource":"memory","used":null,"limit":4}"#, .wrongType),
        (#"{"type":"warning","resource":7,"used":3,"limit":4}"#, .wrongType),
        (#"{"type":"warning","resource":"memory","used":"3","limit":4}"#, .wrongType),
        (#"{"type":"warning","resource":"memory","used":3,"limit":true}"#, .wrongType),
        (#"{"type":"warning","resource":"memory","used":-1,"limit":4}"#, .outOfRange),
        (#"{"type":"warning","resource":"memory","used":3,"limit":-4}"#, .outOfRange),
        (#"{"type":"warning","resource":"memory","used":-0.5,"limit":-1e9}"#, .outOfRange),
        (#"{"type":"warning","resource":"memory","used":1e400,"limit":4}"#, .outOfRange),
    ])
    func badWarning(line: String, kind: ProtocolError.Kind) {
        #expect(supervisorErrorKind(line) == kind)
    }

    @Test("bad lines give the right kind", arguments: [
        ("garbage", ProtocolError.Kind.notJSON), ("[]", .notJSON), (#"{"type":"budget",}"#, .notJSON),
        ("{}", .missingType), (#"{"type":null}"#, .missingType), (#"{"remaining":1}"#, .missingType),
        (#"{"type":"nope"}"#, .unknownType), (#"{"type":"heartbeat"}"#, .unknownType),
        (#"{"type":1}"#, .wrongType), (#"{"type":"budget","remaining":"1"}"#, .wrongType),
        (#"{"type":"budget","granted":"yes"}"#, .wrongType), (#"{"type":"budget","granted":1}"#, .wrongType),
        (#"{"type":"expiring"}"#, .wrongType), (#"{"type":"cancel"}"#, .wrongType),
        (#"{"type":"cancel","reason":"bored","grace":1}"#, .wrongType), (#"{"type":"cancel","reason":5}"#, .wrongType),
        (#"{"type":"cancel","reason":"user","grace":"1"}"#, .wrongType),
        (#"{"type":"expiring","remaining":1e400}"#, .outOfRange),
    ])
    func bad(line: String, kind: ProtocolError.Kind) {
        #expect(supervisorErrorKind(line) == kind)
    }

    @Test("invalid UTF-8 and overlong lines")
    func badBytes() {
        #expect(supervisorErrorKind(utf8(#"{"type":"cancel","reason":""#) + [0xFF] + utf8(#""}"#)) == .invalidUTF8)
        #expect(supervisorErrorKind(utf8(#"{"type":"cancel","reason":"\udc00"}"#)) == .invalidUTF8)
        let long = utf8(#"{"type":"budget","x":""#) + [UInt8](repeating: 0x61, count: 65536) + utf8(#""}"#)
        #expect(supervisorErrorKind(long) == .tooLong)
    }
}
