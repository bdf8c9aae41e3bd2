/// When the loop should wait a moment before it polls again, so that wake-ups arriving
/// thousands a second, each with little to do, are served several to a poll.
///
/// A thousand tasks reporting at 10 Hz send ten thousand lines a second, spread evenly: the
/// loop woke once for each, and the wake-up itself (the scheduler's switch in and out,
/// `epoll_wait`) cost more than the line's handling. While the loop is *pacing*, it polls at
/// most once a `quantum` (1 ms): before polling it sleeps out what is left of the quantum
/// since the last poll, and the poll then returns every descriptor that became ready
/// meanwhile. Nothing is lost or reordered, only delayed, by at most a quantum.
///
/// Pacing starts only when the last `window` (20 ms) saw at least `minimumWakeups` polls
/// (1,000 a second) and the loop worked at most half of it (`busyDivisor`): many wake-ups,
/// each light. A loop that spawns and reaps tasks is busy most of the time in few, long
/// wake-ups and is never paced (its next spawn must not wait), nor is a quiet loop (its
/// first poll after a pause is never delayed). Paced, the loop polls at most a thousand
/// times a second and each poll brings more work: it stays paced down to half as many polls,
/// while it still works at most half the time. Pending work that must run at once (a zero
/// poll timeout) cancels the sleep.
///
/// Pure: `EventLoop` feeds it the clock, libuv's idle time and the poll timeout.
struct WakeupPacing {
    static let quantum: UInt64 = 1_000_000
    static let window: UInt64 = 20_000_000
    static let minimumWakeups = 20
    /// Paced only while the loop works (rather than waits) at most 1/busyDivisor of a window.
    static let busyDivisor: UInt64 = 2

    /// Pacing is on for the current window.
    private(set) var pacing = false
    /// When the previous poll began (after any sleep), 0 before the first.
    private var lastPoll: UInt64 = 0
    /// libuv's idle time (inside `epoll_wait`) at the previous poll's start.
    private var lastIdle: UInt64 = 0
    private var windowStart: UInt64 = 0
    private var wakeups = 0
    private var work: UInt64 = 0

    /// Called just before the loop polls.
    /// - Parameters:
    ///   - now: monotonic nanoseconds.
    ///   - idle: the loop's total time spent waiting in its poll so far, in nanoseconds.
    ///   - pollTimeout: the poll's timeout in milliseconds as libuv gives it: -1 for none (no
    ///     timer), 0 when something must run without waiting.
    /// - Returns: how many nanoseconds to sleep before polling (0: poll now).
    mutating func beforePoll(now: UInt64, idle: UInt64, pollTimeout: Int32) -> UInt64 {
        if lastPoll != 0 {
            let sincePoll = now &- lastPoll
            let waited = idle &- lastIdle
            // What the wake-up's callbacks took: the time since the poll began, less the wait
            // inside it. (A sleep before that poll is not counted: `slept` moved lastPoll.)
            work &+= sincePoll > waited ? sincePoll - waited : 0
            wakeups += 1
        } else {
            windowStart = now
        }
        if now &- windowStart >= Self.window {
            // Paced, the loop polls at most a thousand times a second, the very rate that
            // starts pacing: it stays on down to half that, or it would flicker on and off.
            let enough = pacing ? Self.minimumWakeups / 2 : Self.minimumWakeups
            pacing = wakeups >= enough && work * Self.busyDivisor <= now &- windowStart
            windowStart = now
            wakeups = 0
            work = 0
        }
        lastIdle = idle
        var pause: UInt64 = 0
        if pacing, pollTimeout != 0, lastPoll != 0 {
            let sincePoll = now &- lastPoll
            if sincePoll < Self.quantum {
                pause = Self.quantum - sincePoll
                if pollTimeout > 0 { pause = min(pause, UInt64(pollTimeout) * 1_000_000) }
            }
        }
        lastPoll = now
        return pause
    }

    /// The sleep `beforePoll` asked for ended at `now`: the poll begins now. (A sleep is
    /// neither work nor idle time.)
    mutating func slept(until now: UInt64) {
        lastPoll = now
    }
}
