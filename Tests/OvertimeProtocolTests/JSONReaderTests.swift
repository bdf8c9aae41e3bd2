import OvertimeProtocol
import Testing

/// The hand-written reader, through the public codec: strings (escapes, UTF-8) and numbers.
@Suite("JSONReader: strings and numbers")
struct JSONReaderTests {
    // MARK: escapes

    @Test("valid escapes decode to the right String", arguments: [
        (#"a\nb"#, "a\nb"),
        (#"say \"hi\""#, "say \"hi\""),
        (#"back\\slash"#, "back\\slash"),
        (#"a\/b"#, "a/b"),
        (#"caf\u00e9"#, "café"),
        (#"caf\u00E9"#, "café"),
        (#"\ud83d\ude00"#, "😀"),
        (#"\uD83D\uDE00!"#, "😀!"),
        (#"\b\f\n\r\t"#, "\u{8}\u{C}\n\r\t"),
        (#"\u0000"#, "\u{0}"),
        (#"\u001f\u007f"#, "\u{1F}\u{7F}"),
        (#"\u20ac"#, "€"),
        (#"\uffff"#, "\u{FFFF}"),
        (#"\udbff\udfff"#, "\u{10FFFF}"),
        (#"\ud800\udc00"#, "\u{10000}"),
        (#"\\n"#, "\\n"),  // an escaped backslash followed by a plain n
        (#"\\\""#, "\\\""),
        (#"x\u0041\u0042y"#, "xABy"),
        (#"é\u00e9é"#, "ééé"),  // escapes mixed with raw multi-byte UTF-8
    ])
    func escapes(escaped: String, expected: String) throws {
        let title = try decodedTitle(titleLine(utf8(escaped)))
        #expect(title == expected)
        // The same in a result value, which goes through the generic value reader.
        #expect(try decodeChild(#"{"type":"result","value":["\#(escaped)"]}"#) == .result(.array([.string(expected)])))
        // And in an object key of a result.
        #expect(try decodeChild(#"{"type":"result","value":{"\#(escaped)":1}}"#) == .result(.object([(expected, .number(1))])))
    }

    @Test("the decoded string has the right scalars, not just an equivalent one")
    func exactScalars() throws {
        // String == uses canonical equivalence; compare the scalars to be sure nothing was normalised.
        let title = try decodedTitle(titleLine(utf8(#"e\u0301 \ud83d\ude00"#)))
        #expect(title.map { Array($0.unicodeScalars) } == ["e", "\u{301}", " ", "\u{1F600}"])
    }

    // MARK: raw UTF-8

    static let validUTF8: [(String, [UInt8])] = [
        ("é (2 bytes)", [0xC3, 0xA9]),
        ("U+0080, smallest 2-byte", [0xC2, 0x80]),
        ("U+07FF, largest 2-byte", [0xDF, 0xBF]),
        ("U+0800, smallest 3-byte", [0xE0, 0xA0, 0x80]),
        ("€ (3 bytes)", [0xE2, 0x82, 0xAC]),
        ("U+D7FF, just below the surrogates", [0xED, 0x9F, 0xBF]),
        ("U+E000, just above the surrogates", [0xEE, 0x80, 0x80]),
        ("U+FFFD", [0xEF, 0xBF, 0xBD]),
        ("U+FFFF", [0xEF, 0xBF, 0xBF]),
        ("U+10000, smallest 4-byte", [0xF0, 0x90, 0x80, 0x80]),
        ("😀 (4 bytes)", [0xF0, 0x9F, 0x98, 0x80]),
        ("U+10FFFF, the largest scalar", [0xF4, 0x8F, 0xBF, 0xBF]),
        ("DEL 0x7F", [0x7F]),
    ]

    @Test("valid multi-byte UTF-8 survives unchanged", arguments: validUTF8)
    func validUTF8Title(name: String, raw: [UInt8]) throws {
        let title = try decodedTitle(titleLine(raw))
        #expect(title.map { Array($0.utf8) } == raw)
        let surrounded = utf8("a") + raw + utf8("b") + raw
        #expect(try decodedTitle(titleLine(surrounded)).map { Array($0.utf8) } == surrounded)
    }

    @Test("titles in many scripts survive", arguments: [
        "Überprüfung läuft", "日本語のタイトル", "Ελληνικά", "עברית", "🚀 deploying 🚀", "ñandú", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "👩‍👩‍👧‍👦",
    ])
    func scripts(title: String) throws {
        #expect(try decodeChild(#"{"type":"progress","title":"\#(title)","detail":"\#(title)"}"#)
            == .progress(Progress(title: title, detail: title)))
    }

    // MARK: numbers

    /// Numbers in a result value (read by the generic value reader, exact as Double allows).
    static let numbers: [(String, Double)] = [
        ("0", 0), ("1", 1), ("-1", -1), ("7", 7), ("10", 10), ("1234567890", 1_234_567_890),
        ("123456789012345", 123_456_789_012_345),  // 15 digits: the fast path
        ("1234567890123456", 1_234_567_890_123_456),  // 16 digits: the slow path
        ("-9007199254740993", -9_007_199_254_740_992),  // rounds like every JSON reader does
        ("12345678901234567890", 1.2345678901234567e19),
        ("1.5", 1.5), ("-2.25", -2.25), ("0.1", 0.1), ("3.0", 3), ("0.000001", 0.000001),
        ("1e3", 1000), ("1E3", 1000), ("1e+3", 1000), ("1e-3", 0.001), ("2.5E-2", 0.025), ("0e0", 0), ("-0.0", 0),
        ("1e07", 1e7),  // leading zeros are allowed in the exponent
        ("1.7976931348623157e308", .greatestFiniteMagnitude), ("-1.7976931348623157e308", -.greatestFiniteMagnitude),
        ("4.9406564584124654e-324", .leastNonzeroMagnitude), ("5e-324", .leastNonzeroMagnitude), ("2.2250738585072014e-308", .leastNormalMagnitude),
        ("1e-400", 0),  // underflow is a zero, not an error
    ]

    @Test("numbers are read exactly", arguments: numbers)
    func number(text: String, expected: Double) throws {
        #expect(try decodeChild(#"{"type":"result","value":\#(text)}"#) == .result(.number(expected)))
        #expect(try decodeChild(#"{"type":"result","value":[ \#(text) , \#(text)]}"#)
            == .result(.array([.number(expected), .number(expected)])))
    }

    @Test("-0 keeps its sign")
    func negativeZero() throws {
        guard case let .result(.number(d)) = try decodeChild(#"{"type":"result","value":-0}"#) else {
            Issue.record("not a number result")
            return
        }
        #expect(d == 0 && d.sign == .minus)
    }

    @Test("a number may end the line right after its last digit (CRLF and whitespace too)")
    func numberAtEnd() throws {
        #expect(try decodeChild("{\"type\":\"progress\",\"completed\":12}") == .progress(Progress(completed: 12)))
        #expect(try decodeChild("{\"type\":\"extend\",\"seconds\":1.25\r}\r") == .extend(seconds: 1.25, why: nil))
        #expect(try decodeChild("{\"type\":\"extend\",\"seconds\":2e1\t}") == .extend(seconds: 20, why: nil))
    }

    // MARK: literals

    @Test("literals next to punctuation and whitespace")
    func literals() throws {
        #expect(try decodeChild(#"{"type":"result","value":[true,false,null,{"a":true},{"b":null}]}"#)
            == .result(.array([.bool(true), .bool(false), .null, .object([("a", .bool(true))]), .object([("b", .null)])])))
        #expect(try decodeChild("{\"type\":\"result\",\"value\":[ true ,\tfalse\r, null ]}")
            == .result(.array([.bool(true), .bool(false), .null])))
    }

    // MARK: where a document broke

    @Test("a whole document's error carries where it broke as a number, beside the problem's text")
    func documentErrorOffset() {
        do {
            _ = try JSONValue.parse(Array(#"{"a": 1,}"#.utf8))
            Issue.record("accepted a trailing comma")
        } catch {
            #expect(error.offset == 8, "\(error)")
            #expect(!error.problem.message.contains("byte"), "\(error.problem.message)")
            #expect(error.located == error.problem.message + " at byte 8")
        }
        do {
            _ = try JSONOutline.parse(Array(#"{"tasks": [1, 2,, 3]}"#.utf8)[...], leavingOut: "tasks")
            Issue.record("accepted a double comma")
        } catch {
            #expect(error.offset == 16, "\(error)")
        }
    }
}
