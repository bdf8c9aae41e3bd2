/// A task's fields as read, and the settings made of them and of `defaults`, shared.
extension JobFileDecoder {
    /// The fields of a task or of `defaults`, as given (nil: not given, or not readable).
    struct TaskFields {
        var command: [String]?
        var commandMadeBy: String?
        var after: [Dependency]?
        var settings = TaskSettingValues()
        var sweep = SweepFields()
        var peerGroup: String?
        var stragglers: StragglerPolicy?
    }

    /// A task's settings, `own` laid over `defaults`, as one copy shared with other tasks:
    /// the defaults' alone for a task that gives none of its own (`givesAny`), which is most
    /// tasks of a large file, else the copy of the task read before when they are equal
    /// (neighbouring tasks mostly differ in name and command only).
    mutating func sharedSettings(_ own: TaskFields, over defaults: TaskFields, givesAny: Bool) -> Shared<TaskSettings> {
        if !givesAny, let defaultSettings { return defaultSettings }
        let settings = own.settings.settings(over: defaults.settings)
        if !givesAny {
            defaultSettings = Shared(settings)
            return defaultSettings!
        }
        if let last = lastSettings, last.value == settings { return last }
        lastSettings = Shared(settings)
        return lastSettings!
    }
}
