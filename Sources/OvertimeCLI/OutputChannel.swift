import Overtime
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Overtime's own output on one descriptor (stdout or stderr), written by a thread of its
/// own so that whoever reads it can never hold up the supervisor.
///
/// The loop thread produces most of it (plain lines, JSON events, notes). A reader that
/// stops reading — a paused pager, `| (sleep 30; cat)`, a container log driver applying
/// back-pressure, Ctrl-S on a terminal, a suspended ssh client — would otherwise stop the
/// loop in `write(2)`, and with it every deadline, the channel and the signals. So `write`
/// only queues, and the thread makes the blocking writes. (The descriptor is never made
/// non-blocking: its open file description is shared with the task and the shell, whose
/// own writes would start failing with EAGAIN.)
///
/// What waits is bounded. Past `softLimit` queued bytes a task's progress line replaces its
/// own waiting one (the latest progress wins), and event lines are dropped once the queue
/// passes `hardLimit`; lines marked `kept` — a task's end, the final report and table,
/// errors — are always queued. When the queue runs dry after something was dropped,
/// `dropNote` is told how much, once for each time the output was blocked.
///
/// `@unchecked Sendable`: besides the `Mutex`, its only state is a pthread mutex and
/// condition variable, made for use from any thread (Mutex has no condition to wait on).
final class OutputChannel: @unchecked Sendable {
    /// What may be dropped when the reader does not keep up.
    enum Importance: Sendable, Equatable {
        /// Only the newest line with this key matters (a task's progress or heartbeat).
        case latest(key: Int)
        /// An event line: dropped only when the queue is past its hard limit.
        case event
        /// Never dropped.
        case kept
    }

    /// Above this many queued bytes, progress lines replace each other.
    static let softLimit = 256 * 1024
    /// Above this many, event lines are dropped too.
    static let hardLimit = 4 * 1024 * 1024

    private struct Entry {
        var bytes: [UInt8]
        var key: Int?
    }

    private struct Queue {
        /// Entries in order; a replaced one is left empty in place.
        var entries: [Entry] = []
        var bytes = 0
        /// Where the waiting line of each `latest` key is in `entries`.
        var latestIndex: [Int: Int] = [:]
        var droppedLines = 0
        var droppedBytes = 0
        /// The thread is writing what it took.
        var writing = false
        var threadStarted = false
        /// A write failed (the reader is gone): nothing more can be shown.
        var broken = false
    }

    let fd: Int32
    private let queue = Mutex(Queue())
    /// Guards nothing but the wake-ups: the thread waits on it for work, `flush` for an
    /// empty queue. (Mutex has no condition variable.)
    private let lock: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// Told, on the writing thread, how many lines and bytes were dropped in a blocked spell.
    private let dropNote: @Sendable (_ lines: Int, _ bytes: Int) -> Void

    init(fd: Int32, dropNote: @escaping @Sendable (_ lines: Int, _ bytes: Int) -> Void) {
        self.fd = fd
        self.dropNote = dropNote
        lock = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(lock)
        lock.deallocate()
        condition.deallocate()
    }

    /// Queues `bytes` (whole lines); never waits for the reader.
    func write(_ bytes: [UInt8], _ importance: Importance = .kept) {
        guard !bytes.isEmpty else { return }
        let (startThread, wake) = queue.withLock { q -> (Bool, Bool) in
            guard !q.broken else { return (false, false) }
            switch importance {
            case let .latest(key):
                if q.bytes + bytes.count > Self.softLimit, let waiting = q.latestIndex[key] {
                    q.droppedLines += 1
                    q.droppedBytes += q.entries[waiting].bytes.count
                    q.bytes -= q.entries[waiting].bytes.count
                    q.entries[waiting] = Entry(bytes: [], key: nil)
                }
                q.latestIndex[key] = q.entries.count
            case .event:
                if q.bytes + bytes.count > Self.hardLimit {
                    q.droppedLines += 1
                    q.droppedBytes += bytes.count
                    return (false, false)
                }
            case .kept:
                break
            }
            q.entries.append(Entry(bytes: bytes, key: importance.key))
            q.bytes += bytes.count
            defer { q.threadStarted = true }
            // A thread busy writing looks at the queue again when done: no wake-up needed
            // (a futex call saved per line in a burst).
            return (!q.threadStarted, !q.writing)
        }
        if startThread { start() }
        if wake { signal() }
    }

    /// Waits until everything queued has been written (or the reader is gone): before exit.
    /// However long the reader takes: what is kept must reach it.
    func flush() {
        pthread_mutex_lock(lock)
        while queue.withLock({ q in !q.broken && q.threadStarted && (q.writing || !q.entries.isEmpty) }) {
            pthread_cond_wait(condition, lock)
        }
        pthread_mutex_unlock(lock)
    }

    private func signal() {
        pthread_mutex_lock(lock)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(lock)
    }

    private func start() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            Unmanaged<OutputChannel>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        if rc == 0 {
            pthread_detach(thread)
        } else {
            // No thread to write with: write here, blocking, as a last resort.
            Unmanaged<OutputChannel>.fromOpaque(context).release()
            queue.withLock { $0.threadStarted = false }
            writeTaken(takeAll())
        }
    }

    private func run() {
        while true {
            pthread_mutex_lock(lock)
            while queue.withLock({ $0.entries.isEmpty }) {
                pthread_cond_wait(condition, lock)
            }
            pthread_mutex_unlock(lock)
            writeTaken(takeAll())
        }
    }

    private func takeAll() -> [Entry] {
        queue.withLock { q in
            defer {
                q.entries.removeAll(keepingCapacity: true)
                q.latestIndex.removeAll(keepingCapacity: true)
                q.bytes = 0
                q.writing = true
            }
            return q.entries
        }
    }

    private func writeTaken(_ entries: [Entry]) {
        // One write(2) for what was taken, not one per line.
        var joined: [UInt8] = []
        joined.reserveCapacity(entries.reduce(0) { $0 + $1.bytes.count })
        for entry in entries { joined += entry.bytes }
        let ok = TerminalDevice.writeAll(fd, joined)
        let dropped = queue.withLock { q -> (Int, Int)? in
            if !ok {
                q.broken = true
                q.entries.removeAll()
                q.latestIndex.removeAll()
                q.bytes = 0
            }
            guard q.entries.isEmpty, q.droppedLines > 0 else { return nil }
            defer { q.droppedLines = 0; q.droppedBytes = 0 }
            return (q.droppedLines, q.droppedBytes)
        }
        // Before this channel counts as written: `flush` must find the note queued.
        if let (lines, bytes) = dropped { dropNote(lines, bytes) }
        queue.withLock { $0.writing = false }
        signal()
    }
}

extension OutputChannel.Importance {
    fileprivate var key: Int? {
        if case let .latest(key) = self { return key }
        return nil
    }
}

extension OutputChannel.Importance {
    /// How much a line about `event` matters when the reader falls behind: a task's
    /// progress and heartbeats only as their latest (each its own key), its end always,
    /// anything else as an event.
    static func of(_ event: TaskEvent) -> Self {
        switch event.kind {
        case .progress: .latest(key: event.task.id &* 2)
        case .heartbeat: .latest(key: event.task.id &* 2 &+ 1)
        case .exited: .kept
        default: .event
        }
    }
}
