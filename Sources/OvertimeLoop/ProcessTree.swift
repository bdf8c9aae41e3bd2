#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Which processes belong to a task, as the kernel says: its leader's session (the leader
/// starts one of its own), or, for a process that started a session of its own, descent
/// from the leader through `/proc`.
public enum ProcessTree {
    /// The parent of `pid` (from `/proc/PID/stat`), or nil when it is gone or unreadable.
    public static func parent(of pid: Int32) -> Int32? {
        guard let bytes = Descriptors.readWholeFile("/proc/\(pid)/stat") else { return nil }
        // "PID (COMM) STATE PPID …": COMM may hold spaces and parentheses; it ends at the
        // last ')'.
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 1 else { return nil }
        return Int32(String(decoding: fields[1], as: UTF8.self))
    }

    /// True when `pid` is `leader`, is in the session `leader` leads, or descends from it.
    /// A process whose parent died (reparented to PID 1 or a subreaper) and that left the
    /// session cannot be told from a stranger; it is not counted.
    public static func belongs(_ pid: Int32, toTaskLedBy leader: Int32) -> Bool {
        guard pid > 0, leader > 0 else { return false }
        if pid == leader || getsid(pid) == leader { return true }
        var current = pid
        for _ in 0..<64 {
            guard let up = parent(of: current), up > 1 else { return false }
            if up == leader { return true }
            current = up
        }
        return false
    }
}
