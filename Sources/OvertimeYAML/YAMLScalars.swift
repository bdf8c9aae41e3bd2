import OvertimeProtocol

/// What a scalar means: YAML 1.2's core schema for plain scalars, and the standard tags a
/// job file may use to say so explicitly.
///
/// The core schema, not YAML 1.1's: `yes`, `no`, `on`, `off` are strings (a country code
/// `no` stays `"no"`), `0777` is the decimal 777, `1_000` is a string.
enum YAMLScalars {
    /// The `tag:yaml.org,2002:` tags a job file may carry, by their short name.
    static let allowedTags: Set = ["str", "int", "float", "bool", "null", "map", "seq"]
    static let standardPrefix = "tag:yaml.org,2002:"

    /// `tag` as written: `!!str` for `tag:yaml.org,2002:str`.
    static func shortTag(_ tag: String) -> String {
        tag.hasPrefix(standardPrefix) ? "!!" + tag.dropFirst(standardPrefix.count) : tag
    }

    /// A plain, untagged scalar: null, a bool, a number, or else a string.
    static func resolvePlain(_ text: String) -> JSONValue {
        guard let first = text.utf8.first else { return .null }
        switch first {
        case UInt8(ascii: "~"), UInt8(ascii: "n"), UInt8(ascii: "N"):
            if isNull(text) { return .null }
        case UInt8(ascii: "t"), UInt8(ascii: "T"), UInt8(ascii: "f"), UInt8(ascii: "F"):
            if let b = bool(text) { return .bool(b) }
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."):
            if let n = integer(text) ?? float(text) { return .number(n) }
        default:
            break
        }
        return .string(text)
    }

    /// A scalar with an explicit tag (`!!int "3"`); nil when the text is not one of that
    /// tag's values.
    static func resolve(_ text: String, tag: String) -> JSONValue? {
        switch tag {
        case "str": return .string(text)
        case "int": return integer(text).map(JSONValue.number)
        case "float": return (integer(text) ?? float(text)).map(JSONValue.number)
        case "bool": return bool(text).map(JSONValue.bool)
        case "null": return isNull(text) ? .null : nil
        default: return nil
        }
    }

    static func isNull(_ text: String) -> Bool {
        text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL"
    }

    static func bool(_ text: String) -> Bool? {
        switch text {
        case "true", "True", "TRUE": true
        case "false", "False", "FALSE": false
        default: nil
        }
    }

    /// `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+`.
    static func integer(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        if bytes.count > 2, bytes[0] == UInt8(ascii: "0") {
            if bytes[1] == UInt8(ascii: "o") { return digits(bytes[2...], radix: 8) }
            if bytes[1] == UInt8(ascii: "x") { return digits(bytes[2...], radix: 16) }
        }
        let unsigned = bytes.first == UInt8(ascii: "-") || bytes.first == UInt8(ascii: "+") ? bytes[1...] : bytes[...]
        guard !unsigned.isEmpty, unsigned.allSatisfy(isDigit) else { return nil }
        return Double(text)
    }

    /// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, `[-+]?\.(inf|Inf|INF)`,
    /// `\.(nan|NaN|NAN)`.
    static func float(_ text: String) -> Double? {
        var rest = Substring(text)
        var sign = 1.0
        if let s = rest.first, s == "-" || s == "+" {
            sign = s == "-" ? -1 : 1
            rest = rest.dropFirst()
        }
        if rest == ".inf" || rest == ".Inf" || rest == ".INF" { return sign * .infinity }
        if rest.count == text.count, rest == ".nan" || rest == ".NaN" || rest == ".NAN" { return .nan }
        let u = Array(rest.utf8)
        var i = 0
        let whole = run(u, from: &i)
        var fraction = 0
        if i < u.count, u[i] == UInt8(ascii: ".") {
            i += 1
            fraction = run(u, from: &i)
            // `.5` and `5.` are numbers, a lone `.` is not.
            guard whole > 0 || fraction > 0 else { return nil }
        } else if whole == 0 {
            return nil
        }
        if i < u.count, u[i] == UInt8(ascii: "e") || u[i] == UInt8(ascii: "E") {
            i += 1
            if i < u.count, u[i] == UInt8(ascii: "-") || u[i] == UInt8(ascii: "+") { i += 1 }
            guard run(u, from: &i) > 0 else { return nil }
        }
        guard i == u.count else { return nil }
        return Double(text)
    }

    private static func isDigit(_ b: UInt8) -> Bool {
        b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
    }

    /// How many digits start at `i`, stepping over them.
    private static func run(_ u: [UInt8], from i: inout Int) -> Int {
        let start = i
        while i < u.count, isDigit(u[i]) { i += 1 }
        return i - start
    }

    private static func digits(_ text: ArraySlice<UInt8>, radix: Int) -> Double? {
        var value = 0.0
        for b in text {
            let digit: Int
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = Int(b - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = Int(b - UInt8(ascii: "A")) + 10
            default: return nil
            }
            guard digit < radix else { return nil }
            value = value * Double(radix) + Double(digit)
        }
        return value
    }
}
