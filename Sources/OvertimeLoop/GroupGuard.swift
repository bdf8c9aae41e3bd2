import CLibUV
import COvertime
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Kills the loop's tasks if the supervisor dies without doing it itself — even by SIGKILL,
/// which no handler sees. Loop-thread only.
///
/// The parent-death signal (SIGKILL) each child gets reaches only
/// the task's leader; a shell script's children, or a trainer's data loaders, would live
/// on. So a small process started before the first spawn (`overtime_start_group_guard`), or
/// as soon as the run has cgroups to remove (`EventLoop.guardCgroupTrees`), holds
/// the list of live task groups, told over a socket; when the socket closes it SIGKILLs
/// every group still listed. A group is listed by the child itself before exec (by the
/// loop after the spawn when it could not) until its leader has been reaped and its
/// leftovers killed.
final class GroupGuard {
    private var channel: Int32 = -1
    private var guardPID: Int32 = 0
    private var started = false
    /// Records the guard has not taken yet (its socket buffer full: it is stopped or starved,
    /// say). The loop never blocks on the guard, and a record is never dropped: they go out
    /// in order, retried every few milliseconds until the guard takes them.
    private var pending: [Int32] = []
    private var retryTimer: LoopTimer?
    private unowned(unsafe) var loop: EventLoop?
    /// Told when the guard died and whether a new one took its place (see `checkAlive`).
    var onLost: ((_ replaced: Bool) -> Void)?
    /// The run's cgroup directories: the guard empties and removes them when the
    /// supervisor is gone (set before the first spawn).
    var cgroupTrees: [String] = []

    /// Whether the guard is this program run again (`overtime_start_group_guard`'s
    /// `as_own_program`), not a fork: for Overtime's CLI only, whose binary knows to become
    /// the guard before anything else of it runs. A program that embeds the library keeps
    /// the fork: run again, it would start as itself. (`EventLoop.startTaskGuardsAsThisProgram`.)
    static let startsAsOwnProgram = Atomic<Bool>(false)

    /// Starts the guard, once; call before the first guarded spawn. Without a guard (the
    /// fork failed) tasks still get their parent-death signal.
    func start(loop: EventLoop) {
        guard !started else { return }
        started = true
        self.loop = loop
        var fd: Int32 = -1
        let trees = CStringArray(cgroupTrees)
        let pid = trees.base.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: cgroupTrees.count + 1) {
            overtime_start_group_guard(&fd, $0, Int32(cgroupTrees.count), Self.startsAsOwnProgram.load(ordering: .relaxed) ? 1 : 0)
        }
        if pid > 0 {
            channel = fd
            guardPID = pid
        }
    }

    /// The channel a spawning child may list its own group on (-1: none, or not now). Not
    /// while records wait in the queue: the child's record would overtake them, and one of
    /// them may unlist the very group id the child is about to reuse.
    var channelForChild: Int32 {
        pending.isEmpty ? channel : -1
    }

    /// Lists a task's group.
    func watch(_ group: Int32) {
        send(group)
    }

    /// Takes a group off the list once it is gone.
    func forget(_ group: Int32) {
        send(-group)
    }

    private func send(_ record: Int32) {
        guard channel >= 0 else { return }
        pending.append(record)
        flush()
    }

    /// Sends what waits, in order, as far as the guard takes it now.
    private func flush() {
        while channel >= 0, var next = pending.first {
            // A sequenced-packet socket: each record goes whole or not at all.
            let code: Int32
            do throws(SystemError) {
                let sent = try Syscall.retrying("send to the group guard") {
                    withUnsafeBytes(of: &next) { systemSend(channel, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
                }
                if sent == MemoryLayout<Int32>.size {
                    pending.removeFirst()
                    continue
                }
                code = EAGAIN  // never cut (see above), but were it: try it whole later
            } catch {
                code = error.errno
            }
            switch code {
            case EPIPE, ECONNRESET, ENOTCONN:
                // The guard was killed from outside; its SIGCHLD brings a new one
                // (`checkAlive`). Until then, carry on without. (Only then: closing the
                // channel is what makes a guard kill every group it lists.)
                Descriptors.close(channel)
                channel = -1
                pending.removeAll()
            default:
                // Full (EAGAIN), or short of kernel memory for a moment (ENOBUFS): later.
                guard let loop else { return }
                let timer = retryTimer ?? LoopTimer(loop: loop)
                retryTimer = timer
                timer.schedule(inNanoseconds: 5_000_000) { [weak self] in self?.flush() }
            }
            return
        }
    }

    /// After a SIGCHLD: if the guard itself has died (killed from outside, out of memory),
    /// reaps it, starts a new one and lists every group in `live` with it, so the promise
    /// holds again, and says so through `onLost`. True when it had died.
    func checkAlive(live: () -> [Int32]) -> Bool {
        guard guardPID > 0 else { return false }
        var status: Int32 = 0
        guard waitpid(guardPID, &status, WNOHANG) == guardPID else { return false }
        replaceLost(live: live())
        return true
    }

    /// The guard's pid (0: none), for a reaper that takes every child.
    var pid: Int32 { guardPID }

    /// The guard is gone (reaped here): a new one, and every live group listed with it.
    private func replaceLost(live: [Int32]) {
        if channel >= 0 { Descriptors.close(channel) }
        channel = -1
        guardPID = 0
        pending.removeAll()
        guard let loop else {
            onLost?(false)
            return
        }
        started = false
        start(loop: loop)
        for group in live { watch(group) }
        onLost?(channel >= 0)
    }

    /// Closes the channel: the guard kills whatever is still listed and exits. It is our
    /// child, so `reapClosed()` reaps it, as the last thing the loop does: the guard's
    /// exit takes a moment, and the rest of the loop's shutdown runs meanwhile instead of
    /// waiting for it.
    func close() {
        retryTimer?.close()
        retryTimer = nil
        loop = nil  // no more retries: the loop is closing
        guard channel >= 0 else { return }
        flush()  // the last unlistings, if the guard takes them now
        // The run's trees, removed here where they are empty already (every task ended and
        // its cgroup gone): the guard then finds nothing to empty, and exits at once
        // instead of walking them while the supervisor waits. One still holding a cgroup
        // stays, for the guard.
        for tree in cgroupTrees { _ = rmdir(tree) }
        Descriptors.close(channel)
        channel = -1
        exitingPID = guardPID
        guardPID = 0
    }

    /// The guard closed and not yet reaped (0: none), which a sweep for orphans must leave
    /// alone: it has its channel's end to act on, and its exit is awaited.
    private(set) var exitingPID: Int32 = 0

    /// Reaps the closed guard; one that does not exit within 100 ms (stopped, say) is left
    /// to whoever inherits it.
    func reapClosed() {
        guard exitingPID > 0 else { return }
        _ = overtime_reap_within(exitingPID, 100)
        exitingPID = 0
    }

    /// After a SIGCHLD while the loop still runs (the guard was closed before the loop's
    /// shutdown, as tests do): reaps the closed guard if it has exited.
    func reapClosedIfExited() {
        guard exitingPID > 0 else { return }
        var status: Int32 = 0
        if waitpid(exitingPID, &status, WNOHANG) == exitingPID { exitingPID = 0 }
    }
}
