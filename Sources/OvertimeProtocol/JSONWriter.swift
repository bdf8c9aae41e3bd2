/// Builds compact JSON text into a byte buffer, one line at a time.
///
/// Used for every message Overtime writes (to a task's channel, to the event stream, to
/// reports). It writes exactly what it is told; callers keep objects well formed.
public struct JSONWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init(capacity: Int = 128) {
        bytes.reserveCapacity(capacity)
    }

    public var text: String { String(decoding: bytes, as: UTF8.self) }

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Writes `"name":`; the next value call writes the member's value.
    public mutating func key(_ name: String) {
        separate()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func string(_ s: String) {
        separate()
        appendQuoted(s)
        needsComma = true
    }

    public mutating func int(_ n: Int) {
        separate()
        bytes.append(contentsOf: String(n).utf8)
        needsComma = true
    }

    /// A number; integral values print without a fraction, non-finite values print `null`
    /// (JSON has no infinity).
    public mutating func number(_ d: Double) {
        separate()
        if !d.isFinite {
            bytes.append(contentsOf: "null".utf8)
        } else if d == d.rounded(), abs(d) < 9.0e15 {
            bytes.append(contentsOf: String(Int(d)).utf8)
        } else {
            bytes.append(contentsOf: d.description.utf8)
        }
        needsComma = true
    }

    /// Seconds rounded to the millisecond: what the protocol sends for `remaining` and `grace`.
    public mutating func seconds(_ s: Double) {
        number((s * 1000).rounded() / 1000)
    }

    public mutating func bool(_ b: Bool) {
        separate()
        bytes.append(contentsOf: (b ? "true" : "false").utf8)
        needsComma = true
    }

    public mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
        needsComma = true
    }

    public mutating func value(_ v: JSONValue) {
        switch v {
        case .null: null()
        case let .bool(b): bool(b)
        case let .number(d): number(d)
        case let .string(s): string(s)
        case let .array(items):
            beginArray()
            for item in items { value(item) }
            endArray()
        case let .object(members):
            beginObject()
            for member in members {
                key(member.key)
                value(member.value)
            }
            endObject()
        }
    }

    /// Appends raw bytes, such as a newline that ends a line.
    public mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func appendQuoted(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
