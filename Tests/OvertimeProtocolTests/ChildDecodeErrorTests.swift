import OvertimeProtocol
import Testing

/// Every bad line of DESIGN §3 is refused with the right `ProtocolError.Kind` (never a crash).
@Suite("ChildMessage.decode: bad lines")
struct ChildDecodeErrorTests {
    // The kinds travel in `protocol-error` events and reports, so their spelling is part of the format.
    @Test("error kinds have stable names", arguments: [
        (ProtocolError.Kind.notJSON, "not-json"), (.tooLong, "too-long"), (.invalidUTF8, "invalid-utf8"),
        (.missingType, "missing-type"), (.unknownType, "unknown-type"), (.wrongType, "wrong-type"), (.outOfRange, "out-of-range"),
    ])
    func kindNames(kind: ProtocolError.Kind, name: String) {
        #expect(kind.rawValue == name)
        #expect(ProtocolError(kind, "why").description == "\(name): why")
    }

    // MARK: not JSON

    static let notJSONLines: [String] = [
        // Garbage and non-objects at the top level.
        "", " ", "\r", "garbage", "hello {\"type\":\"heartbeat\"}", "[]", #"[{"type":"heartbeat"}]"#, #""heartbeat""#,
        "42", "null", "true", "type=heartbeat",
        // Truncated objects.
        "{", #"{""#, #"{"type"#, #"{"type""#, #"{"type":"#, #"{"type":"heart"#, #"{"type":"heartbeat""#,
        #"{"type":"heartbeat","#, #"{"type":"result","value":[1,2"#, #"{"type":"result","value":{"a":1"#,
        #"{"type":"result","value":{"a""#, #"{"type":"result","value":{"a":"#,
        // Text after the object.
        #"{"type":"heartbeat"} x"#, #"{"type":"heartbeat"}}"#, #"{"type":"heartbeat"}{}"#, #"{"type":"heartbeat"},"#,
        "{\"type\":\"heartbeat\"}\u{0}", "{\"type\":\"heartbeat\"}\u{0B}", "{\"type\":\"heartbeat\"}\u{0C}",
        // Whitespace beyond JSON's four characters (NBSP) is not whitespace.
        "{\u{A0}\"type\":\"heartbeat\"}",
        // Trailing and stray commas.
        #"{"type":"heartbeat",}"#, #"{,"type":"heartbeat"}"#, #"{"type":"heartbeat",,"x":1}"#,
        #"{"type":"result","value":[1,2,]}"#, #"{"type":"result","value":[,1]}"#, #"{"type":"result","value":{"a":1,}}"#,
        #"{"type":"result","value":[1 2]}"#,
        // Broken member syntax.
        #"{"type" "heartbeat"}"#, #"{"type"::"heartbeat"}"#, #"{"type":"heartbeat" "x":1}"#, #"{type:"heartbeat"}"#,
        #"{1:"heartbeat"}"#, #"{null:1,"type":"heartbeat"}"#, #"{"type":"result","value":{1:2}}"#,
        // Single quotes.
        "{'type':'heartbeat'}", #"{"type":'heartbeat'}"#, #"{"type":"result","value":'x'}"#,
        // Literals: only true, false and null, lower case, complete.
        #"{"type":"result","value":tru}"#, #"{"type":"result","value":True}"#, #"{"type":"result","value":NULL}"#,
        #"{"type":"result","value":nul}"#, #"{"type":"result","value":nulll}"#, #"{"type":"result","value":undefined}"#,
        // Not numbers in JSON.
        #"{"type":"progress","fraction":NaN}"#, #"{"type":"progress","fraction":nan}"#,
        #"{"type":"extend","seconds":Infinity}"#, #"{"type":"extend","seconds":-Infinity}"#, #"{"type":"extend","seconds":inf}"#,
        #"{"type":"progress","completed":01}"#, #"{"type":"progress","completed":00}"#, #"{"type":"progress","completed":-01}"#,
        #"{"type":"result","value":[01]}"#, #"{"x":012,"type":"heartbeat"}"#,
        #"{"type":"progress","completed":-}"#, #"{"type":"progress","completed":1.}"#, #"{"type":"progress","fraction":.5}"#,
        #"{"type":"progress","completed":+1}"#, #"{"type":"progress","completed":1e}"#, #"{"type":"progress","completed":1e+}"#,
        #"{"type":"progress","completed":1.e5}"#, #"{"type":"progress","completed":0x10}"#, #"{"type":"progress","completed":1_000}"#,
        #"{"type":"progress","completed":--1}"#, #"{"type":"progress","completed":- 1}"#, #"{"type":"progress","fraction":0,5}"#,
        #"{"type":"result","value":-.5}"#, #"{"type":"result","value":1.5.5}"#,
        // Broken strings: bad escapes, raw control characters, unterminated.
        #"{"type":"progress","title":"\x41"}"#, #"{"type":"progress","title":"\U0041"}"#, #"{"type":"progress","title":"\u12"}"#,
        #"{"type":"progress","title":"\u12G4"}"#, #"{"type":"progress","title":"\'"}"#, #"{"type":"progress","title":"\"}"#,
        #"{"type":"progress","title":"\"#, #"{"type":"progress","title":"\u00"#, "{\"type\":\"progress\",\"title\":\"a\tb\"}",
        "{\"type\":\"progress\",\"title\":\"a\u{0}b\"}", "{\"type\":\"progress\",\"title\":\"a\u{1F}b\"}",
        "{\"type\":\"progress\",\"title\":\"a\nb\"}", #"{"type":"progress","title":"open}"#,
    ]

