import CLibUV
import COvertime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The kernel's word that a v1 memory cgroup's usage crossed a level (`cgroup.event_control`
/// with an eventfd per level, in either direction), so the watchdog looks at once rather
/// than at its next sample: a task growing at gigabytes a second crosses `memory-max` and
/// the hard limit above it within one sampling interval. Loop-thread only.
///
/// An accelerator: the samples go on as before, and where it cannot be set up (v2, whose
/// memory.events does not count levels of our choosing; a kernel without event_control)
/// nothing else changes.
public final class MemoryLevelWatch: LoopHandleOwner {
    private let eventFD: Int32
    private let usageFD: Int32
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private var onCrossed: (() -> Void)?
    private var closed = false

    /// Registers `levels` (bytes) on the task's v1 memory cgroup; nil when it cannot.
    public init?(loop: EventLoop, cgroup: TaskCgroup, levels: [UInt64], onCrossed: @escaping () -> Void) {
        guard let directory = cgroup.memoryDirectory, !cgroup.memoryIsV2, !levels.isEmpty else { return nil }
        guard let events = try? Syscall.retrying("eventfd", { overtime_eventfd() }) else { return nil }
        guard let usage = try? CgroupFiles.openFile(directory + "/memory.usage_in_bytes", O_RDONLY) else {
            Descriptors.close(events)
            return nil
        }
        // Registering a level makes the kernel wait for an RCU grace period (tens of
        // milliseconds): not on the loop, which a thousand starting tasks would stall for
        // seconds. A thread of its own does it with copies of both descriptors (the
        // registration lives as long as the eventfd's file, whoever closes which number).
        guard let eventsCopy = try? Descriptors.duplicate(events), let usageCopy = try? Descriptors.duplicate(usage) else {
            Descriptors.close(usage)
            Descriptors.close(events)
            return nil
        }
        let lines = levels.map { "\(eventsCopy) \(usageCopy) \($0)" }
        let control = directory + "/cgroup.event_control"
        DetachedThread.run {
            for line in lines { CgroupFiles.write(line, to: control) }
            Descriptors.close(eventsCopy)
            Descriptors.close(usageCopy)
        }
        eventFD = events
        usageFD = usage
        self.onCrossed = onCrossed
        handle = .allocate(capacity: 1)
        guard (try? uvCheck("watch the memory levels' eventfd", uv_poll_init(loop.uvLoop, handle, events))) != nil else {
            handle.deallocate()
            closed = true
            return nil   // deinit closes the two descriptors
        }
        super.init()
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        _ = try? uvCheck("watch the memory levels' eventfd", uv_poll_start(handle, Int32(UV_READABLE.rawValue), Self.readable))
    }

    private static let readable: uv_poll_cb = { h, status, _ in
        let watch = Unmanaged<MemoryLevelWatch>.fromOpaque(h!.pointee.data).takeUnretainedValue()
        // An error on the eventfd would come back on every turn: stop listening (the
        // samples go on).
        guard status >= 0 else { return watch.close() }
        watch.crossed()
    }

    private func crossed() {
        var count: UInt64 = 0
        // Resets the counter; a missed read only wakes us again.
        _ = try? Syscall.retrying("read the memory levels' eventfd") { read(eventFD, &count, 8) }
        onCrossed?()
    }

    /// Stops listening (the kernel drops the registration when the eventfd closes).
    public func close() {
        guard !closed else { return }
        closed = true
        onCrossed = nil
        closeOwnedHandle(handle)
    }

    override func closeForShutdown() { close() }

    deinit {
        Descriptors.close(eventFD)
        Descriptors.close(usageFD)
    }
}
