import CLibUV
import COvertime
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A libuv loop running on a thread of its own.
///
/// Everything that touches the loop's handles runs on that thread. Other threads hand it
/// work with `execute`, which queues a closure and wakes the loop with `uv_async_send` (the
/// one libuv call that is safe from any thread; several sends may merge into one wake-up,
/// so the queue, not the wake-up, carries the work).
///
/// `@unchecked Sendable`: the only state touched off the loop thread is the job queue
/// (behind a mutex) and the async handle (`uv_async_send` is thread-safe).
///
/// Every `uv_async_send` is made holding `state`'s lock, and the loop thread takes that lock
/// before closing the async handle. Without it, a send racing the shutdown could reach the
/// handle after the loop thread had closed it and its loop: libuv then writes to a closed
/// (or reused) descriptor and aborts the process, which happened once in a dozen full test
/// runs of `overtime run` giving up on a bad `--control`.
public final class EventLoop: @unchecked Sendable {
    let uvLoop: UnsafeMutablePointer<uv_loop_t>
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    /// Runs before each poll: the wake-up pacing's sleep, if any (`WakeupPacing`).
    private let beforePoll: UnsafeMutablePointer<uv_prepare_t>
    private var pacing = WakeupPacing()
    /// Fires once, `ProgramPages.settleDelay` after the loop starts; only where the program
    /// asked for its start-up pages to be handed back (`ProgramPages.releaseOnceSettled`).
    private let settled: UnsafeMutablePointer<uv_timer_t>?
    private let jobs = Mutex<[() -> Void]>([])
    private let state = Mutex<(stopping: Bool, thread: pthread_t?)>((false, nil))
    private let threadID = Atomic<UInt>(0)
    /// Reaps the children this loop spawns (see `ChildProcess`).
    let reaper: ChildReaper
    /// Kills the children's groups if this process dies first.
    var groupGuard: GroupGuard { reaper.groupGuard }

