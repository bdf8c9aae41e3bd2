import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

public typealias ResourceLimit = OvertimeLoop.ResourceLimit

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
    var effectiveGroupID: UInt32? { groupID ?? user?.primaryGroupID }

    /// The user and group ids to switch to, or nil when there is nothing to switch: not
    /// root, and asked to be what the supervisor already is (clearing supplementary groups
    /// would need a privilege it does not have).
    func credentialsToSwitch() -> (uid: UInt32?, gid: UInt32?)? {
        let uid = user?.uid, gid = effectiveGroupID
        guard uid != nil || gid != nil else { return nil }
        if geteuid() != 0, (uid ?? geteuid()) == geteuid(), (gid ?? getegid()) == getegid() { return nil }
        return (uid, gid)
    }

    /// The variables a user switch sets under the task's own: what login would set. A uid
    /// the password database does not list gets HOME=/ (as container runtimes give it),
    /// never the supervisor's home.
    var accountEnvironment: [String: String] {
        guard let user else { return [:] }
        var variables = ["HOME": user.home ?? "/"]
        if let name = user.name {
            variables["USER"] = name
            variables["LOGNAME"] = name
        }
        return variables
    }

    /// A problem with a `--user`, `--group`, `--limit-*` or `--nice` value, in words.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
        init(_ message: String) { self.message = message }
    }

    /// Parses a nice value: an integer from -20 to 19.
    public static func parseNiceness(_ text: String) throws(ParseError) -> Int32 {
        guard let value = Int32(text.trimmingSpaces), (-20...19).contains(value) else {
            throw ParseError("'\(text)' is not a nice value; expected a whole number from -20 (first) to 19 (last)")
        }
        return value
    }

    /// Looks up a group by name or number in the group database; a number need not be
    /// listed there.
    public static func lookUpGroup(_ text: String) throws(ParseError) -> UInt32 {
        let name = text.trimmingSpaces
        if let gid = UInt32(name) {
            guard gid != UInt32.max else { throw ParseError("\(gid) is not a group id (it means 'no change' to the kernel)") }
            return gid
        }
        guard !name.isEmpty else { throw ParseError("an empty group name") }
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        let rc = getgrnam_r(name, &entry, &buffer, buffer.count, &result)
        guard rc == 0, let found = result else { throw ParseError("no such group: \(name)") }
        return found.pointee.gr_gid
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

    /// Looks up a user by name or uid. A uid the database does not list is accepted (as
    /// container images often run as a bare uid), with its own number as primary group.
    public static func lookUp(_ text: String) throws(TaskIsolation.ParseError) -> Account {
        let key = text.trimmingSpaces
        guard !key.isEmpty else { throw TaskIsolation.ParseError("an empty user name") }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        let uid = UInt32(key)
        if uid == UInt32.max { throw TaskIsolation.ParseError("\(key) is not a user id (it means 'no change' to the kernel)") }
        let rc = if let uid { getpwuid_r(uid, &entry, &buffer, buffer.count, &result) }
                 else { getpwnam_r(key, &entry, &buffer, buffer.count, &result) }
        if rc == 0, let found = result {
            return Account(name: String(cString: found.pointee.pw_name), uid: found.pointee.pw_uid,
                           primaryGroupID: found.pointee.pw_gid, home: String(cString: found.pointee.pw_dir))
        }
        guard let uid else { throw TaskIsolation.ParseError("no such user: \(key)") }
        return Account(name: nil, uid: uid, primaryGroupID: uid, home: nil)
    }
}

extension ResourceLimit {
    /// Parses `VALUE` (soft and hard alike) or `SOFT:HARD`, where each is a count, a size
    /// (`as`: 512M, 4G; binary units), a duration (`cpu`: 90s, 10m; whole seconds, rounded
    /// up), or `unlimited`.
    public static func parse(_ resource: Resource, _ text: String) throws(TaskIsolation.ParseError) -> ResourceLimit {
        let parts = text.trimmingSpaces.split(separator: ":", omittingEmptySubsequences: false).map { String($0).trimmingSpaces }
        guard parts.count == 1 || parts.count == 2 else {
            throw TaskIsolation.ParseError("'\(text)' is not a limit; expected VALUE or SOFT:HARD")
        }
        let soft = try value(resource, parts[0], whole: text)
        let hard = parts.count == 2 ? try value(resource, parts[1], whole: text) : soft
        guard soft <= hard else {
            throw TaskIsolation.ParseError("'\(text)': the soft limit is above the hard limit")
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
        let problem = TaskIsolation.ParseError("'\(whole)' is not a limit; expected \(expected(resource))")
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
            let digits = part.prefix(while: { $0.isASCII && $0.isNumber })
            guard let number = UInt64(digits) else { throw problem }
            let shift: UInt64
            switch part.dropFirst(digits.count).lowercased() {
            case "", "b": shift = 0
            case "k", "kb", "kib": shift = 10
            case "m", "mb", "mib": shift = 20
            case "g", "gb", "gib": shift = 30
            case "t", "tb", "tib": shift = 40
            default: throw problem
            }
            guard number > 0, number <= (unlimited - 1) >> shift else { throw problem }
            return number << shift
        }
    }
}
