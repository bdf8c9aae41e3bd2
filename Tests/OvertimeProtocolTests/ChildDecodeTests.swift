import OvertimeProtocol
import Testing

/// Valid child-to-supervisor lines (DESIGN §3, "Child to supervisor") decode to the right message.
@Suite("ChildMessage.decode: valid lines")
struct ChildDecodeTests {
    // MARK: progress

    @Test("progress with completed and total")
    func progressCounts() throws {
        #expect(try decodeChild(#"{"type":"progress","completed":3,"total":10}"#)
            == .progress(Progress(completed: 3, total: 10)))
    }

    @Test("progress with a fraction")
    func progressFraction() throws {
        #expect(try decodeChild(#"{"type":"progress","fraction":0.25}"#) == .progress(Progress(fraction: 0.25)))
    }

    @Test("fraction bounds 0 and 1 are inclusive", arguments: [("0", 0.0), ("1", 1.0), ("0.0", 0.0), ("1.0", 1.0), ("1e0", 1.0), ("-0", 0.0)])
    func fractionBounds(text: String, expected: Double) throws {
        #expect(try decodeChild(#"{"type":"progress","fraction":\#(text)}"#) == .progress(Progress(fraction: expected)))
    }

    @Test("progress with title and detail")
    func progressTitleDetail() throws {
        #expect(try decodeChild(#"{"type":"progress","title":"Indexing","detail":"file 3 of 10"}"#)
            == .progress(Progress(title: "Indexing", detail: "file 3 of 10")))
    }

    @Test("progress with every field at once")
    func progressAllFields() throws {
        let line = #"{"type":"progress","completed":0,"total":0,"fraction":0.5,"title":"t","detail":"d"}"#
        #expect(try decodeChild(line) == .progress(Progress(completed: 0, total: 0, fraction: 0.5, title: "t", detail: "d")))
    }

    @Test("progress with no fields is an empty progress (all optional)")
    func progressEmpty() throws {
        #expect(try decodeChild(#"{"type":"progress"}"#) == .progress(Progress()))
    }

    // DESIGN says integers; Codec accepts integral numbers in any spelling (3.0, 3e0).
    @Test("counts may be spelled as integral non-integers", arguments: ["3", "3.0", "3e0", "0.3e1", "30e-1"])
    func countSpellings(text: String) throws {
        #expect(try decodeChild(#"{"type":"progress","completed":\#(text)}"#) == .progress(Progress(completed: 3)))
    }

    @Test("large counts up to 2^53 are exact")
    func largeCounts() throws {
        #expect(try decodeChild(#"{"type":"progress","completed":123456789012345,"total":9007199254740992}"#)
            == .progress(Progress(completed: 123_456_789_012_345, total: 9_007_199_254_740_992)))
    }

    // MARK: heartbeat, ready, extend

    @Test("heartbeat")
    func heartbeat() throws {
        #expect(try decodeChild(#"{"type":"heartbeat"}"#) == .heartbeat)
    }

    @Test("ready")
    func ready() throws {
        #expect(try decodeChild(#"{"type":"ready"}"#) == .ready)
    }

    @Test("extend with seconds and why")
    func extendWithWhy() throws {
        #expect(try decodeChild(#"{"type":"extend","seconds":30,"why":"slow mirror"}"#)
            == .extend(seconds: 30, why: "slow mirror"))
    }

    @Test("extend with fractional seconds and no why")
    func extendFractional() throws {
        #expect(try decodeChild(#"{"type":"extend","seconds":0.5}"#) == .extend(seconds: 0.5, why: nil))
        #expect(try decodeChild(#"{"type":"extend","seconds":1e-3}"#) == .extend(seconds: 0.001, why: nil))
    }

    // MARK: result

    @Test("result with nested values of every JSON kind")
    func resultNested() throws {
        let line = #"{"type":"result","value":{"s":"x\ty","n":-12.5e1,"i":42,"t":true,"f":false,"z":null,"a":[1,"two",[3,[]],{}],"o":{"k":{"deep":[null]}}}}"#
        let expected: JSONValue = .object([
            ("s", .string("x\ty")),
            ("n", .number(-125)),
            ("i", .number(42)),
            ("t", .bool(true)),
            ("f", .bool(false)),
            ("z", .null),
            ("a", .array([.number(1), .string("two"), .array([.number(3), .array([])]), .object([])])),
            ("o", .object([("k", .object([("deep", .array([.null]))]))])),
        ])
        #expect(try decodeChild(line) == .result(expected))
    }

    // `value` is required but may be any JSON, including null: null is a value here, not "absent".
    @Test("result with a scalar or empty value", arguments: [
        ("null", JSONValue.null), ("true", .bool(true)), ("false", .bool(false)), ("0", .number(0)),
        ("-1.5", .number(-1.5)), (#""done""#, .string("done")), ("[]", .array([])), ("{}", .object([])),
        (#""""#, .string("")),
    ])
    func resultScalar(text: String, expected: JSONValue) throws {
        #expect(try decodeChild(#"{"type":"result","value":\#(text)}"#) == .result(expected))
    }

    @Test("result object keeps member order and duplicate keys as written")
    func resultOrder() throws {
        let message = try decodeChild(#"{"type":"result","value":{"b":1,"a":2,"b":3}}"#)
        #expect(message == .result(.object([("b", .number(1)), ("a", .number(2)), ("b", .number(3))])))
        // The subscript picks the last of duplicate keys.
        guard case let .result(value) = message else { return }
        #expect(value["b"] == .number(3))
        #expect(value["a"] == .number(2))
        #expect(value["missing"] == nil)
    }

    @Test("result nested exactly to the depth limit is accepted")
    func resultAtDepthLimit() throws {
        // The value itself is level 1; 64 nested arrays are the most the reader takes.
        var expected = JSONValue.number(1)
        for _ in 0..<maxDepth { expected = .array([expected]) }
        #expect(try decodeChild(#"{"type":"result","value":\#(nestedArrays(maxDepth))}"#) == .result(expected))
    }

    // Whether the innermost level holds a value or is empty must not change the limit.
    @Test("the depth limit counts containers only, not the scalar inside")
    func depthCountsContainers() throws {
        let empty = String(repeating: "[", count: maxDepth) + String(repeating: "]", count: maxDepth)
        let objects = String(repeating: #"{"k":"#, count: maxDepth) + "true" + String(repeating: "}", count: maxDepth)
        for value in [empty, nestedArrays(maxDepth), objects] {
            guard case let .result(decoded) = try decodeChild(#"{"type":"result","value":\#(value)}"#) else {
                Issue.record("not a result")
                continue
            }
            #expect(decoded.jsonText == value)
        }
    }

    // MARK: layout

    @Test("fields may come in any order, type last")
    func typeLast() throws {
        #expect(try decodeChild(#"{"completed":1,"total":2,"type":"progress"}"#) == .progress(Progress(completed: 1, total: 2)))
        #expect(try decodeChild(#"{"why":"w","seconds":2,"type":"extend"}"#) == .extend(seconds: 2, why: "w"))
    }

    @Test("JSON whitespace is allowed around every token")
    func whitespace() throws {
        let line = " \t{ \"type\" :\t\"progress\" , \"completed\" : 1 ,\r\n\"title\":\"a b\" }\t "
        #expect(try decodeChild(line) == .progress(Progress(completed: 1, title: "a b")))
    }

    @Test("CRLF line endings: the \\r the framer leaves is whitespace", arguments: [
        "{\"type\":\"heartbeat\"}\r", "{\"type\":\"heartbeat\"}\r\r", "{\"type\":\"heartbeat\"} \r",
    ])
    func crlf(line: String) throws {
        #expect(try decodeChild(line) == .heartbeat)
    }

    @Test("a repeated field: the last one wins")
    func repeatedField() throws {
        #expect(try decodeChild(#"{"type":"progress","completed":1,"completed":7}"#) == .progress(Progress(completed: 7)))
        #expect(try decodeChild(#"{"type":"progress","type":"heartbeat"}"#) == .heartbeat)
    }

    @Test("fields that belong to another type are ignored")
    func foreignFields() throws {
        #expect(try decodeChild(#"{"type":"heartbeat","completed":5,"title":"t","seconds":3,"value":[1]}"#) == .heartbeat)
        #expect(try decodeChild(#"{"type":"extend","seconds":3,"completed":5}"#) == .extend(seconds: 3, why: nil))
    }

    // RFC 8259: "t\u0079pe" and "type" are the same string, in keys as in type names.
    @Test("keys and type names written with escapes are recognised")
    func escapedNames() throws {
        #expect(try decodeChild(#"{"t\u0079pe":"heartbeat"}"#) == .heartbeat)
        #expect(try decodeChild(#"{"type":"pro\u0067ress","\u0063ompleted":4}"#) == .progress(Progress(completed: 4)))
        #expect(try decodeChild(#"{"type":"r\u0065sult","v\u0061lue":1}"#) == .result(.number(1)))
        // Escapes that do not spell a known name are still unknown.
        #expect(childErrorKind(#"{"type":"pro\u0067resz"}"#) == .unknownType)
    }

    // MARK: unknown fields

    /// Unknown field values of every shape: all must be skipped (forward compatibility).
    static let unknownValues: [String] = [
        "null", "true", "false", "0", "-1.5e-3", "12345678901234567890", #""text""#, #""esc \" \\ \/ \u00e9 \ud83d\ude00""#,
        "[]", "{}", "[1,[2,[3]],{\"a\":[]}]", #"{"nested":{"deeper":{"list":[1,"x",null,{"k":false}]}}}"#,
        // Known field names inside an unknown object must not leak out.
        #"{"type":"bogus","completed":"not a number","seconds":-1}"#,
        #"[{"type":"result"}]"#,
        nestedArrays(maxDepth),
    ]

    @Test("unknown fields are ignored, whatever their value", arguments: unknownValues)
    func unknownFieldIgnored(value: String) throws {
        #expect(try decodeChild(#"{"type":"progress","x-future":\#(value),"completed":2}"#) == .progress(Progress(completed: 2)))
        #expect(try decodeChild(#"{"x-future":\#(value),"type":"heartbeat"}"#) == .heartbeat)
        #expect(try decodeChild(#"{"type":"extend","seconds":1,"x-future":\#(value)}"#) == .extend(seconds: 1, why: nil))
    }

    @Test("a near-miss of a known field name is an unknown field")
    func nearMissNames() throws {
        // "Completed" and "complete" are not "completed", so their odd values are not checked.
        #expect(try decodeChild(#"{"type":"progress","Completed":"x","complete":-1,"title ":5}"#) == .progress(Progress()))
    }

    // MARK: null = absent

    @Test("null for an optional field is treated as absent", arguments: [
        "completed", "total", "fraction", "title", "detail",
    ])
    func nullProgressField(field: String) throws {
        #expect(try decodeChild(#"{"type":"progress","\#(field)":null}"#) == .progress(Progress()))
        // ... and, written after a value, clears it (last one wins) without disturbing the fields around it.
        #expect(try decodeChild(#"{"type":"progress","completed":1,"\#(field)x":null,"total":2,"title":"t","\#(field)":null}"#)
            == .progress(Progress(completed: field == "completed" ? nil : 1, total: field == "total" ? nil : 2,
                                  title: field == "title" ? nil : "t")))
    }

    @Test("null why on extend is absent")
    func nullWhy() throws {
        #expect(try decodeChild(#"{"type":"extend","seconds":5,"why":null}"#) == .extend(seconds: 5, why: nil))
    }
}
