/// A resource limit a task runs under (`setrlimit` in the child before exec).
public struct ResourceLimit: Sendable, Equatable {
    public enum Resource: String, Sendable, CaseIterable {
        /// RLIMIT_AS: bytes of address space.
        case addressSpace = "as"
        /// RLIMIT_NOFILE: open descriptors.
        case openFiles = "nofile"
        /// RLIMIT_CPU: seconds of CPU time (SIGXCPU at the soft limit, SIGKILL at the hard).
        case cpuSeconds = "cpu"
        /// RLIMIT_NPROC: processes (threads) of the task's user.
        case processes = "nproc"
    }

    /// `UInt64.max` is RLIM_INFINITY.
    public static let unlimited = UInt64.max

    public var resource: Resource
    public var soft: UInt64
    public var hard: UInt64

    public init(_ resource: Resource, soft: UInt64, hard: UInt64) {
        self.resource = resource
        self.soft = soft
        self.hard = hard
    }
}

/// Whose a task is and what it may use: the user and group it runs as, its resource
/// limits and its nice value. All of it is set in the child before exec; any step that
/// fails is a spawn failure (exit 125), so a task never runs with less isolation than
/// asked for — above all, never as root when a user was named.
public struct TaskIsolation: Sendable, Equatable {
    /// Run as this account (needs root). Supplementary groups are cleared and the group is
    /// the account's primary one unless `groupID` says otherwise; HOME, USER and LOGNAME
    /// are set to the account's (HOME=/ for an unlisted uid) unless the task's environment
    /// sets them.
    public var user: Account?
    /// Run with this group (needs root); supplementary groups are cleared.
    public var groupID: UInt32?
    public var limits: [ResourceLimit]
    /// The task's nice value, -20 (first) to 19 (last); nil keeps the supervisor's.
    public var niceness: Int32?

    public init(user: Account? = nil, groupID: UInt32? = nil, limits: [ResourceLimit] = [], niceness: Int32? = nil) {
        self.user = user
        self.groupID = groupID
        self.limits = limits
        self.niceness = niceness
    }

    public static let none = TaskIsolation()

    /// The gid to switch to, if any: the named group, else the user's primary group.
    package var effectiveGroupID: UInt32? { groupID ?? user?.primaryGroupID }

    /// The variables a user switch sets under the task's own: what login would set. A uid
    /// the password database does not list gets HOME=/ (as container runtimes give it),
    /// never the supervisor's home.
    package var accountEnvironment: [String: String] {
        guard let user else { return [:] }
        var variables = ["HOME": user.home ?? "/"]
        if let name = user.name {
            variables["USER"] = name
            variables["LOGNAME"] = name
        }
        return variables
    }

    /// Which account database a name or id is looked up in.
    public enum AccountKind: String, Sendable, Equatable {
        case user, group
    }

    /// A problem with a `--user`, `--group`, `--limit-*` or `--nice` value. Each case keeps
    /// the text as given, which its message quotes.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Not a whole number from -20 to 19.
        case notANiceValue(String)
        /// Neither `VALUE` nor `SOFT:HARD`.
        case notALimit(String)
        /// A value that is not one of this resource's (`ResourceLimit.expected`).
        case badLimitValue(ResourceLimit.Resource, String)
        /// `SOFT:HARD` with the soft limit above the hard one.
        case softAboveHard(String)
        /// An empty user or group name.
        case emptyName(AccountKind)
        /// The id 4294967295, (uid_t)-1 or (gid_t)-1, which the kernel reads as "no change".
        case reservedID(AccountKind, String)
        /// No account of that name (or, for a group, that number is not there either).
        /// `localFilesOnly`: only /etc/passwd and /etc/group could be read (a statically
        /// linked build), so an account from another source (LDAP, systemd) was not seen.
        case notFound(AccountKind, String, localFilesOnly: Bool)
        /// A lookup of the caller's own (`AccountLookup`) failed, in its own words: a
        /// directory service that did not answer, say.
        case lookupFailed(String)

        /// A failure of a caller's own lookup, in its words (`lookupFailed`).
        public init(_ message: String) { self = .lookupFailed(message) }

