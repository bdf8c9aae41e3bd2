import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Bytes for a descriptor (or any blocking output), written by a thread of its own so that
/// whoever reads them — or the filesystem under them — can never hold up the loop.
///
/// The loop thread produces most of what Overtime writes: plain lines and JSON events on
/// stdout and stderr, the `--events` file, a batch's journal, the metrics textfile, the
/// notes around a diagnosis. A reader that stops reading (a paused pager, `| (sleep 30; cat)`,
/// a container log driver applying back-pressure, Ctrl-S on a terminal, a FIFO's reader gone
/// to sleep) or a filesystem that stalls (NFS, Lustre, a frozen mount) would otherwise stop
/// the loop in `write(2)`, and with it every deadline, the channel and the signals. So
/// `write` only queues, and the thread makes the blocking writes. (A descriptor is never made
/// non-blocking: its open file description may be shared with the task and the shell, whose
/// own writes would start failing with EAGAIN; and a regular file blocks regardless.)
///
/// What waits is bounded. Past `limits.soft` queued bytes a `latest` line replaces its own
/// waiting one (the latest progress wins), and `event` lines are refused at the door once the
/// queue passes `limits.hard`; `kept` lines — a task's end, the final report, errors — are
/// always queued. Nothing queued is reordered, and nothing but a replaced `latest` line is
/// lost. When the queue runs dry after something was dropped, `dropNote` is told how much
/// (on the writing thread, before anything queued later is written), once for each time the
/// output was blocked.
///
/// `@unchecked Sendable`: besides the `Mutex`, its only state is a pthread mutex and
/// condition variable, made for use from any thread (Mutex has no condition to wait on).
public final class QueuedWriter: @unchecked Sendable {
    /// What may be dropped when the output does not keep up.
    public enum Importance: Sendable, Equatable {
        /// Only the newest line with this key matters (a task's progress or heartbeat).
        case latest(key: Int)
        /// Dropped, and counted, only when the queue is past its hard limit.
        case event
        /// Never dropped.
        case kept
    }

    /// How many queued bytes make the output count as blocked.
    public struct Limits: Sendable {
        /// Above this many queued bytes, `latest` lines replace each other.
        public var soft: Int
        /// Above this many, `event` lines are refused too.
        public var hard: Int

        public init(soft: Int, hard: Int) {
            self.soft = soft
            self.hard = hard
        }

        public static let standard = Limits(soft: 256 * 1024, hard: 4 * 1024 * 1024)
    }

    private struct Entry {
        var bytes: [UInt8]
        var key: Int?
        /// Run on the writing thread in this entry's place (`perform`).
        var work: (@Sendable () -> Void)? = nil
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
        /// A write failed for good (the reader is gone): nothing more can be written.
        var broken = false
        /// `closeWhenWritten` was called: the thread ends once the queue is empty.
        var closing = false
    }

    public let limits: Limits
    private let queue = Mutex(Queue())
    /// Guards nothing but the wake-ups: the thread waits on it for work, `flush` for an
    /// empty queue. (Mutex has no condition variable.)
    private let lock: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// Makes the blocking write; false when nothing more can be written.
    private let output: @Sendable ([UInt8]) -> Bool
    /// Told, on the writing thread, how many lines and bytes were dropped in a blocked spell.
    private let dropNote: @Sendable (_ lines: Int, _ bytes: Int) -> Void
    /// Run once, on the writing thread, after the last write once `closeWhenWritten` was called.
    private let onClose: @Sendable () -> Void

    /// A writer of `output`, which makes the blocking writes (each call gets everything that
    /// was waiting, joined, in order) and says whether the writer can go on.
    public init(limits: Limits = .standard, output: @escaping @Sendable ([UInt8]) -> Bool,
                onClose: @escaping @Sendable () -> Void = {},
                dropNote: @escaping @Sendable (_ lines: Int, _ bytes: Int) -> Void) {
        self.limits = limits
        self.output = output
        self.onClose = onClose
        self.dropNote = dropNote
        lock = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        pthread_cond_init(condition, nil)
    }

    /// A writer of descriptor `fd`: a write that fails (the reader gone, a full disk) ends
    /// the writing, and what is queued after it is let go. `closesDescriptor`: `fd` is
    /// closed by `closeWhenWritten`.
    public convenience init(fd: Int32, limits: Limits = .standard, closesDescriptor: Bool = false,
                            dropNote: @escaping @Sendable (_ lines: Int, _ bytes: Int) -> Void) {
        self.init(limits: limits, output: { bytes in (try? Descriptors.writeAll(fd, bytes)) != nil },
                  onClose: { if closesDescriptor { Descriptors.close(fd) } }, dropNote: dropNote)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(lock)
        lock.deallocate()
        condition.deallocate()
    }

    /// Queues `bytes` (whole lines); never waits for the output.
    public func write(_ bytes: [UInt8], _ importance: Importance = .kept) {
        guard !bytes.isEmpty else { return }
        let (startThread, wake) = queue.withLock { q -> (Bool, Bool) in
            guard !q.broken, !q.closing else { return (false, false) }
            switch importance {
            case let .latest(key):
                if q.bytes + bytes.count > limits.soft, let waiting = q.latestIndex[key] {
                    q.droppedLines += 1
                    q.droppedBytes += q.entries[waiting].bytes.count
                    q.bytes -= q.entries[waiting].bytes.count
                    q.entries[waiting] = Entry(bytes: [], key: nil)
                }
                q.latestIndex[key] = q.entries.count
            case .event:
                if q.bytes + bytes.count > limits.hard {
                    q.droppedLines += 1
                    q.droppedBytes += bytes.count
                    return (false, false)
                }
            case .kept:
                break
            }
            q.bytes += bytes.count
            return Self.enqueue(Entry(bytes: bytes, key: importance.key), &q)
        }
        if startThread { start() }
        if wake { signal() }
    }

