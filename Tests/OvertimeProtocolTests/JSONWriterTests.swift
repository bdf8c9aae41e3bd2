import OvertimeProtocol
import Testing

@Suite("JSONWriter")
struct JSONWriterTests {
    static func written(_ build: (inout JSONWriter) -> Void) -> String {
        var w = JSONWriter()
        build(&w)
        return w.text
    }

    @Test("number formatting", arguments: [
        // Integral values print without ".0".
        (0.0, "0"), (1, "1"), (-3, "-3"), (42, "42"), (1e15, "1000000000000000"), (8_999_999_999_999_999, "8999999999999999"),
        (-0.0, "0"),
        // Others print the shortest text that reads back as the same Double.
        (2.5, "2.5"), (0.1, "0.1"), (-0.001, "-0.001"), (1.0 / 3.0, "0.3333333333333333"),
        (1e20, "1e+20"), (1.5e300, "1.5e+300"), (1e-7, "1e-07"),
        // JSON has no infinity or NaN.
        (.infinity, "null"), (-.infinity, "null"), (.nan, "null"),
    ])
    func number(value: Double, text: String) {
        #expect(Self.written { $0.number(value) } == text)
    }

    @Test("every finite number written reads back exactly", arguments: [
        0.1, 1.0 / 3.0, 9e15, 9.007199254740994e15, 123_456_789.123_456_789, .leastNonzeroMagnitude, .greatestFiniteMagnitude,
        -.leastNormalMagnitude, 1e-7, 4_503_599_627_370_496.5,
    ])
    func numberReadsBack(value: Double) throws {
        let text = Self.written { $0.number(value) }
        #expect(try decodeChild(#"{"type":"result","value":\#(text)}"#) == .result(.number(value)), "\(text)")
    }

    @Test("seconds are rounded to the millisecond", arguments: [
        (1.23456, "1.235"), (1.2344, "1.234"), (0.0004, "0"), (59.9999, "60"), (2.0, "2"), (0.25, "0.25"),
        (86_400.0001, "86400"), (-1.5, "-1.5"), (.infinity, "null"),
    ])
    func seconds(value: Double, text: String) {
        #expect(Self.written { $0.seconds(value) } == text)
    }

    @Test("integers, booleans and null")
    func scalars() {
        #expect(Self.written { $0.int(0) } == "0")
        #expect(Self.written { $0.int(-12) } == "-12")
        #expect(Self.written { $0.int(Int.max) } == "9223372036854775807")
        #expect(Self.written { $0.bool(true) } == "true")
        #expect(Self.written { $0.bool(false) } == "false")
        #expect(Self.written { $0.null() } == "null")
    }

    @Test("string escaping", arguments: [
        ("plain", #""plain""#), ("", #""""#), ("a\"b", #""a\"b""#), ("a\\b", #""a\\b""#), ("a\nb", #""a\nb""#),
        ("a\rb", #""a\rb""#), ("a\tb", #""a\tb""#), ("\u{0}", #""\u0000""#), ("\u{1}", #""\u0001""#),
        ("\u{8}", #""\u0008""#), ("\u{C}", #""\u000c""#), ("\u{1B}", #""\u001b""#), ("\u{1F}", #""\u001f""#),
        // Not escaped: space, DEL, '/', and all non-ASCII (written as raw UTF-8).
        (" ", #"" ""#), ("\u{7F}", "\"\u{7F}\""), ("a/b", #""a/b""#), ("é😀", "\"é😀\""), ("\u{2028}", "\"\u{2028}\""),
    ])
    func stringEscaping(value: String, text: String) {
        #expect(Self.written { $0.string(value) } == text)
        // The same escaping applies to keys.
        #expect(Self.written { $0.beginObject(); $0.key(value); $0.int(1); $0.endObject() } == "{\(text):1}")
    }

    @Test("commas go between members and elements, never after brackets opened")
    func structure() {
        let text = Self.written { w in
            w.beginObject()
            w.key("a"); w.beginArray(); w.endArray()
            w.key("b"); w.beginArray(); w.beginArray(); w.endArray(); w.beginArray(); w.int(1); w.int(2); w.endArray(); w.endArray()
            w.key("c"); w.beginObject(); w.endObject()
            w.key("d"); w.beginObject(); w.key("e"); w.null(); w.key("f"); w.bool(true); w.endObject()
            w.key("g"); w.string("s")
            w.endObject()
        }
        #expect(text == #"{"a":[],"b":[[],[1,2]],"c":{},"d":{"e":null,"f":true},"g":"s"}"#)
    }

    @Test("JSONValue.jsonText writes compact JSON in member order")
    func jsonText() {
        let value: JSONValue = .object([
            ("z", .array([.number(1), .number(2.5), .null, .bool(false)])),
            ("a", .object([("x\"y", .string("line\n"))])),
            ("e", .array([])),
        ])
        #expect(value.jsonText == #"{"z":[1,2.5,null,false],"a":{"x\"y":"line\n"},"e":[]}"#)
        #expect(JSONValue.string("é").jsonText == "\"é\"")
        #expect(JSONValue.number(.nan).jsonText == "null")
    }

    @Test("raw appends bytes as given")
    func raw() {
        #expect(Self.written { $0.beginObject(); $0.endObject(); $0.raw("\n") } == "{}\n")
    }
}
