/// One setting of a task, declared once: its key in a job file (in a task and in
/// `defaults`), its options on `overtime run` with their help, how each form is read into
/// `TaskSettingValues`, and how a task's settings are written back as `overtime run`
/// options (for the run an executor starts on another node).
///
/// `TaskSetting.all` is read by `overtime run`'s parser, its help and its did-you-mean, by
/// the job file's decoder and its list of fields, and by the remote launcher: a new setting
/// is one declaration there, and its rows in docs/jobfile.md and the help.
public struct TaskSetting: Sendable {
    /// Where a setting's options sit in `overtime run --help`.
    public enum Section: Sendable {
        case budget, reporting, environment, isolation, containment
        /// A batch's alone (pools, retries): no option on `overtime run`.
        case scheduling
    }

    /// An option of `overtime run` for a setting.
    public struct Option: Sendable {
        /// `--budget`.
        public let name: String
        /// What its value is called in the help (`DUR`); nil for a flag, which takes none.
        public let valueName: String?
        /// What it does, in the help's words (lines after the first are indented to match).
        let help: String
        let read: @Sendable (inout TaskSettingValues, String, AccountLookup) throws(ValueError) -> Void
    }

    /// A value an option's reader refused; the option's name goes before its message.
    public enum ValueError: Error, Sendable, Equatable, CustomStringConvertible {
        case duration(DurationText.ParseError)
        /// A duration that must be above 0 (`--diagnose-limit`).
        case notAboveZero
        case size(ByteSize.ParseError)
        /// A user, group, limit or nice value.
        case isolation(TaskIsolation.ParseError)
        case neitherOnNorOff(String)
        case notADescriptor(String)
        case notNameValue(String)
        case noCommand
        /// `--window auto:…` without a range of two durations above 0, the least first.
        case learnedRange(String)
        /// `--phase-window` not NAME=DUR.
        case notPhaseWindow(String)
        /// `--on-stall` neither cancel nor warn.
        case notStallAction(String)

        public var message: String {
            switch self {
            case let .duration(error): error.message
            case .notAboveZero: "must be above 0"
            case let .size(error): error.description
            case let .isolation(error): error.message
            case let .neitherOnNorOff(text): "'\(text)' is neither on nor off"
            case let .notADescriptor(text):
                "'\(text)' is not a descriptor from \(Readiness.notifyFDRange.lowerBound) to \(Readiness.notifyFDRange.upperBound) (0 to 2 are CMD's standard streams, 3 its channel)"
            case let .notNameValue(text): "'\(text)' is not NAME=VALUE"
            case .noCommand: "needs a command"
            case let .learnedRange(text):
                "'\(text)' is not auto, nor auto:MIN..MAX with MIN no more than MAX (e.g. auto:1s..10m, auto:2s..)"
            case let .notPhaseWindow(text): "'\(text)' is not PHASE=DUR (e.g. compile=10m, eval=none)"
            case let .notStallAction(text): "'\(text)' is neither cancel nor warn"
            }
        }

        public var description: String { message }

        /// The message after the option's name: "--diagnose needs a command",
        /// "--grace: '1x' has an unknown unit 'x'; …".
        public func message(option: String) -> String {
            switch self {
            case .noCommand, .notAboveZero: "\(option) \(message)"
            default: "\(option): \(message)"
            }
        }
    }

    /// A value as each form writes it (with any setting it needs), for the test that
    /// they agree.
    public struct Example: Sendable {
        /// The option words on `overtime run`; empty for a setting with no option.
        public let options: [String]
        /// The fields of a job file's task, as a JSON object.
        public let fields: String
    }

    public let key: String
    let section: Section
    public let options: [Option]
    public let example: Example
    /// Reads the job file's field into the values (its problems go to the file's report).
    let readField: @Sendable (inout TaskSettingValues, JobFileField, JobFileFields, JobFileDecoder) -> Void
    /// The options that give a task these settings, where they differ from the defaults.
    let writeOptions: @Sendable (TaskSettings) -> [String]

    // MARK: Reading the table

    /// The setting with this job-file key.
    static func setting(forKey key: String) -> TaskSetting? {
        byKey[key]
    }

    private static let byKey: [String: TaskSetting] = Dictionary(uniqueKeysWithValues: all.map { ($0.key, $0) })

    /// The option of `overtime run` with this name.
    public static func option(named name: String) -> Option? {
        byOption[name]
    }

    private static let byOption: [String: Option] = Dictionary(uniqueKeysWithValues: all.flatMap(\.options).map { ($0.name, $0) })

    /// Every setting's options on `overtime run`, in the table's order.
    public static let optionNames = all.flatMap(\.options).map(\.name)

    /// Every job-file key, in the table's order.
    static let keys = all.map(\.key)

    /// The help's lines for the options of `section`: a name and its value in a column of
    /// 21, then what it does.
    public static func help(_ section: Section) -> String {
        let indent = String(repeating: " ", count: 23)
        return all.filter { $0.section == section }.flatMap(\.options).map { option in
            let label = "  " + option.name + (option.valueName.map { " " + $0 } ?? "")
            let lines = option.help.split(separator: "\n", omittingEmptySubsequences: false)
            let first = label.count < indent.count
                ? label + String(repeating: " ", count: indent.count - label.count) + lines[0]
                : label + "\n" + indent + lines[0]
            return ([first] + lines.dropFirst().map { indent + $0 }).joined(separator: "\n")
        }.joined(separator: "\n")
    }

    /// The `overtime run` options that give a task `settings` (the defaults left out).
    public static func options(for settings: TaskSettings) -> [String] {
        all.flatMap { $0.writeOptions(settings) }
    }
}
