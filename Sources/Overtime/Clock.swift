@_exported import OvertimeCore
import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The pure core (`OvertimeCore`, re-exported above so that embedders write one
// `import Overtime`) never reads a clock: instants and the wall-clock offset are given to
// it. Here they are read.

extension MonotonicInstant {
    /// Now, on the clock the supervisor stamps events with (CLOCK_MONOTONIC).
    public static func now() -> Self {
        Self(nanoseconds: EventLoop.now())
    }
}

extension EventEncoder {
    /// An encoder whose timestamps are this machine's UTC time: the wall clock's offset
    /// from the monotonic one, read now.
    public init(runID: String) {
        self.init(runID: runID, wallOffsetNanoseconds: WallClock.offsetNanoseconds())
    }
}

extension TimeOfDay {
    /// This machine's local time of day, its zone's offset read now.
    public static func local() -> TimeOfDay {
        var now = time_t(0)
        time(&now)
        var parts = tm()
        localtime_r(&now, &parts)
        return TimeOfDay(wallOffsetNanoseconds: WallClock.offsetNanoseconds(), utcOffsetSeconds: Int(parts.tm_gmtoff))
    }
}

enum WallClock {
    /// The wall clock's offset from the monotonic one, read now.
    static func offsetNanoseconds() -> Int64 {
        var wall = timespec()
        var mono = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        clock_gettime(CLOCK_MONOTONIC, &mono)
        return (Int64(wall.tv_sec) - Int64(mono.tv_sec)) * 1_000_000_000 + Int64(wall.tv_nsec - mono.tv_nsec)
    }
}