    /// Runs `work` on the writing thread once everything queued before it is written (or
    /// the output is gone), before anything queued after it: blocking work on the same
    /// output's filesystem, kept off the loop and in order. Not after `closeWhenWritten`.
    public func perform(_ work: @escaping @Sendable () -> Void) {
        let (startThread, wake) = queue.withLock { q in Self.enqueue(Entry(bytes: [], key: nil, work: work), &q) }
        if startThread { start() }
        if wake { signal() }
    }

    /// Appends `entry`; says whether the thread must be started, or woken. A thread busy
    /// writing looks at the queue again when done: no wake-up needed (a futex call saved
    /// per line in a burst).
    private static func enqueue(_ entry: Entry, _ q: inout Queue) -> (startThread: Bool, wake: Bool) {
        q.entries.append(entry)
        defer { q.threadStarted = true }
        return (!q.threadStarted, !q.writing)
    }

    /// Waits until everything queued has been written (or the output is gone): before exit.
    /// However long the output takes: what is kept must reach it.
    public func flush() {
        pthread_mutex_lock(lock)
        while queue.withLock({ q in !q.broken && q.threadStarted && (q.writing || !q.entries.isEmpty) }) {
            pthread_cond_wait(condition, lock)
        }
        pthread_mutex_unlock(lock)
    }

    /// `flush`, for at most `limit`: where the order of what is written here and what
    /// another writer writes to the same output matters, but not enough to wait long for.
    /// - Returns: whether everything queued was written.
    @discardableResult
    public func flush(waitingAtMost limit: Duration) -> Bool {
        var end = timespec()
        clock_gettime(CLOCK_REALTIME, &end)
        let total = Int64(end.tv_nsec) + limit.components.attoseconds / 1_000_000_000 + limit.components.seconds * 1_000_000_000
        end.tv_sec += Int(total / 1_000_000_000)
        end.tv_nsec = Int(total % 1_000_000_000)
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        while queue.withLock({ q in !q.broken && q.threadStarted && (q.writing || !q.entries.isEmpty) }) {
            if pthread_cond_timedwait(condition, lock, &end) == ETIMEDOUT { return false }
        }
        return true
    }

    /// Nothing more will be written: what is queued is written, then `onClose` runs (closing
    /// the descriptor) and the thread ends, all without waiting here.
    public func closeWhenWritten() {
        let started = queue.withLock { q -> Bool in
            q.closing = true
            return q.threadStarted
        }
        if started { signal() } else { onClose() }
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
            Unmanaged<QueuedWriter>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        if rc == 0 {
            pthread_detach(thread)
        } else {
            // No thread to write with: write here, blocking, as a last resort.
            Unmanaged<QueuedWriter>.fromOpaque(context).release()
            queue.withLock { $0.threadStarted = false }
            writeTaken(takeAll())
        }
    }

    private func run() {
        while true {
            pthread_mutex_lock(lock)
            var closing = false
            while queue.withLock({ q in closing = q.closing; return q.entries.isEmpty && !q.closing }) {
                pthread_cond_wait(condition, lock)
            }
            pthread_mutex_unlock(lock)
            let taken = takeAll()
            if !taken.isEmpty { writeTaken(taken) }
            if closing, queue.withLock({ $0.entries.isEmpty }) {
                onClose()
                return
            }
        }
    }

    /// Takes what is queued; the writer counts as writing until `writeTaken` is done with
    /// it (nothing taken: not writing, or a `flush` would wait for ever).
    private func takeAll() -> [Entry] {
        queue.withLock { q in
            let taken = q.entries
            q.entries.removeAll(keepingCapacity: true)
            q.latestIndex.removeAll(keepingCapacity: true)
            q.bytes = 0
            q.writing = !taken.isEmpty
            return taken
        }
    }

    private func writeTaken(_ entries: [Entry]) {
        // One write for what was taken between two pieces of work, not one per line.
        var joined: [UInt8] = []
        joined.reserveCapacity(entries.reduce(0) { $0 + $1.bytes.count })
        var ok = true
        for entry in entries {
            if let work = entry.work {
                ok = writeJoined(&joined, ok)
                work()
            }
            joined += entry.bytes
        }
        ok = writeJoined(&joined, ok)
        let dropped = queue.withLock { q -> (Int, Int)? in
            if !ok {
                q.broken = true
                // Work still runs: whoever queued it waits for it.
                q.entries.removeAll { $0.work == nil }
                q.latestIndex.removeAll()
                q.bytes = 0
            }
            guard q.entries.isEmpty, q.droppedLines > 0 else { return nil }
            defer { q.droppedLines = 0; q.droppedBytes = 0 }
            return (q.droppedLines, q.droppedBytes)
        }
        // Before this writer counts as written: `flush` must find the note written or queued.
        if let (lines, bytes) = dropped { dropNote(lines, bytes) }
        queue.withLock { $0.writing = false }
        signal()
    }

    /// Writes what `joined` holds, unless the output is gone; empties it. Returns whether the
    /// output can go on.
    private func writeJoined(_ joined: inout [UInt8], _ ok: Bool) -> Bool {
        defer { joined.removeAll(keepingCapacity: true) }
        guard ok, !queue.withLock({ $0.broken }) else { return false }
        return joined.isEmpty || output(joined)
    }
}

extension QueuedWriter.Importance {
    fileprivate var key: Int? {
        if case let .latest(key) = self { return key }
        return nil
    }
}