    /// Starts a loop and its thread.
    /// - Throws: `SystemError` when libuv or the thread cannot be set up.
    public init() throws(SystemError) {
        uvLoop = .allocate(capacity: 1)
        wakeup = .allocate(capacity: 1)
        beforePoll = .allocate(capacity: 1)
        settled = ProgramPages.releaseRequested.load(ordering: .relaxed) ? .allocate(capacity: 1) : nil
        try uvCheck("uv_loop_init", uv_loop_init(uvLoop))
        // The pacing's measure of each wake-up's work. Without it (it cannot fail on this
        // libuv) the idle time stays 0, every wake-up looks busy and none is paced.
        _ = overtime_uv_count_idle_time(uvLoop)
        // Watching SIGCHLD from the start: a child can never exit unnoticed.
        reaper = ChildReaper(loop: uvLoop)
        try uvCheck("uv_async_init", uv_async_init(uvLoop, wakeup) { handle in
            let loop = Unmanaged<EventLoop>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            loop.runJobs()
        })
        // The async handle holds the loop object unretained; the thread holds it retained.
        wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_prepare_init(uvLoop, beforePoll)
        beforePoll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_prepare_start(beforePoll) { handle in
            Unmanaged<EventLoop>.fromOpaque(handle!.pointee.data).takeUnretainedValue().paceWakeups()
        }
        // It must not keep the loop running by itself.
        uv_unref(UnsafeMutableRawPointer(beforePoll).assumingMemoryBound(to: uv_handle_t.self))
        if let settled {
            uv_timer_init(uvLoop, settled)
            // No owner: the shutdown's walk closes it as it is (libuv leaves `data` unset).
            settled.pointee.data = nil
            uv_timer_start(settled, { _ in ProgramPages.release() }, ProgramPages.settleDelay, 0)
            // Nor this one: a loop with nothing else to do ends before it fires.
            uv_unref(UnsafeMutableRawPointer(settled).assumingMemoryBound(to: uv_handle_t.self))
        }
        let box = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            let loop = Unmanaged<EventLoop>.fromOpaque(arg!).takeRetainedValue()
            loop.threadMain()
            return nil
        }, box)
        guard rc == 0 else {
            Unmanaged<EventLoop>.fromOpaque(box).release()
            throw SystemError("pthread_create", errno: rc)
        }
        state.withLock { $0.thread = thread }
    }

    /// True on the loop's own thread.
    public var inLoopThread: Bool {
        threadID.load(ordering: .acquiring) == UInt(bitPattern: Int(bitPattern: pthread_self()))
    }

    /// Runs `job` on the loop thread, soon. Safe from any thread, including the loop's own.
    /// - Returns: false when `shutdown` has begun: the job is dropped and never runs (a
    ///   caller awaiting its result must answer itself).
    @discardableResult
    public func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        return state.withLock { s in
            guard !s.stopping else { return false }
            jobs.withLock { $0.append(job) }
            uv_async_send(wakeup)
            return true
        }
    }

    /// Makes this process a child subreaper (PID 1 already is one for its namespace) and
    /// has the loop reap every orphan that lands on it, and kill those still running at
    /// shutdown. Call on the loop thread.
    /// - Returns: false when the kernel refused the subreaper role.
    public func adoptOrphans() -> Bool {
        reaper.reapsOrphans = true
        return getpid() == 1 || overtime_become_subreaper() == 0
    }

    /// Has every loop's task guard started as this program run again, not forked: for
    /// Overtime's own CLI, whose binary becomes the guard when run so (the C constructor in
    /// COvertime's spawn.c), cheaper than copying a multi-threaded supervisor. Call once,
    /// before the first loop spawns. A program that embeds the library must not: run
    /// again, it would start as itself.
    public static func startTaskGuardsAsThisProgram() {
        GroupGuard.startsAsOwnProgram.store(true, ordering: .relaxed)
    }

    /// The run's cgroup trees, for the group guard to empty if the supervisor dies; set
    /// before the first spawn. The guard starts now rather than at the first spawn: the
    /// trees exist already, and a supervisor killed before its first task would otherwise
    /// leave them behind with nobody to remove them. Call on the loop thread.
    public func guardCgroupTrees(_ directories: [String]) {
        groupGuard.cgroupTrees = directories
        if !directories.isEmpty { groupGuard.start(loop: self) }
    }

    /// Tells `handler` (on the loop thread) when the task guard died and whether a new one
    /// took its place, every live task's group listed with it. Call on the loop thread.
    public func onGuardLost(_ handler: @escaping (_ replaced: Bool) -> Void) {
        groupGuard.onLost = handler
    }

    /// Monotonic time now (CLOCK_MONOTONIC, nanoseconds).
    public static func now() -> Int64 {
        Int64(bitPattern: uv_hrtime())
    }

    /// Closes every handle, lets their close callbacks run, and ends the loop thread.
    /// From another thread it waits until the loop thread has finished; on the loop thread
    /// itself (the last owner let go inside a callback) it lets the thread finish alone.
    public func shutdown() {
        let thread: pthread_t? = state.withLock { s in
            if s.stopping { return nil }
            s.stopping = true
            jobs.withLock { $0.append { [unowned self] in self.closeEverything() } }
            uv_async_send(wakeup)
            return s.thread
        }
        guard let thread else { return }
        if inLoopThread {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    private func threadMain() {
        threadID.store(UInt(bitPattern: Int(bitPattern: pthread_self())), ordering: .releasing)
        // A supervisor may be started with signals blocked (Foundation's Process and many
        // shells' job control do this). The loop thread takes the signals it watches
        // whatever mask it inherited; SIGCHLD above all, or no child is ever reaped.
        SignalWatcher.unblockOnThisThread(SIGCHLD)
        uv_run(uvLoop, UV_RUN_DEFAULT)
        uv_loop_close(uvLoop)
        // Closed with the rest; its exit overlapped the other handles' closing.
        groupGuard.reapClosed()
    }

    /// Just before the poll: sleeps out what `WakeupPacing` asks.
    private func paceWakeups() {
        let pause = pacing.beforePoll(now: uv_hrtime(), idle: uv_metrics_idle_time(uvLoop), pollTimeout: uv_backend_timeout(uvLoop))
        guard pause > 0 else { return }
        var request = timespec(tv_sec: 0, tv_nsec: Int(pause))
        var left = timespec()
        while nanosleep(&request, &left) != 0 && errno == EINTR { request = left }
        pacing.slept(until: uv_hrtime())
        // libuv reckons the poll's timeout from the time it read before the timers ran: a
        // timer due soon would otherwise fire late by the sleep.
        uv_update_time(uvLoop)
    }

    private func runJobs() {
        while true {
            let batch = jobs.withLock { queue -> [() -> Void] in
                let taken = queue
                queue.removeAll()
                return taken
            }
            if batch.isEmpty { return }
            for job in batch { job() }
        }
    }

    private func closeEverything() {
        // Past this lock no thread is inside `uv_async_send`, and none will enter it
        // (`stopping` is set): the async handle may close.
        state.withLock { _ in }
        uv_walk(uvLoop, { handle, _ in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            if let closer = handle.pointee.data.flatMap({ Unmanaged<AnyObject>.fromOpaque($0).takeUnretainedValue() as? LoopHandleOwner }) {
                closer.closeForShutdown()
            } else {
                uv_close(handle, nil)
            }
        }, nil)
    }

    deinit {
        uvLoop.deallocate()
        wakeup.deallocate()
        beforePoll.deallocate()
        settled?.deallocate()
    }
}

/// A Swift object that owns a libuv handle and knows how to close it (and free it in the
/// close callback) when the loop shuts down with the handle still open. A class, not a
/// protocol: the shutdown finds each handle's owner by a cast from `AnyObject`, and a cast
/// to a protocol the runtime has not seen that type conform to yet scans every conformance
/// record in the binary (2,262 of them, reading descriptors spread over its read-only data):
/// four such scans ended every `overtime run`. A cast to a class follows superclass links.
public class LoopHandleOwner {
    init() {}

    /// Overridden by every owner.
    func closeForShutdown() {
        preconditionFailure("\(type(of: self)) owns a loop handle but does not close it")
    }
}

/// Closes `handle`, whose `data` holds its owner retained (how every handle here is kept).
/// libuv's close callback, the only place a handle's memory may be freed, releases the
/// owner and frees the handle.
func closeOwnedHandle<Handle>(_ handle: UnsafeMutablePointer<Handle>) {
    uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
        let raw = h!
        Unmanaged<AnyObject>.fromOpaque(raw.pointee.data).release()
        UnsafeMutableRawPointer(raw).deallocate()
    }
}

/// A value confined to one loop's thread, made passable across threads so a closure run by
/// `execute` can carry it back. Touching it elsewhere is a bug, checked in debug builds.
public struct LoopBound<Value>: @unchecked Sendable {
    private let stored: Value
    public let loop: EventLoop

    /// Binds `value` to `loop`. It may be created anywhere (typically before the loop has
    /// work), but only read on the loop thread.
    public init(_ value: Value, loop: EventLoop) {
        stored = value
        self.loop = loop
    }

    public var value: Value {
        assert(loop.inLoopThread, "LoopBound used off its loop thread")
        return stored
    }
}
