import COvertime

/// How the process itself holds memory: a program's choice, made once at its start.
public enum ProcessMemoryUse {
    /// One malloc arena for every thread, where glibc would give each new thread its own
    /// (the caller's reasons are its own; the CLI's are at its call).
    public static func useOneMallocArena() {
        _ = overtime_use_one_malloc_arena()
    }
}
