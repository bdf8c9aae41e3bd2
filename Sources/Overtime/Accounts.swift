import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The account and group databases, and the credentials the supervisor runs with: what a
/// task's isolation asks of this machine, kept out of the pure core, which is given the
/// lookups (`AccountLookup`).
extension TaskIsolation {
    /// The user and group ids to switch to, or nil when there is nothing to switch: not
    /// root, and asked to be what the supervisor already is (clearing supplementary groups
    /// would need a privilege it does not have).
    func credentialsToSwitch() -> (uid: UInt32?, gid: UInt32?)? {
        let uid = user?.uid, gid = effectiveGroupID
        guard uid != nil || gid != nil else { return nil }
        if geteuid() != 0, (uid ?? geteuid()) == geteuid(), (gid ?? getegid()) == getegid() { return nil }
        return (uid, gid)
    }

    /// Looks up a group by name or number in the group database; a number need not be
    /// listed there.
    public static func lookUpGroup(_ text: String) throws(ParseError) -> UInt32 {
        let name = text.trimmingSpaces
        if let gid = UInt32(name) {
            guard gid != UInt32.max else { throw .reservedID(.group, String(gid)) }
            return gid
        }
        guard !name.isEmpty else { throw .emptyName(.group) }
        if let gid = AccountFiles.groupID(named: name, in: localFile("/etc/group")) { return gid }
        guard NameService.usable else { throw .notFound(.group, name, localFilesOnly: true) }
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        let rc = getgrnam_r(name, &entry, &buffer, buffer.count, &result)
        guard rc == 0, let found = result else { throw .notFound(.group, name, localFilesOnly: false) }
        return found.pointee.gr_gid
    }
}

/// Whether the C library's name service (NSS: the sources /etc/nsswitch.conf lists after the
/// files, such as systemd, LDAP or sss) may be asked. Not in a statically linked build, the
/// one scripts/build-release makes: glibc loads those sources as shared libraries built for
/// its shared self, and a static program that loads one dies in it (a group not in
/// /etc/group, looked up through libnss_systemd, was a segmentation fault). Such a program
/// has no program interpreter (`ProgramImage.isStaticallyLinked`).
enum NameService {
    static let usable = !ProgramImage.isStaticallyLinked
}

/// A local account file's text; empty when it cannot be read (then the C library is asked).
private func localFile(_ path: String) -> String {
    Descriptors.readWholeFile(path).map { String(decoding: $0, as: UTF8.self) } ?? ""
}

extension Account {
    /// Looks up a user by name or uid. A uid the database does not list is accepted (as
    /// container images often run as a bare uid), with its own number as primary group.
    public static func lookUp(_ text: String) throws(TaskIsolation.ParseError) -> Account {
        let key = text.trimmingSpaces
        guard !key.isEmpty else { throw .emptyName(.user) }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        let uid = UInt32(key)
        if uid == UInt32.max { throw .reservedID(.user, key) }
        if let listed = AccountFiles.user(named: uid == nil ? key : nil, uid: uid, in: localFile("/etc/passwd")) { return listed }
        guard NameService.usable else {
            guard let uid else { throw .notFound(.user, key, localFilesOnly: true) }
            return Account(name: nil, uid: uid, primaryGroupID: uid, home: nil)
        }
        let rc = if let uid { getpwuid_r(uid, &entry, &buffer, buffer.count, &result) }
                 else { getpwnam_r(key, &entry, &buffer, buffer.count, &result) }
        if rc == 0, let found = result {
            return Account(name: String(cString: found.pointee.pw_name), uid: found.pointee.pw_uid,
                           primaryGroupID: found.pointee.pw_gid, home: String(cString: found.pointee.pw_dir))
        }
        guard let uid else { throw .notFound(.user, key, localFilesOnly: false) }
        return Account(name: nil, uid: uid, primaryGroupID: uid, home: nil)
    }
}

extension AccountLookup {
    /// This machine's password and group databases.
    public static let system = AccountLookup(user: Account.lookUp, group: TaskIsolation.lookUpGroup)
}

extension RLimit {
    /// The kernel's form of a task's limit.
    init(_ limit: ResourceLimit) {
        let code = switch limit.resource {
        case .addressSpace: RLimit.addressSpace
        case .openFiles: RLimit.openFiles
        case .cpuSeconds: RLimit.cpuSeconds
        case .processes: RLimit.processes
        }
        self.init(code: code, soft: limit.soft, hard: limit.hard)
    }
}
