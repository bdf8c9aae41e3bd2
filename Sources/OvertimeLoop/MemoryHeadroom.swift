/// How much more memory this process may take: the machine's `MemAvailable`, or less when
/// its memory cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`) ends nearer. Read before
/// taking in an input whose size decides what it costs (a job file).
public enum MemoryHeadroom {
    /// The headroom now, in bytes; nil when neither /proc/meminfo nor a cgroup says.
    public static func current() -> UInt64? {
        let machine = available(meminfo: Descriptors.readWholeFile("/proc/meminfo") ?? [])
        let limits = [machine, cgroupHeadroom()].compactMap { $0 }
        return limits.min()
    }

    /// `MemAvailable` from /proc/meminfo's text ("MemAvailable:   23289360 kB"), in bytes.
    static func available(meminfo: [UInt8]) -> UInt64? {
        let text = String(decoding: meminfo, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("MemAvailable:") }) else { return nil }
        let words = line.split(separator: " ")
        guard words.count == 3, words[2] == "kB", let kibibytes = UInt64(words[1]) else { return nil }
        return kibibytes * 1024
    }

    /// What the process's own memory cgroup still allows: its limit less its usage; nil
    /// without a limit (or a cgroup that can be read).
    private static func cgroupHeadroom() -> UInt64? {
        let mounts = CgroupProbe.mounts(mountinfo: Descriptors.readWholeFile("/proc/self/mountinfo") ?? [])
        let own = CgroupProbe.ownPaths(procSelfCgroup: Descriptors.readWholeFile("/proc/self/cgroup") ?? [])
        var headrooms: [UInt64] = []
        if let mount = mounts.v2, let path = own.v2 {
            let directory = CgroupProbe.join(mount, path)
            headrooms += headroom(limit: directory + "/memory.max", usage: directory + "/memory.current")
        }
        if let mount = mounts.v1Memory, let path = own.v1Memory {
            let directory = CgroupProbe.join(mount, path)
            headrooms += headroom(limit: directory + "/memory.limit_in_bytes", usage: directory + "/memory.usage_in_bytes")
        }
        return headrooms.min()
    }

    /// The limit less the usage, when the limit file holds a number (v2 writes "max" for none).
    private static func headroom(limit: String, usage: String) -> [UInt64] {
        guard let limit = number(Descriptors.readWholeFile(limit)) else { return [] }
        let used = number(Descriptors.readWholeFile(usage)) ?? 0
        return [limit > used ? limit - used : 0]
    }

    private static func number(_ bytes: [UInt8]?) -> UInt64? {
        guard let bytes, let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first else { return nil }
        return UInt64(line)
    }
}
