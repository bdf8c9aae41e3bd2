import OvertimeProtocol

/// Counts what a supervisor's events say for its metrics (docs/metrics.md): attempts, cancels
/// by reason, how attempts ended, bad lines, and each task's last progress. One of the
/// supervisor's event sinks; loop-thread only, like every sink.
///
/// A task is known by its name, so that a batch's retries (a new runner each) add up to one
/// task. What the supervisor can say of a task at any moment (its state, budget, memory)
/// is not kept here: a scrape asks the supervisor for it (`TaskStatus`).
public final class MetricsRecorder: EventSink {
    /// What the events told of one task.
    public struct TaskRecord: Sendable {
        public let name: String
        /// Spawns, a failed one included.
        public var attempts = 0
        public var cancels: [CancelReason: Int] = [:]
        /// The progress it reported last (merged, as the events carry it) and when.
        public var progress: Progress?
        public var lastProgress: MonotonicInstant?
        /// When an attempt of it last ended in success.
        public var lastSuccess: MonotonicInstant?
        /// How its last attempt ended, once one has.
        public var lastOutcome: TaskOutcome?
        /// Running now (started, not yet exited).
        public var running = false
        /// Times an attempt of it was flagged a straggler.
        public var stragglers = 0

        init(name: String) { self.name = name }
    }

    /// Every task seen, in the order it first started.
    public private(set) var tasks: [TaskRecord] = []
    public private(set) var cancels: [CancelReason: Int] = [:]
    public private(set) var outcomes: [OutcomeKind: Int] = [:]
    public private(set) var protocolErrors = 0
    /// Stragglers flagged, by group (`stragglerGroups`), each group from 0.
    public private(set) var stragglers: [String: Int] = [:]
    /// The group each watched task of the job file is compared in, by the task's name (an
    /// element's is its sweep's); a task not in it is counted under its own name.
    public var stragglerGroups: [String: String] = [:] {
        didSet { for group in stragglerGroups.values where stragglers[group] == nil { stragglers[group] = 0 } }
    }
    /// Stalls under `--on-stall warn` and checkpoint advice sent: run-wide counts, a large
    /// sweep's elements included.
    public private(set) var stalls = 0
    public private(set) var checkpointAdvice = 0
    /// Runner ids (`TaskRef.id`, one per attempt) to their task's place in `tasks`: a
    /// progress event costs one integer lookup.
    private var indexByRunner: [Int: Int] = [:]
    private var indexByName: [String: Int] = [:]

    public init() {}

    /// The sweeps whose elements are counted in the run-wide families only, with no record
    /// of their own (`RunMetrics.sweepsWithoutSeries`): an element is named `sweep[…]`.
    public var sweepsWithoutSeries: Set<String> = []
    /// Runners of such elements, so that their events are told apart once each.
    private var countedOnly: Set<Int> = []

    /// What was recorded of the task named `name`.
    public func record(named name: String) -> TaskRecord? {
        indexByName[name].map { tasks[$0] }
    }

    public func receive(_ encoded: inout EncodedEvent) {
        let event = encoded.event
        if !sweepsWithoutSeries.isEmpty, indexByRunner[event.task.id] == nil, countsOnly(event) { return }
        let index = self.index(of: event.task)
        switch event.kind {
        case .started:
            tasks[index].attempts += 1
            tasks[index].running = true
        case let .progress(progress, _):
            tasks[index].progress = progress
            tasks[index].lastProgress = event.time
        case let .cancelSent(reason, _, _):
            tasks[index].cancels[reason, default: 0] += 1
            cancels[reason, default: 0] += 1
        case .protocolError, .stalled, .advice:
            countRunWide(event.kind)
        case .straggler:
            tasks[index].stragglers += 1
            countStraggler(event.task.name)
        case let .exited(outcome):
            // A command that could not be started has no `started` event; it was tried.
            if case .failedToStart = outcome.termination { tasks[index].attempts += 1 }
            tasks[index].running = false
            tasks[index].lastOutcome = outcome
            if outcome.succeeded { tasks[index].lastSuccess = event.time }
            outcomes[outcome.kind, default: 0] += 1
            indexByRunner[event.task.id] = nil
        default:
            break
        }
    }

    /// Counts the event of an element with no record of its own in the run-wide families;
    /// false for any other task's.
    private func countsOnly(_ event: TaskEvent) -> Bool {
        let id = event.task.id
        if !countedOnly.contains(id) {
            let name = event.task.name
            guard let open = name.firstIndex(of: "["), sweepsWithoutSeries.contains(String(name[..<open])) else { return false }
            countedOnly.insert(id)
        }
        switch event.kind {
        case let .cancelSent(reason, _, _): cancels[reason, default: 0] += 1
        case .straggler: countStraggler(event.task.name)
        case let .exited(outcome):
            outcomes[outcome.kind, default: 0] += 1
            countedOnly.remove(id)
        default: countRunWide(event.kind)
        }
        return true
    }

    /// One more straggler in the group of the task named `name` (`train[lr=0.1]` is of `train`).
    private func countStraggler(_ name: String) {
        let entry = name.last == "]" ? name.firstIndex(of: "[").map { String(name[..<$0]) } ?? name : name
        stragglers[stragglerGroups[entry] ?? entry, default: 0] += 1
    }

    /// The events only the run-wide counters count.
    private func countRunWide(_ kind: TaskEvent.Kind) {
        switch kind {
        case .protocolError: protocolErrors += 1
        case .stalled: stalls += 1
        case .advice: checkpointAdvice += 1
        default: break
        }
    }

    private func index(of task: TaskRef) -> Int {
        if let index = indexByRunner[task.id] { return index }
        let index: Int
        if let known = indexByName[task.name] {
            index = known
        } else {
            index = tasks.count
            tasks.append(TaskRecord(name: task.name))
            indexByName[task.name] = index
        }
        indexByRunner[task.id] = index
        return index
    }
}