        public var message: String {
            switch self {
            case let .notANiceValue(text): "'\(text)' is not a nice value; expected a whole number from -20 (first) to 19 (last)"
            case let .notALimit(text): "'\(text)' is not a limit; expected VALUE or SOFT:HARD"
            case let .badLimitValue(resource, text): "'\(text)' is not a limit; expected \(ResourceLimit.expected(resource))"
            case let .softAboveHard(text): "'\(text)': the soft limit is above the hard limit"
            case let .emptyName(kind): "an empty \(kind.rawValue) name"
            case let .reservedID(kind, id): "\(id) is not a \(kind.rawValue) id (it means 'no change' to the kernel)"
            case let .notFound(kind, name, localFilesOnly):
                "no such \(kind.rawValue): \(name)" + (localFilesOnly ? Self.localFilesNote(kind) : "")
            case let .lookupFailed(message): message
            }
        }

        public var description: String { message }

        private static func localFilesNote(_ kind: AccountKind) -> String {
            let file = kind == .user ? "/etc/passwd" : "/etc/group"
            return " (in \(file): this overtime is linked statically and reads the local files only; give a number, or use a dynamically linked build for accounts from other sources)"
        }
    }

    /// Parses a nice value: an integer from -20 to 19.
    public static func parseNiceness(_ text: String) throws(ParseError) -> Int32 {
        guard let value = Int32(text.trimmingSpaces), (-20...19).contains(value) else {
            throw .notANiceValue(text)
        }
        return value
    }
}

/// A user account, as the password database lists it.
public struct Account: Sendable, Equatable {
    /// The login name; nil for a bare uid the database does not list.
    public var name: String?
    public var uid: UInt32
    public var primaryGroupID: UInt32
    public var home: String?

    public init(name: String?, uid: UInt32, primaryGroupID: UInt32, home: String?) {
        self.name = name
        self.uid = uid
        self.primaryGroupID = primaryGroupID
        self.home = home
    }
}

extension ResourceLimit {
    /// Parses `VALUE` (soft and hard alike) or `SOFT:HARD`, where each is a count, a size
    /// (`as`: 512M, 4G; binary units), a duration (`cpu`: 90s, 10m; whole seconds, rounded
    /// up), or `unlimited`.
    public static func parse(_ resource: Resource, _ text: String) throws(TaskIsolation.ParseError) -> ResourceLimit {
        let parts = text.trimmingSpaces.split(separator: ":", omittingEmptySubsequences: false).map { String($0).trimmingSpaces }
        guard parts.count == 1 || parts.count == 2 else {
            throw .notALimit(text)
        }
        let soft = try value(resource, parts[0], whole: text)
        let hard = parts.count == 2 ? try value(resource, parts[1], whole: text) : soft
        guard soft <= hard else {
            throw .softAboveHard(text)
        }
        return ResourceLimit(resource, soft: soft, hard: hard)
    }

    /// What a value of each resource looks like, for messages and help.
    public static func expected(_ resource: Resource) -> String {
        switch resource {
        case .addressSpace: "a size such as 512M or 4G (or SOFT:HARD, or unlimited)"
        case .cpuSeconds: "CPU time such as 90s or 2h (or SOFT:HARD, or unlimited)"
        case .openFiles, .processes: "a whole number (or SOFT:HARD, or unlimited)"
        }
    }

    private static func value(_ resource: Resource, _ part: String, whole: String) throws(TaskIsolation.ParseError) -> UInt64 {
        let problem = TaskIsolation.ParseError.badLimitValue(resource, whole)
        let lowered = part.lowercased()
        if lowered == "unlimited" || lowered == "infinity" { return unlimited }
        switch resource {
        case .openFiles, .processes:
            guard let count = UInt64(part), count < unlimited else { throw problem }
            return count
        case .cpuSeconds:
            guard let duration = try? DurationText.parse(part), duration > .zero else { throw problem }
            let (seconds, attoseconds) = duration.components
            return UInt64(seconds) + (attoseconds > 0 ? 1 : 0)
        case .addressSpace:
            guard let bytes = try? ByteSize.parse(part), bytes < unlimited else { throw problem }
            return bytes
        }
    }
}
