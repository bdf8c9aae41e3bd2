import OvertimeProtocol
import Testing

/// Seeded, deterministic random testing: a crash here (trap, stack overflow, out-of-bounds read)
/// kills the test process, which is the failure this is about. Where a line does decode, the
/// message must also survive its own encoding, so a wrong acceptance shows up too.
@Suite("Randomized decoding")
struct FuzzTests {
    /// Valid lines and what they decode to; the seeds for mutation.
    static let valid: [(String, ChildMessage)] = [
        (#"{"type":"heartbeat"}"#, .heartbeat),
        (#"{"type":"ready"}"#, .ready),
        (#"{"type":"progress","completed":3,"total":10,"title":"caf\u00e9 \"x\"","detail":"é😀"}"#,
         .progress(Progress(completed: 3, total: 10, title: "café \"x\"", detail: "é😀"))),
        (#"{"type":"progress","fraction":0.125}"#, .progress(Progress(fraction: 0.125))),
        (#"{"type":"extend","seconds":1.5e1,"why":"a\nb\ud83d\ude00"}"#, .extend(seconds: 15, why: "a\nb😀")),
        (#"{"type":"result","value":{"a":[1,-2.5e-3,true,false,null,"s\\",{"b":{}}],"c":[]}}"#,
         .result(.object([("a", .array([.number(1), .number(-0.0025), .bool(true), .bool(false), .null, .string("s\\"),
                                       .object([("b", .object([]))])])), ("c", .array([]))]))),
        (#"{"x":{"y":[[[["deep"]]]]},"type":"progress","completed":0}"#, .progress(Progress(completed: 0))),
    ]

    /// Bytes a mutation likes to insert: JSON punctuation, digits, escapes and UTF-8 edge bytes.
    static let interesting: [UInt8] = Array(#"{}[]:,"\/-+.eE0123456789tfnu \#t"#.utf8)
        + [0x00, 0x0A, 0x0D, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xA0, 0xF0, 0xF4, 0x90, 0xF5, 0xFF]

    static func randomByte(_ rng: inout SplitMix64) -> UInt8 {
        Bool.random(using: &rng) ? interesting.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
    }

    static func mutate(_ line: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var b = line
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let at = b.isEmpty ? 0 : Int.random(in: 0..<b.count, using: &rng)
            switch Int.random(in: 0..<8, using: &rng) {
            case 0 where !b.isEmpty: b[at] = randomByte(&rng)  // replace
            case 1: b.insert(randomByte(&rng), at: at)  // insert
            case 2 where !b.isEmpty: b.remove(at: at)  // delete
            case 3: b = Array(b[..<at])  // truncate
            case 4 where !b.isEmpty: b[at] ^= 1 << UInt8.random(in: 0...7, using: &rng)  // flip a bit
            case 5:  // duplicate a slice
                let end = Int.random(in: at...b.count, using: &rng)
                b.insert(contentsOf: b[at..<end], at: at)
            case 6:  // deep nesting
                let n = Int.random(in: 1...200, using: &rng)
                b.insert(contentsOf: [UInt8](repeating: Bool.random(using: &rng) ? 0x5B : 0x7B, count: n), at: at)
            default:  // splice a piece of another valid line
                let other = utf8(valid.randomElement(using: &rng)!.0)
                let from = Int.random(in: 0..<other.count, using: &rng)
                b.insert(contentsOf: other[from..<min(other.count, from + Int.random(in: 1...20, using: &rng))], at: at)
            }
        }
        return b
    }

    /// Decodes `line`; when accepted, the message must round-trip through its own encoding.
    static func check(_ line: [UInt8]) -> Bool {
        guard let message = try? ChildMessage.decode(line) else { return false }
        let again = try? ChildMessage.decode(Array(message.encoded().dropLast()))
        #expect(again == message, "accepted \(show(line)) as \(message), which does not survive re-encoding")
        return true
    }

    @Test("the seed lines decode as expected")
    func seeds() throws {
        for (line, message) in Self.valid {
            #expect(try decodeChild(line) == message, "\(line)")
        }
    }

    @Test("random byte strings never crash the decoder")
    func randomBytes() async {
        var rng = SplitMix64(seed: 0x0E47_1E00)
        var accepted = 0
        for round in 0..<50_000 {
            // Other tests share this process's few threads (real-process tests poll on them
            // with short deadlines): do not hold one for seconds.
            if round % 2_000 == 0 { await Task.yield() }
            let length = Int.random(in: 0...120, using: &rng)
            var line = (0..<length).map { _ in Self.randomByte(&rng) }
            // Half the time start like an object, so the reader gets further than the first byte.
            if Bool.random(using: &rng) { line = utf8(#"{"type":"#) + line }
            if Self.check(line) { accepted += 1 }
        }
        // Random bytes almost never make a valid message; a large count would mean the reader accepts junk.
        #expect(accepted < 100)
    }

    @Test("random mutations of valid lines never crash, and valid lines still decode")
    func mutations() async throws {
        var rng = SplitMix64(seed: 20_240_601)
        var accepted = 0
        var refused = 0
        for round in 0..<100_000 {
            if round % 2_000 == 0 { await Task.yield() }  // as in randomBytes
            let (text, message) = Self.valid[round % Self.valid.count]
            let mutated = Self.mutate(utf8(text), &rng)
            if Self.check(mutated) { accepted += 1 } else { refused += 1 }
            // The decoder keeps no state between lines: the untouched line right after still decodes.
            if round % 97 == 0 {
                #expect(try decodeChild(text) == message)
            }
        }
        // Both outcomes occur (so mutations are neither all harmless nor all fatal).
        #expect(accepted > 0)
        #expect(refused > accepted)
    }

    @Test("garbage lines in a stream do not disturb the valid lines around them")
    func garbageInStream() throws {
        var rng = SplitMix64(seed: 7)
        var stream: [UInt8] = []
        var expected: [ChildMessage] = []
        for round in 0..<5_000 {
            // Garbage without newlines (the newline is what ends a line, garbage or not).
            var garbage = Self.mutate(utf8(Self.valid[round % Self.valid.count].0), &rng)
            garbage.removeAll { $0 == 0x0A }
            stream += garbage + [0x0A]
            let (text, message) = Self.valid.randomElement(using: &rng)!
            stream += utf8(text) + [0x0A]
            expected.append(message)
        }
        // Cut into random chunks, as reads from a socket would be.
        var chunks: [[UInt8]] = []
        var at = 0
        while at < stream.count {
            let n = Int.random(in: 1...300, using: &rng)
            chunks.append(Array(stream[at..<min(at + n, stream.count)]))
            at += n
        }
        var decoded: [ChildMessage] = []
        for (index, item) in frame(chunks).enumerated() {
            guard case let .line(bytes) = item else {
                Issue.record("unexpected \(item)")
                continue
            }
            // Odd lines are the valid ones; even ones are garbage (which may happen to decode).
            if index % 2 == 1 { decoded.append(try ChildMessage.decode(bytes)) } else { _ = Self.check(bytes) }
        }
        #expect(decoded == expected)
    }

    @Test("random JSON values survive result encode → decode")
    func randomValues() throws {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<3_000 {
            let value = Self.randomValue(&rng, depth: 0)
            let message = ChildMessage.result(value)
            #expect(try childRoundTrip(message) == message, "\(value.jsonText)")
        }
    }

    static func randomString(_ rng: inout SplitMix64) -> String {
        var s = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &rng) {
            let scalar: Unicode.Scalar?
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: scalar = Unicode.Scalar(UInt8.random(in: 0...0x7F, using: &rng))  // ASCII incl. controls
            case 1: scalar = Unicode.Scalar(UInt32.random(in: 0x80...0xFFFF, using: &rng))  // nil for surrogates
            case 2: scalar = Unicode.Scalar(UInt32.random(in: 0x10000...0x10FFFF, using: &rng))
            default: scalar = [#"""#, "\\", "\n", "/", "\u{0}"].randomElement(using: &rng)!
            }
            if let scalar { s.append(scalar) }
        }
        return String(s)
    }

    static func randomNumber(_ rng: inout SplitMix64) -> Double {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return Double(Int.random(in: -1_000_000...1_000_000, using: &rng))
        case 1: return Double.random(in: -1...1, using: &rng)
        default:
            // Any finite Double, from random bits.
            while true {
                let d = Double(bitPattern: rng.next())
                if d.isFinite { return d }
            }
        }
    }

    static func randomValue(_ rng: inout SplitMix64, depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth < 5 ? 7 : 4), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .number(randomNumber(&rng))
        case 3: return .string(randomString(&rng))
        case 4, 5: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            return .object((0..<Int.random(in: 0...4, using: &rng)).map { _ in
                (randomString(&rng), randomValue(&rng, depth: depth + 1))
            })
        }
    }
}
