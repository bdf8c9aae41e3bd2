/// A strict, allocation-shy JSON reader over one line of bytes.
///
/// Overtime hears up to millions of messages a second from one chatty child, so the codec
/// reads bytes in place: keys are compared without building strings, numbers are read
/// without text, and only the fields a message needs are materialised. Everything is
/// checked all the same (RFC 8259 grammar, UTF-8 inside strings, nesting depth), because a
/// bad line must become a `protocol-error`, never a crash.
struct JSONReader {
    private let bytes: UnsafeRawBufferPointer
    private(set) var index: Int = 0

    /// Deeper nesting than this in a `result` value is refused rather than recursed into.
    static let maxDepth = 64

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// A reader that starts at `index`, inside a document checked before.
    init(_ bytes: UnsafeRawBufferPointer, at index: Int) {
        self.bytes = bytes
        self.index = index
    }

    var atEnd: Bool { index >= bytes.count }

    @inline(__always)
    private func peek() -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Consumes `byte` (after whitespace) if it is next.
    @inline(__always)
    mutating func consume(_ byte: UInt8) -> Bool {
        skipWhitespace()
        if index < bytes.count, bytes[index] == byte {
            index += 1
            return true
        }
        return false
    }

    mutating func expect(_ byte: UInt8, _ what: StaticString) throws(ProtocolError) {
        guard consume(byte) else { throw ProtocolError(.notJSON, "expected \(what)") }
    }

    /// The next value's kind, without consuming it.
    mutating func peekKind() throws(ProtocolError) -> JSONKind {
        skipWhitespace()
        guard let b = peek() else { throw ProtocolError(.notJSON, "unexpected end of line") }
        switch b {
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        default: throw ProtocolError(.notJSON, "unexpected character")
        }
    }

    // MARK: Strings

    /// A string token: where its content lies and whether it holds escapes.
    struct StringToken {
        var start: Int
        var end: Int
        var hasEscapes: Bool
    }

