import Overtime
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A usage mistake: one line saying what was wrong and what would be right. Exit 125.
struct UsageError: Error {
    var message: String
}

/// `--help` was asked for: print this and exit 0.
struct HelpRequest: Error {
    var text: String
}

/// Reads command-line arguments the way GNU tools do: `--name value`, `--name=value`,
/// flags, and `--` (or the first non-option word) ending the options.
struct ArgumentCursor {
    enum Token: Equatable {
        case option(String, inlineValue: String?)
        case word(String)
        case endOfOptions
    }

    private var remaining: ArraySlice<String>
    let command: String

    init(_ arguments: ArraySlice<String>, command: String) {
        remaining = arguments
        self.command = command
    }

    /// Everything not yet read.
    var rest: [String] { Array(remaining) }

    mutating func next() -> Token? {
        guard let arg = remaining.popFirst() else { return nil }
        if arg == "--" { return .endOfOptions }
        if arg.hasPrefix("--"), arg.count > 2 {
            let body = arg.dropFirst(2)
            if let eq = body.firstIndex(of: "=") {
                return .option("--" + body[..<eq], inlineValue: String(body[body.index(after: eq)...]))
            }
            return .option(arg, inlineValue: nil)
        }
        if arg.hasPrefix("-"), arg.count > 1 {
            return .option(arg, inlineValue: nil)
        }
        return .word(arg)
    }

    /// The value of `option`: the inline `=value`, else the next argument.
    mutating func value(of option: String, inline: String?) throws(UsageError) -> String {
        if let inline { return inline }
        guard let value = remaining.popFirst() else {
            throw UsageError(message: "\(command): \(option) needs a value")
        }
        // `--user -- CMD`: the value was forgotten; taking `--` would run CMD as its
        // options' value (or report "no such user: --"). Write --name=-- to mean it.
        if value == "--" {
            throw UsageError(message: "\(command): \(option) needs a value before '--'")
        }
        return value
    }

    /// Pushes a word back (the first word of the command).
    mutating func unread(_ word: String) {
        remaining.insert(word, at: remaining.startIndex)
    }
}

/// "; did you mean --budget?" for a mistyped option, when one known option is close.
func suggestion(for typo: String, among known: [String]) -> String {
    Spelling.closest(to: typo, among: known).map { "; did you mean \($0)?" } ?? ""
}

/// `--shutdown-grace DUR`, else `OVERTIME_SHUTDOWN_GRACE` (set it from Kubernetes'
/// terminationGracePeriodSeconds), else none.
func parseShutdownGrace(option: String?, command: String) throws(UsageError) -> Duration? {
    let (text, source): (String?, String) = option.map { ($0, "--shutdown-grace") }
        ?? (getenv("OVERTIME_SHUTDOWN_GRACE").map { String(cString: $0) }, "OVERTIME_SHUTDOWN_GRACE")
    guard let text else { return nil }
    do {
        guard let grace = try DurationText.parse(text) else { return nil }
        return grace
    } catch {
        throw UsageError(message: "\(command): \(source): \(error.message)")
    }
}

/// `--cgroup auto|off` (DESIGN §7).
func parseContainment(_ text: String, command: String) throws(UsageError) -> Containment.Request {
    switch text.lowercased() {
    case "auto", "on", "yes": return .automatic
    case "off", "no", "none": return .off
    default: throw UsageError(message: "\(command): --cgroup: '\(text)' is neither auto nor off")
    }
}

/// An option that is on or off (`--python-bridge`, as `TaskSetting.onOff` reads a task's).
func parseSwitch(_ text: String, option: String, command: String) throws(UsageError) -> Bool {
    do {
        return try TaskSetting.onOff(text)
    } catch {
        throw UsageError(message: "\(command): \(option): \(error.message)")
    }
}

/// The Python bridge for `--python-bridge`: the bundled one beside this binary when on.
func pythonBridge(on: Bool) -> String? {
    on ? PythonBridge.besideExecutable() : nil
}