    @Test("not JSON → not-json", arguments: notJSONLines)
    func notJSON(line: String) {
        #expect(childErrorKind(line) == .notJSON)
    }

    // MARK: too long

    /// A progress line padded with a title to exactly `length` bytes.
    static func paddedLine(length: Int) -> [UInt8] {
        let frame = titleLine([])
        return Array(frame.dropLast(2)) + [UInt8](repeating: UInt8(ascii: "x"), count: length - frame.count) + utf8(#""}"#)
    }

    @Test("a line of exactly 64 KiB decodes")
    func exactlyMax() throws {
        let line = Self.paddedLine(length: 65536)
        #expect(line.count == ProtocolLimits.maxLineLength)
        let title = try decodedTitle(line)
        #expect(title?.utf8.count == 65536 - titleLine([]).count)
    }

    @Test("a line of 64 KiB + 1 → too-long, before any parsing")
    func overMax() {
        #expect(childErrorKind(Self.paddedLine(length: 65537)) == .tooLong)
        // Even when the bytes are garbage, the length is what is reported.
        #expect(childErrorKind([UInt8](repeating: 0xFF, count: 100_000)) == .tooLong)
        // 64 KiB of trailing whitespace still counts.
        #expect(childErrorKind(utf8(#"{"type":"heartbeat"}"#) + [UInt8](repeating: 0x20, count: 65536)) == .tooLong)
    }

    // MARK: invalid UTF-8

    static let badUTF8: [(String, [UInt8])] = [
        ("0xFF", [0xFF]),
        ("0xFE", [0xFE]),
        ("lone continuation byte 0x80", [0x80]),
        ("lone continuation byte 0xBF", [0xBF]),
        ("overlong '/' 0xC0 0xAF", [0xC0, 0xAF]),
        ("overlong NUL 0xC0 0x80", [0xC0, 0x80]),
        ("overlong 0xC1 0xBF", [0xC1, 0xBF]),
        ("overlong 3-byte 0xE0 0x80 0xAF", [0xE0, 0x80, 0xAF]),
        ("overlong 3-byte 0xE0 0x9F 0xBF (U+07FF)", [0xE0, 0x9F, 0xBF]),
        ("overlong 4-byte 0xF0 0x8F 0xBF 0xBF (U+FFFF)", [0xF0, 0x8F, 0xBF, 0xBF]),
        ("surrogate U+D800 as 0xED 0xA0 0x80", [0xED, 0xA0, 0x80]),
        ("surrogate U+DFFF as 0xED 0xBF 0xBF", [0xED, 0xBF, 0xBF]),
        ("surrogate pair in UTF-8 (CESU-8)", [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]),
        ("U+110000 as 0xF4 0x90 0x80 0x80", [0xF4, 0x90, 0x80, 0x80]),
        ("0xF5 lead byte", [0xF5, 0x80, 0x80, 0x80]),
        ("0xF8 5-byte lead", [0xF8, 0x88, 0x80, 0x80, 0x80]),
        ("truncated 2-byte 0xC3", [0xC3]),
        ("truncated 3-byte 0xE2 0x82", [0xE2, 0x82]),
        ("truncated 4-byte 0xF0 0x9F 0x98", [0xF0, 0x9F, 0x98]),
        ("lead byte then ASCII 0xC3 'a'", [0xC3, 0x61]),
        ("3-byte with bad third byte", [0xE2, 0x82, 0x41]),
        ("4-byte with bad fourth byte", [0xF0, 0x9F, 0x98, 0xC0]),
    ]

    @Test("invalid UTF-8 in a string → invalid-utf8", arguments: badUTF8)
    func invalidUTF8InTitle(name: String, raw: [UInt8]) {
        #expect(childErrorKind(titleLine(raw)) == .invalidUTF8, "title")
        #expect(childErrorKind(titleLine(utf8("ok ") + raw + utf8(" ok"))) == .invalidUTF8, "title, mid-string")
        // Also where the value is not needed: in a key, an unknown field and a result value.
        #expect(childErrorKind(utf8(#"{"type":"heartbeat",""#) + raw + utf8(#"":1}"#)) == .invalidUTF8, "key")
        #expect(childErrorKind(utf8(#"{"type":"heartbeat","x":[""#) + raw + utf8(#""]}"#)) == .invalidUTF8, "unknown field")
        #expect(childErrorKind(utf8(#"{"type":"result","value":{"k":""#) + raw + utf8(#""}}"#)) == .invalidUTF8, "result")
    }

    @Test("a truncated sequence at the very end of the line → invalid-utf8")
    func truncatedAtEnd() {
        #expect(childErrorKind(utf8(#"{"type":"progress","title":""#) + [0xE2, 0x82]) == .invalidUTF8)
        #expect(childErrorKind(utf8(#"{"type":"progress","title":""#) + [0xF0]) == .invalidUTF8)
    }

    static let loneSurrogates: [String] = [
        #"\ud800"#, #"\uDBFF"#, #"\udc00"#, #"\uDFFF"#,
        #"\ud83dx"#, #"\ud83d\u0041"#, #"\ud83d\ud83d"#, #"\ude00\ud83d"#, #"\ud83d\n"#, #"a\ud83d"#,
    ]

    @Test("a lone \\u surrogate → invalid-utf8", arguments: loneSurrogates)
    func loneSurrogate(escaped: String) {
        #expect(childErrorKind(#"{"type":"progress","title":"\#(escaped)"}"#) == .invalidUTF8)
        #expect(childErrorKind(#"{"type":"heartbeat","x":"\#(escaped)"}"#) == .invalidUTF8)
    }

    // MARK: type

    @Test("unknown type → unknown-type", arguments: [
        "progres", "Progress", "PROGRESS", "", " heartbeat", "heartbeat ", "budget", "cancel", "result2", "héartbeat",
        "progress\\u0000",
    ])
    func unknownType(name: String) {
        #expect(childErrorKind(#"{"type":"\#(name)"}"#) == .unknownType)
    }

    @Test("the unknown-type message names the type, cut short")
    func unknownTypeMessage() {
        do {
            _ = try decodeChild(#"{"type":"bogus"}"#)
            Issue.record("decoded")
        } catch {
            #expect(error.message.contains(#""bogus""#))
        }
        do {
            _ = try decodeChild(#"{"type":"\#(String(repeating: "y", count: 1000))"}"#)
            Issue.record("decoded")
        } catch {
            #expect(error.kind == .unknownType)
            #expect(error.message.count < 100)
        }
    }

    @Test("missing type → missing-type", arguments: [
        "{}", " { } ", #"{"completed":1,"total":2}"#, #"{"Type":"heartbeat"}"#, #"{"types":"heartbeat"}"#,
        // A type inside a nested object or array is not the message's type.
        #"{"meta":{"type":"heartbeat"}}"#, #"{"list":[{"type":"heartbeat"}]}"#, #"{"x":"\"type\":\"heartbeat\""}"#,
    ])
    func missingType(line: String) {
        #expect(childErrorKind(line) == .missingType)
    }

    @Test("type not a string → wrong-type", arguments: [
        "1", "null", "true", "false", #"["heartbeat"]"#, #"{"name":"heartbeat"}"#, "0.5",
    ])
    func typeNotString(value: String) {
        #expect(childErrorKind(#"{"type":\#(value)}"#) == .wrongType)
    }

    // MARK: wrong field types

    @Test("a known field with a value of the wrong type → wrong-type", arguments: [
        #"{"type":"progress","completed":"3"}"#, #"{"type":"progress","completed":true}"#,
        #"{"type":"progress","completed":[3]}"#, #"{"type":"progress","completed":{}}"#,
        #"{"type":"progress","total":"10"}"#, #"{"type":"progress","total":false}"#,
        #"{"type":"progress","fraction":"0.5"}"#, #"{"type":"progress","fraction":[]}"#,
        #"{"type":"progress","title":5}"#, #"{"type":"progress","title":true}"#, #"{"type":"progress","title":["t"]}"#,
        #"{"type":"progress","title":{"t":1}}"#, #"{"type":"progress","detail":false}"#, #"{"type":"progress","detail":0}"#,
        #"{"type":"extend","seconds":"5"}"#, #"{"type":"extend","seconds":true}"#, #"{"type":"extend","seconds":[5]}"#,
        #"{"type":"extend","seconds":5,"why":1}"#, #"{"type":"extend","seconds":5,"why":{}}"#,
        // Required fields missing (or null, which means "not given").
        #"{"type":"extend"}"#, #"{"type":"extend","why":"more"}"#, #"{"type":"extend","seconds":null}"#,
        #"{"type":"result"}"#, #"{"type":"result","values":1}"#,
        // Fields are checked whatever the type: a line is refused as a whole.
        #"{"type":"heartbeat","completed":"3"}"#, #"{"type":"ready","title":1}"#,
    ])
    func wrongType(line: String) {
        #expect(childErrorKind(line) == .wrongType)
    }

    // MARK: out of range

    @Test("a number outside what the field allows → out-of-range", arguments: [
        // Counts are integers ≥ 0 (and ≤ 2^53, the largest exact Double integer).
        #"{"type":"progress","completed":-1}"#, #"{"type":"progress","total":-3}"#,
        #"{"type":"progress","completed":1.5}"#, #"{"type":"progress","total":0.5}"#, #"{"type":"progress","completed":1e-1}"#,
        #"{"type":"progress","completed":1e16}"#, #"{"type":"progress","total":-0.5}"#,
        // A fraction is within 0…1.
        #"{"type":"progress","fraction":1.0001}"#, #"{"type":"progress","fraction":2}"#,
        #"{"type":"progress","fraction":-0.1}"#, #"{"type":"progress","fraction":-1e-300}"#,
        // seconds > 0.
        #"{"type":"extend","seconds":0}"#, #"{"type":"extend","seconds":-0}"#, #"{"type":"extend","seconds":-1}"#,
        #"{"type":"extend","seconds":0.0,"why":"x"}"#,
        // Numbers beyond Double, wherever they are.
        #"{"type":"progress","completed":1e400}"#, #"{"type":"progress","fraction":1e400}"#,
        #"{"type":"extend","seconds":1e400}"#, #"{"type":"extend","seconds":-1e400}"#,
        #"{"type":"result","value":1e400}"#, #"{"type":"result","value":[1,{"a":-1E+400}]}"#,
        #"{"type":"heartbeat","x":1e400}"#, #"{"type":"heartbeat","x":\#(String(repeating: "9", count: 400))}"#,
    ])
    func outOfRange(line: String) {
        #expect(childErrorKind(line) == .outOfRange)
    }

    // MARK: nesting

    @Test("nesting beyond the limit → not-json", arguments: [maxDepth + 1, maxDepth + 2, 1000])
    func tooDeep(depth: Int) {
        #expect(childErrorKind(#"{"type":"result","value":\#(nestedArrays(depth))}"#) == .notJSON)
        #expect(childErrorKind(#"{"type":"heartbeat","x":\#(nestedArrays(depth))}"#) == .notJSON)
        let objects = String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
        #expect(childErrorKind(#"{"type":"result","value":\#(objects)}"#) == .notJSON)
        #expect(childErrorKind(#"{"type":"heartbeat","x":\#(objects)}"#) == .notJSON)
    }

    // The reader refuses at the depth limit instead of recursing, so nothing here may overflow
    // the stack however deep the input goes.
    @Test("100,000 nested brackets are an error, not a stack overflow")
    func hundredThousandBrackets() {
        let hundredThousand = String(repeating: "[", count: 100_000)
        #expect(childErrorKind(hundredThousand) == .tooLong)
        // Inside a line the line limit comes first: such a line is refused without being read.
        #expect(childErrorKind(#"{"type":"result","value":\#(hundredThousand)"#) == .tooLong)
        // Just under the line limit, the reader itself must stop at its depth limit.
        let opens = String(repeating: "[", count: 65_000)
        let objects = String(repeating: #"{"a":"#, count: 13_000)  // 65,000 bytes
        #expect(childErrorKind(opens) == .notJSON)
        #expect(childErrorKind(#"{"type":"result","value":\#(opens)"#) == .notJSON)
        #expect(childErrorKind(#"{"type":"heartbeat","x":\#(opens)"#) == .notJSON)
        #expect(childErrorKind(#"{"type":"result","value":\#(nestedArrays(32_000))}"#) == .notJSON)
        #expect(childErrorKind(#"{"type":"heartbeat","x":\#(objects)"#) == .notJSON)
        #expect(childErrorKind(#"{"type":"result","value":\#(objects)"#) == .notJSON)
    }
}
