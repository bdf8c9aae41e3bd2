import COvertime
import Synchronization

/// The pages of the program's own file that a long-lived supervisor keeps mapped for
/// nothing, and handing them back.
///
/// Starting touches code and read-only data spread over the binary: the Swift runtime's,
/// the argument parser's, the cgroup probe's. The kernel maps the page cache around each
/// first touch in whole large folios (64 KiB or more), so a supervisor that then sits idle
/// in front of one task, as a container's PID 1 does, keeps megabytes of its program
/// file mapped that it will not run again (docs/benchmarks.md, "As PID 1"). Unmapping the
/// never-writable segments once it has settled leaves mapped only what it touches from
/// then on, each page mapped again from the page cache at its next touch (a minor fault;
/// the cache keeps them until the kernel wants the memory).
public enum ProgramPages {
    /// Set by `releaseOnceSettled()`: every loop started after it schedules the release.
    static let releaseRequested = Atomic<Bool>(false)
    /// How long after its loop starts a program counts as settled, in milliseconds: past
    /// its start, and past every run short enough that the release would only cost it the
    /// faults of mapping its pages again (a task of a few milliseconds pays nothing).
    static let settleDelay: UInt64 = 1000

    /// Has each loop started from now on hand back the program's never-writable pages once,
    /// `settleDelay` after it starts. For Overtime's own CLI: a program that embeds the
    /// library decides this for itself, as its code is not the supervisor's alone.
    public static func releaseOnceSettled() {
        releaseRequested.store(true, ordering: .relaxed)
    }

    /// Unmaps the program's never-writable pages now. Should the kernel refuse, they simply
    /// stay mapped: nothing depends on the release.
    public static func release() {
        _ = overtime_unmap_program_read_only_pages()
    }
}
