/// What the terminal can show, decided once from the environment.
struct DisplayCapabilities: Sendable, Equatable {
    /// Every environment variable the display reads (here, in `ResolvedProgressMode` and in
    /// `TerminalDevice.size`): the CLI hands it these alone (`ProcessEnvironment.values`),
    /// not a copy of the whole environment. A variable read anywhere in the display belongs
    /// in this list.
    static let environmentNames = ["NO_COLOR", "TERM", "LC_ALL", "LC_CTYPE", "LANG", "COLUMNS", "LINES"]

    /// SGR colours and attributes (off under `NO_COLOR`).
    var color: Bool
    /// Unicode blocks and braille spinners (off without a UTF-8 locale: ASCII instead).
    var unicode: Bool


    /// - `NO_COLOR` set to anything but the empty string turns colour off (no-color.org).
    /// - The locale is the first set of `LC_ALL`, `LC_CTYPE`, `LANG` (POSIX precedence);
    ///   Unicode only when it names UTF-8.
    static func detect(environment: [String: String]) -> DisplayCapabilities {
        let noColor = !(environment["NO_COLOR"] ?? "").isEmpty
        let term = environment["TERM"] ?? ""
        var locale = ""
        for name in ["LC_ALL", "LC_CTYPE", "LANG"] {
            if let value = environment[name], !value.isEmpty {
                locale = value
                break
            }
        }
        let lower = locale.lowercased()
        let unicode = lower.contains("utf-8") || lower.contains("utf8")
        return DisplayCapabilities(color: !noColor && term != "dumb", unicode: unicode)
    }
}

/// The progress mode in force once `auto` is settled.
enum ResolvedProgressMode: Sendable, Equatable {
    case tty, plain, json, none

    /// `auto` is `tty` when stderr is a terminal (and `TERM` is not `dumb`), else `plain`;
    /// but as PID 1 (a container's entrypoint, `docker run -it … bash`) it is `plain`, so
    /// the task keeps the terminal, as under tini. An explicit `tty` is honoured even when
    /// stderr is not a terminal (the rows are drawn at 80 columns, or `COLUMNS`), except
    /// under `TERM=dumb`, which cannot move the cursor: then it is `plain`.
    static func resolve(_ requested: RunCommand.ProgressMode, stderrIsTerminal: Bool, environment: [String: String],
                        isInit: Bool = false) -> ResolvedProgressMode {
        let dumb = environment["TERM"] == "dumb"
        switch requested {
        case .json: return .json
        case .none: return .none
        case .plain: return .plain
        case .tty: return dumb ? .plain : .tty
        case .auto: return stderrIsTerminal && !dumb && !isInit ? .tty : .plain
        }
    }
}
