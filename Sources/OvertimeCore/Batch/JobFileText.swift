import OvertimeProtocol

/// The wording of job file messages: how values are shown, which known name a typo was
/// meant to be, where in the text a JSON error sits.
package enum JobFileText {
    /// A value as a message shows it: strings quoted (and cut short), containers by kind.
    package static func show(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case let .bool(b): return b ? "true" : "false"
        case let .number(n): return number(n)
        case let .string(s): return quote(s)
        case let .array(items): return items.isEmpty ? "an empty array" : "an array"
        case let .object(members): return members.isEmpty ? "an empty object" : "an object"
        }
    }

    /// A number as written: `3`, `1.5`, `-1`.
    package static func number(_ n: Double) -> String {
        if n == n.rounded(), abs(n) < 1e15 { return String(Int64(n)) }
        return String(n)
    }

    /// `"text"`, JSON-style, at most 40 characters of it.
    package static func quote(_ s: String) -> String {
        "\"" + printable(s, limit: 40, escapingQuote: true) + "\""
    }

    /// Text from the file as it may be shown in a one-line message: control characters
    /// (a newline, an escape sequence) written as JSON escapes, so no message spans lines
    /// or reaches the terminal as a command; cut at `limit` characters.
    package static func printable(_ s: String, limit: Int = 60, escapingQuote: Bool = false) -> String {
        var shown = ""
        for (i, c) in s.unicodeScalars.enumerated() {
            if i == limit {
                shown += "…"
                break
            }
            switch c {
            case "\"" where escapingQuote: shown += "\\\""
            case "\\" where escapingQuote: shown += "\\\\"
            case "\n": shown += "\\n"
            case "\t": shown += "\\t"
            case "\r": shown += "\\r"
            case _ where c.value < 0x20 || (0x7F...0x9F).contains(c.value) || c == "\u{2028}" || c == "\u{2029}":
                let hex = String(c.value, radix: 16)
                shown += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: shown.unicodeScalars.append(c)
            }
        }
        return shown
    }

    /// `a, b or c`.
    package static func list(_ words: [String], _ conjunction: String = "or") -> String {
        switch words.count {
        case 0: return ""
        case 1: return words[0]
        default: return words.dropLast().joined(separator: ", ") + " \(conjunction) " + words.last!
        }
    }

    /// "; did you mean 'x'?" or nothing.
    package static func suggestion(for typo: String, among known: [String], synonyms: [String: String] = [:]) -> String {
        Spelling.closest(to: typo, among: known, synonyms: synonyms).map { "; did you mean '\($0)'?" } ?? ""
    }

    /// " (did you mean 'x'?)" (with the leading space) or nothing, for the middle of a sentence.
    package static func aside(for typo: String, among known: [String], synonyms: [String: String] = [:]) -> String {
        Spelling.closest(to: typo, among: known, synonyms: synonyms).map { " (did you mean '\($0)'?)" } ?? ""
    }

    // MARK: JSON syntax errors

    /// "not JSON: … at line L, column C" for a reader error, with a hint for the usual
    /// mistakes (a trailing comma, a comment, single quotes, a bare key).
    package static func syntaxProblem(_ error: JSONDocumentError, in bytes: [UInt8]) -> String {
        var message = error.problem.message
        if error.problem.kind == .invalidUTF8 {
            message += " (a job file must be UTF-8 text)"
        }
        // The reader speaks of lines (its usual input is the channel); this is a file.
        message = message.replacing("end of line", with: "end of file")
        let at = min(error.offset, bytes.count)
        var text = "not JSON: \(message) at \(position(of: at, in: bytes))"
        if let hint = hint(at: at, in: bytes) { text += "; \(hint)" }
        if let line = excerpt(around: at, in: bytes) { text += " (the line reads: \(line))" }
        return text
    }

    /// "line L, column C", both from 1; a column counts characters, not bytes.
    package static func position(of offset: Int, in bytes: [UInt8]) -> String {
        TextPosition(of: offset, in: bytes).description
    }

    private static func isSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    private static func hint(at offset: Int, in bytes: [UInt8]) -> String? {
        guard offset < bytes.count else {
            return "the file ends early: is a closing '}' or ']' missing?"
        }
        let here = bytes[offset]
        var back = offset - 1
        while back >= 0, isSpace(bytes[back]) { back -= 1 }
        let before: UInt8? = back >= 0 ? bytes[back] : nil
        switch here {
        case UInt8(ascii: "}") where before == UInt8(ascii: ","), UInt8(ascii: "]") where before == UInt8(ascii: ","):
            return "a trailing comma at \(position(of: back, in: bytes)): JSON allows none before '\(Character(Unicode.Scalar(here)))'"
        case UInt8(ascii: "/"), UInt8(ascii: "#"):
            return "JSON has no comments"
        case UInt8(ascii: "'"):
            return "JSON strings take double quotes"
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"):
            if before == UInt8(ascii: "{") || before == UInt8(ascii: ",") {
                return "field names take double quotes"
            }
            return "text values (durations such as 30s too) take double quotes"
        case UInt8(ascii: "\""):
            if let before, before == UInt8(ascii: "}") || before == UInt8(ascii: "]") || before == UInt8(ascii: "\"")
                || (before >= UInt8(ascii: "0") && before <= UInt8(ascii: "9")) || before == UInt8(ascii: "e") {
                return "is a comma missing before it?"
            }
            return nil
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            if let before, before == UInt8(ascii: "}") || before == UInt8(ascii: "]") || before == UInt8(ascii: "\"") {
                return "is a comma missing before it?"
            }
            return nil
        default:
            return nil
        }
    }

    /// The offending line, trimmed and cut to 60 characters.
    package static func excerpt(around offset: Int, in bytes: [UInt8]) -> String? {
        var start = min(offset, bytes.count)
        while start > 0, bytes[start - 1] != UInt8(ascii: "\n") { start -= 1 }
        var end = min(offset, bytes.count)
        while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
        let line = String(decoding: bytes[start..<end], as: UTF8.self).trimmingSpaces
        guard !line.isEmpty else { return nil }
        return line.count > 60 ? String(line.prefix(60)) + "…" : line
    }
}
