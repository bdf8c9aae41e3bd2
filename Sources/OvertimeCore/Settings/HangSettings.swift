import OvertimeProtocol

/// The readers and writers of the settings that shape hang detection (docs/hangs.md):
/// `window` (fixed or `auto`), `phase-window`, `on-stall`, `checkpoint-lead`.

/// A task's `window`: one fixed duration, or learned from its pace.
enum WindowSetting: Sendable, Equatable {
    /// `BudgetPolicy.unlimitedWindow` for `none`.
    case fixed(Duration)
    case learned(LearnedWindows)

    /// `5m`, `none`, `auto`, or `auto:MIN..MAX` (either end may be left out: `auto:2s..`).
    static func parse(_ text: String) throws(TaskSetting.ValueError) -> WindowSetting {
        let trimmed = text.trimmingSpaces
        guard trimmed.lowercased().hasPrefix("auto") else {
            do {
                return .fixed(try DurationText.parse(trimmed, allowNone: true) ?? BudgetPolicy.unlimitedWindow)
            } catch {
                throw .duration(error)
            }
        }
        let rest = trimmed.dropFirst(4)
        if rest.isEmpty { return .learned(.default) }
        let range = rest.dropFirst()
        // The first ".." (a bound may have a decimal point of its own: auto:0.5s..1m).
        guard rest.first == ":",
              let dot = range.indices.first(where: { range[$0] == "." && range[range.index(after: $0)...].first == "." }) else {
            throw .learnedRange(text)
        }
        let low = String(range[..<dot]).trimmingSpaces
        let high = String(range[range.index(dot, offsetBy: 2)...]).trimmingSpaces
        func bound(_ text: String, _ otherwise: Duration) throws(TaskSetting.ValueError) -> Duration {
            guard !text.isEmpty else { return otherwise }
            let bound: Duration?
            do {
                bound = try DurationText.parse(text)
            } catch {
                throw .duration(error)
            }
            guard let bound, bound > .zero else { throw .learnedRange(trimmed) }
            return bound
        }
        let bounds = LearnedWindows(minimum: try bound(low, LearnedWindows.default.minimum),
                                    maximum: try bound(high, LearnedWindows.default.maximum))
        guard bounds.minimum <= bounds.maximum else { throw .learnedRange(trimmed) }
        return .learned(bounds)
    }

    func apply(to policy: inout BudgetPolicy) {
        switch self {
        case let .fixed(window):
            policy.window = window
            policy.learnedWindows = nil
        case let .learned(bounds):
            policy.window = nil
            policy.learnedWindows = bounds
        }
    }

    /// What `--window` says for `policy`; nil when it has the default (the budget).
    static func option(for policy: BudgetPolicy) -> String? {
        if let learned = policy.learnedWindows {
            return "auto:\(learned.minimum.seconds)s..\(learned.maximum.seconds)s"
        }
        return policy.window.map { $0 == BudgetPolicy.unlimitedWindow ? "none" : "\($0.seconds)" }
    }
}

extension TaskSettingValues {
    /// `--phase-window NAME=DUR`, one more phase's window (`none`: no soft limit in it).
    mutating func readPhaseWindow(_ text: String) throws(TaskSetting.ValueError) {
        guard let eq = text.firstIndex(of: "="), let name = ChildLine.phaseName(String(text[..<eq])) else {
            throw .notPhaseWindow(text)
        }
        let window: Duration
        do {
            window = try DurationText.parse(String(text[text.index(after: eq)...]), allowNone: true) ?? BudgetPolicy.unlimitedWindow
        } catch {
            throw .duration(error)
        }
        phaseWindows = (phaseWindows ?? [:]).merging([name: window]) { _, new in new }
    }

    /// A job file's `phase-window`: an object of phase names and durations.
    mutating func readPhaseWindows(_ field: JobFileField, in fields: JobFileFields) {
        guard let given = fields.object(field, expected: "an object of phase names and their windows, e.g. {\"compile\": \"10m\"}") else {
            return
        }
        var windows: [String: Duration] = [:]
        for item in given {
            guard let name = ChildLine.phaseName(item.key) else {
                given.problem(item, "is not a phase name")
                continue
            }
            guard let limit = given.duration(item, allowNone: true, positive: true) else { continue }
            windows[name] = limit.duration ?? BudgetPolicy.unlimitedWindow
        }
        phaseWindows = windows
    }

    static func stallAction(_ text: String) throws(TaskSetting.ValueError) -> StallAction {
        guard let action = StallAction(rawValue: text.trimmingSpaces.lowercased()) else { throw .notStallAction(text) }
        return action
    }
}

extension TaskSetting {
    /// The options a phase window map writes back.
    static func phaseWindowOptions(_ windows: [String: Duration]) -> [String] {
        windows.sorted { $0.key < $1.key }.flatMap { name, window in
            ["--phase-window", "\(name)=\(window == BudgetPolicy.unlimitedWindow ? "none" : "\(window.seconds)")"]
        }
    }
}
