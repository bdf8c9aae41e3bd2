/// The local account files, `/etc/passwd` and `/etc/group`, read without the C library.
///
/// A release `overtime` is one static executable (it starts in half the time and runs in
/// images without a libc, docs/benchmarks.md). The C library's own lookups in such a
/// binary must load the machine's name-service modules at run time, which works only with
/// the very C library it was built against. So the files are read first, as most machines
/// and every container image keep their accounts; the C library is asked only for names
/// the files do not have (a directory service: LDAP, SSSD).
public enum AccountFiles {
    /// The account named `name`, or with uid `uid`, in the text of a passwd file.
    public static func user(named name: String? = nil, uid: UInt32? = nil, in passwd: String) -> Account? {
        for line in passwd.split(separator: "\n", omittingEmptySubsequences: true) {
            // name:password:uid:gid:gecos:home:shell
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count >= 7, !fields[0].hasPrefix("+"), !fields[0].hasPrefix("-"), !fields[0].hasPrefix("#"),
                  let lineUID = UInt32(fields[2]), let lineGID = UInt32(fields[3]) else { continue }
            if let name, fields[0] != name { continue }
            if let uid, lineUID != uid { continue }
            return Account(name: String(fields[0]), uid: lineUID, primaryGroupID: lineGID, home: String(fields[5]))
        }
        return nil
    }

    /// The gid of the group named `name` in the text of a group file.
    public static func groupID(named name: String, in group: String) -> UInt32? {
        for line in group.split(separator: "\n", omittingEmptySubsequences: true) {
            // name:password:gid:members
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count >= 3, fields[0] == name, let gid = UInt32(fields[2]) else { continue }
            return gid
        }
        return nil
    }
}
