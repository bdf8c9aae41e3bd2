import OvertimeProtocol
import Testing

// Helpers shared by the protocol tests. Only the public API is used, so the tests also hold
// in a release build (no @testable import).

/// The UTF-8 bytes of `text`.
func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Bytes shown for a failure message: printable ASCII as is, anything else as \xNN.
func show(_ bytes: some Collection<UInt8>) -> String {
    var s = ""
    for b in bytes.prefix(200) {
        if b >= 0x20, b < 0x7F { s.append(Character(Unicode.Scalar(b))) } else { s += "\\x" + String(b, radix: 16) }
    }
    return bytes.count > 200 ? s + "… (\(bytes.count) bytes)" : s
}

/// Decodes one child line given as text.
func decodeChild(_ line: String) throws(ProtocolError) -> ChildMessage {
    try ChildMessage.decode(utf8(line))
}

/// The kind a child line is refused with, or nil when it decodes.
func childErrorKind(_ line: [UInt8]) -> ProtocolError.Kind? {
    do {
        _ = try ChildMessage.decode(line)
        return nil
    } catch {
        return error.kind
    }
}

func childErrorKind(_ line: String) -> ProtocolError.Kind? { childErrorKind(utf8(line)) }

/// Decodes one supervisor line given as bytes (the worker-library direction).
func decodeSupervisor(_ line: [UInt8]) throws(ProtocolError) -> SupervisorMessage {
    try line.withUnsafeBytes { buffer in
        Result { () throws(ProtocolError) in try SupervisorMessage.decode(buffer) }
    }.get()
}

func supervisorErrorKind(_ line: [UInt8]) -> ProtocolError.Kind? {
    do {
        _ = try decodeSupervisor(line)
        return nil
    } catch {
        return error.kind
    }
}

func supervisorErrorKind(_ line: String) -> ProtocolError.Kind? { supervisorErrorKind(utf8(line)) }

/// `{"type":"result","value":"<raw>"}` with `raw` pasted in byte for byte (possibly not
/// UTF-8): a string the decoder keeps as the JSON says (a progress title would lose its
/// control characters, which are stripped from what is shown).
func titleLine(_ raw: [UInt8]) -> [UInt8] {
    utf8(#"{"type":"result","value":""#) + raw + utf8(#""}"#)
}

/// The string a `titleLine` decodes to, or nil when it is not a result holding a string.
func decodedTitle(_ line: [UInt8]) throws(ProtocolError) -> String? {
    guard case let .result(.string(text)) = try ChildMessage.decode(line) else { return nil }
    return text
}

/// `depth` arrays nested inside each other, innermost holding `1`.
func nestedArrays(_ depth: Int) -> String {
    String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
}

/// The nesting limit of the reader (JSONReader.maxDepth, internal to the module).
let maxDepth = 64

/// A small deterministic PRNG (SplitMix64), so randomized tests repeat exactly.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
