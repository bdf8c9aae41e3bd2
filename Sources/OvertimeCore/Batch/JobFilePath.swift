/// Paths in a job file, as text: the pure half (reading the file and the current directory
/// are the engine's, `Overtime`'s JobFileLoading).
package enum JobFilePath {
    /// `path` if absolute, else `base/path`; `.` components and doubled slashes are
    /// dropped, `..` is left for the kernel (it may cross a symbolic link).
    package static func resolve(_ path: String, against base: String) -> String {
        normalize(path.hasPrefix("/") ? path : base + "/" + path)
    }

    package static func normalize(_ path: String) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        let joined = parts.joined(separator: "/")
        return path.hasPrefix("/") ? "/" + joined : (joined.isEmpty ? "." : joined)
    }
}

/// What decoding a job file asks of the machine it is read on, given by the caller (the
/// engine gives this machine's, `JobFileHost.system`; a test may give its own).
public struct JobFileHost: Sendable {
    public var accounts: AccountLookup
    /// What is wrong with a task's command (not found on its `PATH`, not executable), or
    /// nil when it is there; nil: commands are not looked up (a file read only to be read).
    /// Asked once for each program among tasks whose settings (environment, directory) are
    /// one shared copy, not once a task: the answer may depend on the task's settings, not
    /// on its name.
    public var commandProblem: (@Sendable (_ program: String, _ task: JobTask) -> String?)?

    public init(accounts: AccountLookup, commandProblem: (@Sendable (_ program: String, _ task: JobTask) -> String?)? = nil) {
        self.accounts = accounts
        self.commandProblem = commandProblem
    }
}

/// The account and group databases, by name or number.
public struct AccountLookup: Sendable {
    public var user: @Sendable (String) throws(TaskIsolation.ParseError) -> Account
    public var group: @Sendable (String) throws(TaskIsolation.ParseError) -> UInt32

    public init(user: @escaping @Sendable (String) throws(TaskIsolation.ParseError) -> Account,
                group: @escaping @Sendable (String) throws(TaskIsolation.ParseError) -> UInt32) {
        self.user = user
        self.group = group
    }
}
