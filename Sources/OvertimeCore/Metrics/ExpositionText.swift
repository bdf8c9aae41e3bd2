/// Writes the Prometheus text exposition format, version 0.0.4: what `/metrics` serves and
/// what node_exporter's textfile collector reads.
///
/// A family is announced once (`# HELP`, `# TYPE`) and its samples follow it together, as
/// the format requires; the writer checks the order in debug builds. Label values and help
/// text are escaped here, so callers pass task names as they are.
public struct ExpositionText {
    public enum MetricType: String, Sendable {
        case counter, gauge
    }

    public private(set) var bytes: [UInt8]
    private var family: String?

    public init(capacity: Int = 4096) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Starts the family `name`: its help line and its type.
    public mutating func family(_ name: String, _ type: MetricType, help: String) {
        family = name
        append("# HELP ")
        append(name)
        bytes.append(UInt8(ascii: " "))
        for byte in help.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): append("\\\\")
            case UInt8(ascii: "\n"): append("\\n")
            default: bytes.append(byte)
            }
        }
        append("\n# TYPE ")
        append(name)
        bytes.append(UInt8(ascii: " "))
        append(type.rawValue)
        bytes.append(UInt8(ascii: "\n"))
    }

    /// One sample of the current family without labels: `name value`.
    public mutating func sample(_ name: String, _ value: Double) {
        sample(name, [:], value)
    }

    /// One sample of the current family with labels: `name{label="value",...} value`.
    public mutating func sample(_ name: String, _ labels: KeyValuePairs<String, String>, _ value: Double) {
        assert(family.map { name.hasPrefix($0) } ?? false, "\(name) written outside its family")
        append(name)
        if !labels.isEmpty {
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for (label, text) in labels {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                append(label)
                append("=\"")
                appendEscapedLabelValue(text)
                bytes.append(UInt8(ascii: "\""))
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: " "))
        append(Self.format(value))
        bytes.append(UInt8(ascii: "\n"))
    }

    /// A sample value as the format spells it: `NaN`, `+Inf`, `-Inf`, a whole number
    /// without a fraction (a count, a byte size, a whole second), else Swift's shortest
    /// round-tripping form, which Go's ParseFloat (Prometheus) reads exactly.
    public static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return value.description
    }

    private mutating func appendEscapedLabelValue(_ text: String) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): append("\\\\")
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\n"): append("\\n")
            default: bytes.append(byte)
            }
        }
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }
}
