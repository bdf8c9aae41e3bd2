/// The memory rules of one task (DESIGN §7). Values, not behaviour: `TaskMachine` applies
/// them to the samples the executor feeds it.
public struct MemoryPolicy: Sendable, Equatable {
    /// Cancel with reason `memory` when the task's memory reaches this many bytes; nil for
    /// no watchdog.
    public var max: UInt64?
    /// When to send the one `warning`: a size, or a share of `max`.
    public var warn: WarnLevel

    public enum WarnLevel: Sendable, Equatable {
        case bytes(UInt64)
        /// A share of `max`, 0 < share ≤ 1.
        case share(Double)
    }

    /// The default warning level: 90% of the max.
    public static let defaultWarn = WarnLevel.share(0.9)

    public init(max: UInt64? = nil, warn: WarnLevel = MemoryPolicy.defaultWarn) {
        self.max = max
        self.warn = warn
    }

    /// No watchdog.
    public static let none = MemoryPolicy()

    /// The warning level in bytes; nil without a max (a warning is about the cancel to come).
    public var warnBytes: UInt64? {
        guard let max else { return nil }
        switch warn {
        case let .bytes(bytes): return Swift.min(bytes, max)
        case let .share(share): return UInt64(Double(max) * Swift.min(1, Swift.max(0, share)))
        }
    }

    /// How far above `max` a memory cgroup's hard limit sits: the watchdog cancels at `max`,
    /// and the kernel stops only a burst the watchdog could not see coming, inside the task.
    /// 10% of the max, at least 32 MiB.
    public var hardLimit: UInt64? {
        max.map { $0 + Swift.max($0 / 10, 32 << 20) }
    }

    /// Parses `--memory-warn`: a size (`1.5G`) or a percentage of the max (`80%`).
    public static func parseWarn(_ text: String) throws(ByteSize.ParseError) -> WarnLevel {
        let trimmed = text.trimmingSpaces
        if trimmed.hasSuffix("%") {
            guard let percent = Double(trimmed.dropLast()), percent > 0, percent <= 100 else {
                throw .notAWarningLevel(text)
            }
            return .share(percent / 100)
        }
        do {
            return .bytes(try ByteSize.parse(trimmed))
        } catch {
            throw .notAWarningLevel(text)
        }
    }
}

/// Sizes as users write them: `200M`, `1.5G`, `512MiB`, `4096` (bytes). Binary units
/// (K = 1024), as `ulimit`, Docker and Kubernetes' `Mi`/`Gi` read them; `Mi`/`Gi` are taken too.
public enum ByteSize {
    /// Why a text is not a size, or not a warning level (`MemoryPolicy.parseWarn`). Each
    /// case keeps the text as given, which its description quotes.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Not a positive number with a known unit, or too large.
        case notASize(String)
        /// Neither a size nor a percentage above 0 and at most 100.
        case notAWarningLevel(String)

        public var description: String {
            switch self {
            case let .notASize(text): "'\(text)' is not a size; expected \(expected)"
            case let .notAWarningLevel(text):
                "'\(text)' is not a warning level; expected a size such as 1.5G or a percentage of the max such as 80%"
            }
        }
    }

    /// What a size looks like, for messages and help.
    public static let expected = "a size such as 512M, 1.5G or 2GiB"

    public static func parse(_ text: String) throws(ParseError) -> UInt64 {
        let problem = ParseError.notASize(text)
        let trimmed = text.trimmingSpaces
        let number = trimmed.prefix(while: { $0.isASCII && ($0.isNumber || $0 == ".") })
        guard !number.isEmpty, let value = Double(number), value.isFinite, value > 0 else { throw problem }
        let shift: Double
        switch String(trimmed.dropFirst(number.count)).trimmingSpaces.lowercased() {
        case "", "b": shift = 0
        case "k", "kb", "kib", "ki": shift = 10
        case "m", "mb", "mib", "mi": shift = 20
        case "g", "gb", "gib", "gi": shift = 30
        case "t", "tb", "tib", "ti": shift = 40
        default: throw problem
        }
        let bytes = (value * Double(sign: .plus, exponent: Int(shift), significand: 1)).rounded(.up)
        guard bytes >= 1, bytes < 9.2e18 else { throw problem }
        return UInt64(bytes)
    }

    /// `209715200` → "200 MiB", for messages and displays.
    public static func text(_ bytes: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let tenths = (value * 10).rounded() / 10
        let shown = tenths == tenths.rounded() ? String(Int(tenths)) : String(tenths)
        return "\(shown) \(units[unit])"
    }
}

/// A command run before a limit's cancel (`--diagnose`, DESIGN §7): it sees the task still
/// as it hung (`py-spy dump --pid {pid} --subprocesses`, `gdb -p {pid} -batch -ex 'thread apply all bt'`,
/// `jstack {pid}`, `nvidia-smi`), its output goes where the task's stderr goes, and the
/// cancel waits for it at most `limit`.
public struct DiagnoseCommand: Sendable, Equatable {
    /// A shell command; `{pid}` stands for the task's leader.
    public var template: String
    public var limit: Duration

    /// Long enough for py-spy or gdb to attach and walk the threads of a big process.
    public static let defaultLimit = Duration.seconds(10)

    public init(_ template: String, limit: Duration = DiagnoseCommand.defaultLimit) {
        self.template = template
        self.limit = limit
    }

    /// The command for the leader `pid`.
    public func command(pid: Int32) -> String {
        template.split(separator: "{pid}", omittingEmptySubsequences: false).joined(separator: String(pid))
    }
}
