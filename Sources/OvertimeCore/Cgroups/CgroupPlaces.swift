/// Where this process sits in the cgroup hierarchies the supervisor may use (DESIGN §7), as
/// `/proc/self/mountinfo` and `/proc/self/cgroup` say: a cgroup v2 hierarchy, and a cgroup v1
/// one with the `memory` controller. A machine may have either, both (a hybrid: v2 for
/// containment, v1 for memory), or none.
public struct CgroupPlaces: Sendable, Equatable {
    /// This process's directory in the v2 hierarchy, where it is mounted at its root.
    public var v2Directory: String?
    /// This process's directory in the v1 memory hierarchy, likewise.
    public var v1MemoryDirectory: String?
    public var mounts: CgroupMounts
    public var membership: CgroupMembership

    public init(mountinfo: [UInt8], procSelfCgroup: [UInt8]) {
        mounts = CgroupMounts(mountinfo: mountinfo)
        membership = CgroupMembership(procSelfCgroup: procSelfCgroup)
        if let mount = mounts.v2, let path = membership.v2 { v2Directory = Self.directory(mount, path) }
        if let mount = mounts.v1Memory, let path = membership.v1Memory { v1MemoryDirectory = Self.directory(mount, path) }
    }

    /// Why there is no `v2Directory`, in one sentence.
    public var v2Absence: String {
        mounts.v2Subtree ? "cgroup v2 is mounted here only at a subtree of its hierarchy (a container's view)"
                         : "no cgroup v2 hierarchy is mounted"
    }

    /// Why there is no `v1MemoryDirectory`, in one sentence.
    public var v1MemoryAbsence: String {
        mounts.v1MemorySubtree ? "the cgroup v1 memory hierarchy is mounted here only at a subtree of it (a container's view)"
                               : "no cgroup v1 memory hierarchy is mounted"
    }

    /// A path of /proc/self/cgroup under its hierarchy's mount point.
    static func directory(_ mount: String, _ path: String) -> String {
        path == "/" ? mount : mount + path
    }
}

/// The v2 mount point and the v1 memory mount point, from mountinfo's lines ("ID PARENT DEV
/// ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS"). A hierarchy mounted twice
/// counts once: the first mount whose root is the hierarchy's root ("/").
public struct CgroupMounts: Sendable, Equatable {
    public var v2: String?
    public var v1Memory: String?
    /// Whether the v2 hierarchy is mounted at one of its subtrees (a container's view of its
    /// own cgroup): there, /proc/self/cgroup's paths cannot be found under the mount.
    public var v2Subtree = false
    /// Whether the v1 memory hierarchy is mounted at one of its subtrees.
    public var v1MemorySubtree = false

    /// One pass over the bytes, a String made only for the mount points kept: every
    /// `overtime run` reads mountinfo, which may run to thousands of lines.
    public init(mountinfo: [UInt8]) {
        mountinfo.withUnsafeBufferPointer { text in
            for line in KernelText.Pieces(text, by: "\n") {
                guard let mount = CgroupMount(text, line) else { continue }
                switch mount.hierarchy {
                case .v2 where !mount.atRoot: v2Subtree = true
                case .v1Memory where !mount.atRoot: v1MemorySubtree = true
                case .v2 where v2 == nil: v2 = Self.unescape(text, mount.mountPoint)
                case .v1Memory where v1Memory == nil: v1Memory = Self.unescape(text, mount.mountPoint)
                default: continue
                }
            }
        }
    }

    /// A mountinfo line that mounts a hierarchy the probe looks for: cgroup v2, or a v1 one
    /// with the memory controller among its super options.
    private struct CgroupMount {
        enum Hierarchy { case v2, v1Memory }
        let hierarchy: Hierarchy
        let atRoot: Bool
        /// Where it is mounted, still escaped, in the text's indices.
        let mountPoint: Range<Int>

        init?(_ text: UnsafeBufferPointer<UInt8>, _ line: Range<Int>) {
            var fields = KernelText.Pieces(text, line, by: " ")
            for _ in 0..<3 { guard fields.next() != nil else { return nil } }
            guard let root = fields.next(), let mountPoint = fields.next(), fields.next() != nil else { return nil }
            // The optional fields (shared:N, master:N, ...) run up to a lone "-".
            while true {
                guard let field = fields.next() else { return nil }
                if KernelText.equal(text, field, "-") { break }
            }
            guard let type = fields.next(), fields.next() != nil, let superOptions = fields.next() else { return nil }
            if KernelText.equal(text, type, "cgroup2") {
                hierarchy = .v2
            } else if KernelText.equal(text, type, "cgroup"), KernelText.list(text, superOptions, contains: "memory") {
                hierarchy = .v1Memory
            } else {
                return nil
            }
            atRoot = KernelText.equal(text, root, "/")
            self.mountPoint = mountPoint
        }
    }

    /// A mount point as text: mountinfo escapes space, tab, newline and backslash as octal
    /// (`\040`).
    private static func unescape(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(range.count)
        var i = range.lowerBound
        while i < range.upperBound {
            if text[i] == UInt8(ascii: "\\"), i + 3 < range.upperBound,
               let value = Self.octal(text[i + 1], text[i + 2], text[i + 3]) {
                bytes.append(value)
                i += 4
            } else {
                bytes.append(text[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The byte three octal digits spell, if they do.
    private static func octal(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> UInt8? {
        let digits = UInt8(ascii: "0")...UInt8(ascii: "7")
        guard digits.contains(a), digits.contains(b), digits.contains(c) else { return nil }
        let value = Int(a - digits.lowerBound) * 64 + Int(b - digits.lowerBound) * 8 + Int(c - digits.lowerBound)
        return value <= 255 ? UInt8(value) : nil
    }
}

/// This process's path in the v2 hierarchy ("0::/path") and in the v1 memory one
/// ("N:memory:/path", or a line naming memory among several controllers), from
/// /proc/self/cgroup.
public struct CgroupMembership: Sendable, Equatable {
    public var v2: String?
    public var v1Memory: String?

    public init(procSelfCgroup: [UInt8]) {
        procSelfCgroup.withUnsafeBufferPointer { text in
            for line in KernelText.Pieces(text, by: "\n") {
                // "ID:CONTROLLERS:PATH"; the path may itself hold colons.
                var parts = KernelText.Pieces(text, line, by: ":")
                guard let id = parts.next(), let controllers = parts.next(), parts.cursor <= line.upperBound else { continue }
                let path = String(decoding: UnsafeBufferPointer(rebasing: text[parts.cursor..<line.upperBound]), as: UTF8.self)
                if KernelText.equal(text, id, "0"), controllers.isEmpty { v2 = path }
                if KernelText.list(text, controllers, contains: "memory") { v1Memory = path }
            }
        }
    }
}
