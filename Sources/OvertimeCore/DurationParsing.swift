/// Parses and prints durations the way users write them: `250ms`, `30s`, `1.5s`, `5m`,
/// `2h`, `1h30m`, `1d`, a bare number (seconds), and `none` where a limit may be absent.
public enum DurationText {
    /// Why a text is not a duration. Each case keeps the text as given (untrimmed), which
    /// its message quotes.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Nothing but spaces.
        case empty
        /// `none` where a limit must be given.
        case noneNotAllowed
        /// A leading minus sign.
        case negative(String)
        /// Not a number with units: stray characters, a malformed number.
        case notADuration(String)
        /// A unit that is not `ms`, `s`, `m`, `h` or `d`.
        case unknownUnit(String, unit: String)
        /// A unit given twice, or a smaller one before a larger (`1s1h`).
        case misorderedUnits(String)
        /// Longer than `DurationText.maximum`.
        case tooLong(String)

        /// What was wrong and what would be right, e.g. "'-1s' is negative; expected …".
        public var message: String {
            switch self {
            case .empty: "an empty value is not a duration; expected \(examples)"
            case .noneNotAllowed: "'none' is not allowed here; expected \(examples)"
            case let .negative(text): "'\(text)' is negative; expected \(examples)"
            case let .notADuration(text): "'\(text)' is not a duration; expected \(examples)"
            case let .unknownUnit(text, unit): "'\(text)' has an unknown unit '\(unit)'; expected \(examples)"
            case let .misorderedUnits(text): "'\(text)' repeats or misorders its units; write larger units first, as in 1h30m"
            case let .tooLong(text): "'\(text)' is too long; the longest duration is 100 years"
            }
        }

        public var description: String { message }
    }

    /// What a valid duration looks like, for error messages.
    public static let examples = "a duration such as 30s, 1.5s, 250ms, 5m or 1h30m"

    /// The longest duration accepted: 100 years is "forever" for any budget, and it keeps
    /// every deadline arithmetic far from overflow.
    public static let maximum = Duration.seconds(100 * 365 * 24 * 3600)

    /// Parses a duration; `none` (when `allowNone`) yields nil, and so does any zero (`0`,
    /// `0s`): as with GNU `timeout 0`, a limit of nothing is no limit.
    /// - Throws: `ParseError` naming what was wrong.
    public static func parse(_ text: String, allowNone: Bool = false) throws(ParseError) -> Duration? {
        let trimmed = text.trimmingSpaces
        if trimmed.isEmpty {
            throw .empty
        }
        if trimmed.lowercased() == "none" {
            guard allowNone else { throw .noneNotAllowed }
            return nil
        }
        if trimmed.hasPrefix("-") {
            throw .negative(text)
        }
        var totalNanoseconds: Double = 0
        var rest = Substring(trimmed)
        var lastUnitRank = Int.max
        while !rest.isEmpty {
            let numberText = rest.prefix(while: { $0.isASCII && ($0.isNumber || $0 == ".") })
            guard !numberText.isEmpty, numberText.filter({ $0 == "." }).count <= 1,
                  numberText.first != ".", numberText.last != ".",
                  let number = Double(numberText)
            else {
                throw .notADuration(text)
            }
            rest = rest.dropFirst(numberText.count)
            let unitText = rest.prefix(while: { $0.isLetter })
            rest = rest.dropFirst(unitText.count)
            let unit: (rank: Int, nanoseconds: Double)
            switch unitText {
            case "" where rest.isEmpty && lastUnitRank == .max: unit = (3, 1e9)  // bare number: seconds
            case "ms": unit = (1, 1e6)
            case "s": unit = (3, 1e9)
            case "m": unit = (4, 60e9)
            case "h": unit = (5, 3600e9)
            case "d": unit = (6, 86_400e9)
            default:
                throw .unknownUnit(text, unit: String(unitText))
            }
            guard unit.rank < lastUnitRank else {
                throw .misorderedUnits(text)
            }
            lastUnitRank = unit.rank
            totalNanoseconds += number * unit.nanoseconds
        }
        guard totalNanoseconds.isFinite, totalNanoseconds <= Double(maximum.nanoseconds) else {
            throw .tooLong(text)
        }
        // Zero as written (`0`, `0s`, `0ms`), not a tiny value that rounds to it.
        if allowNone, totalNanoseconds == 0 { return nil }
        return .nanoseconds(Int64(totalNanoseconds.rounded()))
    }

    /// A short human form: `850ms`, `12.5s`, `4m05s`, `2h00m`.
    public static func format(_ d: Duration) -> String {
        let ms = d.nanoseconds / 1_000_000
        if ms < 0 { return "-" + format(.nanoseconds(-d.nanoseconds)) }
        if ms < 1000 { return "\(ms)ms" }
        if ms < 60_000 {
            let tenths = (ms + 50) / 100
            return tenths % 10 == 0 ? "\(tenths / 10)s" : "\(tenths / 10).\(tenths % 10)s"
        }
        let totalSeconds = (ms + 500) / 1000
        if totalSeconds < 3600 {
            return "\(totalSeconds / 60)m" + twoDigits(totalSeconds % 60) + "s"
        }
        return "\(totalSeconds / 3600)h" + twoDigits((totalSeconds % 3600) / 60) + "m"
    }

    private static func twoDigits(_ n: Int64) -> String {
        n < 10 ? "0\(n)" : "\(n)"
    }
}

extension String {
    package var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s = s.dropFirst() }
        while let c = s.last, c.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