    /// Reads a string token, validating its UTF-8 and escapes, without building a `String`.
    mutating func readStringToken() throws(ProtocolError) -> StringToken {
        skipWhitespace()
        guard peek() == UInt8(ascii: "\"") else { throw ProtocolError(.notJSON, "expected a string") }
        index += 1
        let start = index
        var hasEscapes = false
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let token = StringToken(start: start, end: index, hasEscapes: hasEscapes)
                index += 1
                return token
            } else if b == UInt8(ascii: "\\") {
                hasEscapes = true
                try skipEscape()
            } else if b < 0x20 {
                throw ProtocolError(.notJSON, "control character in a string")
            } else if b < 0x80 {
                index += 1
            } else {
                try skipUTF8Sequence()
            }
        }
        throw ProtocolError(.notJSON, "unterminated string")
    }

    private mutating func skipEscape() throws(ProtocolError) {
        index += 1  // the backslash
        guard let e = peek() else { throw ProtocolError(.notJSON, "unterminated escape") }
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
             UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            index += 1
        case UInt8(ascii: "u"):
            index += 1
            let unit = try readHex4()
            if (0xD800...0xDBFF).contains(unit) {
                // A high surrogate must be followed by an escaped low surrogate.
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw ProtocolError(.invalidUTF8, "lone surrogate in \\u escape")
                }
                index += 2
                let low = try readHex4()
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw ProtocolError(.invalidUTF8, "lone surrogate in \\u escape")
                }
            } else if (0xDC00...0xDFFF).contains(unit) {
                throw ProtocolError(.invalidUTF8, "lone surrogate in \\u escape")
            }
        default:
            throw ProtocolError(.notJSON, "invalid escape")
        }
    }

    private mutating func readHex4() throws(ProtocolError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw ProtocolError(.notJSON, "short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
            default: throw ProtocolError(.notJSON, "bad hex digit in \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// Validates one multi-byte UTF-8 sequence (no overlongs, no surrogates, ≤ U+10FFFF).
    private mutating func skipUTF8Sequence() throws(ProtocolError) {
        let b0 = bytes[index]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw ProtocolError(.invalidUTF8, "invalid UTF-8 byte")
        }
        guard index + length <= bytes.count else { throw ProtocolError(.invalidUTF8, "truncated UTF-8 sequence") }
        let b1 = bytes[index + 1]
        guard b1 >= low, b1 <= high else { throw ProtocolError(.invalidUTF8, "invalid UTF-8 sequence") }
        for k in 2..<max(length, 2) {
            guard bytes[index + k] & 0xC0 == 0x80 else { throw ProtocolError(.invalidUTF8, "invalid UTF-8 sequence") }
        }
        index += length
    }

    /// True when the token's content is exactly `literal` (keys and type names are plain ASCII).
    @inline(__always)
    func token(_ token: StringToken, equals literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        let p = literal.utf8Start
        if token.hasEscapes {
            // Rare: "t\u0079pe" is still "type" (RFC 8259), so compare the decoded text.
            return string(token).utf8.elementsEqual(UnsafeBufferPointer(start: p, count: count))
        }
        guard token.end - token.start == count else { return false }
        for k in 0..<count where bytes[token.start + k] != p[k] {
            return false
        }
        return true
    }

    /// The token's content as a `String`, escapes decoded (the bytes were validated already).
    func string(_ token: StringToken) -> String {
        let slice = UnsafeRawBufferPointer(rebasing: bytes[token.start..<token.end])
        if !token.hasEscapes {
            return String(decoding: slice, as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(slice.count)
        var k = 0
        func hex4(_ at: Int) -> UInt32 {
            var v: UInt32 = 0
            for j in at..<at + 4 {
                let c = slice[j]
                let d: UInt8 = c <= UInt8(ascii: "9") ? c - 48 : (c | 0x20) - UInt8(ascii: "a") + 10
                v = v << 4 | UInt32(d)
            }
            return v
        }
        while k < slice.count {
            let b = slice[k]
            guard b == UInt8(ascii: "\\") else {
                out.append(b)
                k += 1
                continue
            }
            let e = slice[k + 1]
            k += 2
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(k)
                k += 4
                if (0xD800...0xDBFF).contains(scalar) {
                    let lowUnit = hex4(k + 2)
                    k += 6
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (lowUnit - 0xDC00)
                }
                out.append(contentsOf: UTF8.encode(Unicode.Scalar(scalar)!)!)
            default: out.append(e)  // \" \\ \/
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    mutating func readString() throws(ProtocolError) -> String {
        string(try readStringToken())
    }

    // MARK: Numbers

    /// Reads a JSON number. Integers of up to 15 digits are read without text; anything else
    /// goes through the standard library's parser. Out-of-range values (`1e400`) are refused.
    mutating func readNumber() throws(ProtocolError) -> Double {
        skipWhitespace()
        let start = index
        var negative = false
        if peek() == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard let first = peek(), first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else {
            throw ProtocolError(.notJSON, "bad number")
        }
        var integer: Int64 = 0
        var digits = 0
        if first == UInt8(ascii: "0") {
            index += 1
            digits = 1
        } else {
            while let c = peek(), c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") {
                if digits < 18 { integer = integer &* 10 &+ Int64(c - UInt8(ascii: "0")) }
                digits += 1
                index += 1
            }
        }
        var simple = digits <= 15
        if peek() == UInt8(ascii: ".") {
            simple = false
            index += 1
            guard try skipDigits() > 0 else { throw ProtocolError(.notJSON, "bad number") }
        }
        if let c = peek(), c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
            simple = false
            index += 1
            if let s = peek(), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") { index += 1 }
            guard try skipDigits() > 0 else { throw ProtocolError(.notJSON, "bad number") }
        }
        if simple {
            return negative ? -Double(integer) : Double(integer)
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw ProtocolError(.outOfRange, "number out of range")
        }
        return value
    }

    private mutating func skipDigits() throws(ProtocolError) -> Int {
        var n = 0
        while let c = peek(), c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") {
            index += 1
            n += 1
        }
        return n
    }

    // MARK: Literals and whole values

    mutating func readBool() throws(ProtocolError) -> Bool {
        skipWhitespace()
        if matchLiteral("true") { return true }
        if matchLiteral("false") { return false }
        throw ProtocolError(.notJSON, "bad literal")
    }

    mutating func readNull() throws(ProtocolError) {
        skipWhitespace()
        guard matchLiteral("null") else { throw ProtocolError(.notJSON, "bad literal") }
    }

    private mutating func matchLiteral(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        let p = literal.utf8Start
        for k in 0..<count where bytes[index + k] != p[k] {
            return false
        }
        index += count
        return true
    }

    /// Reads any value into a tree (used for `result` values, which are rare).
    /// `depth` counts the arrays and objects around the value; only a container can be too deep.
    mutating func readValue(depth: Int = 0) throws(ProtocolError) -> JSONValue {
        let kind = try peekKind()
        if kind == .array || kind == .object, depth >= Self.maxDepth {
            throw ProtocolError(.notJSON, "nested too deeply")
        }
        switch kind {
        case .string: return .string(try readString())
        case .number: return .number(try readNumber())
        case .bool: return .bool(try readBool())
        case .null:
            try readNull()
            return .null
        case .array:
            index += 1
            var items: [JSONValue] = []
            if consume(UInt8(ascii: "]")) { return .array(items) }
            repeat {
                items.append(try readValue(depth: depth + 1))
            } while consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "]"), "',' or ']'")
            return .array(items)
        case .object:
            index += 1
            var members: [(key: String, value: JSONValue)] = []
            if consume(UInt8(ascii: "}")) { return .object(members) }
            repeat {
                let key = try readString()
                try expect(UInt8(ascii: ":"), "':'")
                members.append((key, try readValue(depth: depth + 1)))
            } while consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "}"), "',' or '}'")
            return .object(members)
        }
    }

    /// Checks and steps over a value whose content is not needed (an unknown field).
    mutating func skipValue(depth: Int = 0) throws(ProtocolError) {
        let kind = try peekKind()
        if kind == .array || kind == .object, depth >= Self.maxDepth {
            throw ProtocolError(.notJSON, "nested too deeply")
        }
        switch kind {
        case .string: _ = try readStringToken()
        case .number: _ = try readNumber()
        case .bool: _ = try readBool()
        case .null: try readNull()
        case .array:
            index += 1
            if consume(UInt8(ascii: "]")) { return }
            repeat { try skipValue(depth: depth + 1) } while consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "]"), "',' or ']'")
        case .object:
            index += 1
            if consume(UInt8(ascii: "}")) { return }
            repeat {
                _ = try readStringToken()
                try expect(UInt8(ascii: ":"), "':'")
                try skipValue(depth: depth + 1)
            } while consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "}"), "',' or '}'")
        }
    }

    /// Starts reading the top-level object of a line.
    mutating func beginObject() throws(ProtocolError) {
        try expect(UInt8(ascii: "{"), "a JSON object")
    }

    /// The next member's key, or nil after the closing brace. The caller reads or skips the
    /// member's value before asking again; `first` is caller-held state, true at the start.
    mutating func nextKey(first: inout Bool) throws(ProtocolError) -> StringToken? {
        if first {
            first = false
            if consume(UInt8(ascii: "}")) { return nil }
        } else if !consume(UInt8(ascii: ",")) {
            try expect(UInt8(ascii: "}"), "',' or '}'")
            return nil
        }
        let key = try readStringToken()
        try expect(UInt8(ascii: ":"), "':'")
        return key
    }

    /// After the top-level object only whitespace may follow.
    mutating func finish() throws(ProtocolError) {
        skipWhitespace()
        guard atEnd else { throw ProtocolError(.notJSON, "text after the object") }
    }
}

enum JSONKind {
    case string, number, bool, null, array, object
}
