internal import OvertimeCore

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
        let places = CgroupPlaces.ofThisProcess()
        var headrooms: [UInt64] = []
        if let directory = places.v2Directory {
            headrooms += headroom(limit: directory + "/memory.max", usage: directory + "/memory.current")
        }
        if let directory = places.v1MemoryDirectory {
            headrooms += headroom(limit: directory + "/memory.limit_in_bytes", usage: directory + "/memory.usage_in_bytes")
        }
        return headrooms.min()
    }

    /// The limit less the usage, when the limit file holds a number (v2 writes "max" for none).
    private static func headroom(limit: String, usage: String) -> [UInt64] {
        guard let limit = KernelText.number(Descriptors.readWholeFile(limit)) else { return [] }
        let used = KernelText.number(Descriptors.readWholeFile(usage)) ?? 0
        return [limit > used ? limit - used : 0]
    }
}
