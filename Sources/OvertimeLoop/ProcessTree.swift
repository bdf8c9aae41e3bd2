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

    /// Whether a process belongs to a task.
    public enum Membership: Equatable {
        /// The leader, in the session the leader leads, or descended from it.
        case member
        /// Alive and none of those. (A process whose parent died and that left the session
        /// cannot be told from a stranger: it is one.)
        case stranger
        /// Gone already: nothing is left to ask (a sender that wrote and exited before it
        /// was read, as `python -c 'sd_notify(…)'` does).
        case gone
    }

    public static func membership(of pid: Int32, inTaskLedBy leader: Int32) -> Membership {
        guard pid > 0, leader > 0 else { return .stranger }
        if pid == leader || getsid(pid) == leader { return .member }
        if kill(pid, 0) != 0, errno == ESRCH { return .gone }
        var current = pid
        for _ in 0..<64 {
            guard let up = parent(of: current) else { return current == pid ? .gone : .stranger }
            guard up > 1 else { return .stranger }
            if up == leader { return .member }
            current = up
        }
        return .stranger
    }

    /// This process's effective user id.
    public static var currentUserID: UInt32 { geteuid() }
}
