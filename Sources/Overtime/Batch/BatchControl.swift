import OvertimeProtocol

/// `overtime batch`'s control target: every task of the job, by name.
extension BatchState: ControlTarget {
    /// Every element's status; a sweep of more than `foldedSweepSize` elements lists on
    /// rows of their own only the elements that have started (or retry, or did not
    /// succeed), and one row, under the sweep's name, counts the rest.
    func controlStatus(now: MonotonicInstant) -> [TaskStatus] {
        var statuses: [TaskStatus] = []
        for entry in job.tasks.indices {
            let range = elements.elements(ofEntry: entry)
            guard let sweep = job.tasks[entry].sweep else {
                statuses.append(status(of: range.lowerBound))
                continue
            }
            let name = job.tasks[entry].name
            guard sweep.count > Self.foldedSweepSize else {
                statuses += range.map { index in
                    var status = status(of: index)
                    status.sweep = name
                    return status
                }
                continue
            }
            var waiting = 0, succeeded = 0
            for index in range {
                switch machine.state(of: index) {
                case .waiting: waiting += 1
                case .succeeded: succeeded += 1
                default:
                    var status = status(of: index)
                    status.sweep = name
                    statuses.append(status)
                }
            }
            var folded = TaskStatus(name: name, state: waiting > 0 ? .waiting : .succeeded,
                                    reason: "\(JobElements.grouped(range.count)) elements: \(JobElements.grouped(waiting)) not started, \(JobElements.grouped(succeeded)) succeeded, the others listed")
            folded.elements = ["waiting": waiting, "succeeded": succeeded]
            statuses.append(folded)
        }
        return statuses
    }

    /// Sweeps larger than this are folded in `ctl status`: a list a person reads.
    static let foldedSweepSize = 1_000

    var sweepsWithoutSeries: Set<String> {
        Set(job.tasks.filter { ($0.sweep?.count ?? 0) > RunMetrics.largestSweepWithSeries }.map(\.name))
    }

    private func status(of index: Int) -> TaskStatus {
        let name = elements.name(index)
        let attempts = machine.attempts(of: index)
        let state = machine.state(of: index)
        if case .running = state, var status = handles[index]?.syncOperations.status() {
            status.name = name
            status.attempts = attempts
            return status
        }
        let shown: TaskStatus.State = switch state {
        case .waiting: .waiting
        case .retryWait: .retrying
        case .running: .starting
        case .succeeded: .succeeded
        case .failed: .failed
        case .skipped: .skipped
        }
        return TaskStatus(name: name, attempts: attempts, state: shown, reason: finished.reason(at: index))
    }

    private func index(of name: String) -> Result<Int, ControlFailure> {
        if let index = machine.index(named: name) { return .success(index) }
        if let entry = elements.entry(named: name), job.tasks[entry].sweep != nil {
            return .failure(.wholeSweep(name))
        }
        return .failure(.noTaskInBatch(name, closest: Spelling.closest(to: name, among: job.tasks.map(\.name))))
    }

    /// An operator's extend or revoke: done now to a running task; to one still starting
    /// (its log being made), once it has started.
    private func changeBudget(_ index: Int, _ action: String, uid: UInt32,
                              _ request: @escaping (TaskHandle.SynchronousOperations) -> TaskMachine.OperatorResult) -> Result<String, ControlFailure> {
        guard case .running = machine.state(of: index), handles[index] != nil || starting[index] != nil else {
            return .failure(.notRunning(elements.name(index)))
        }
        recordOperator(index, action, uid: uid)
        if let handle = handles[index], starting[index] == nil { return ControlWords.budget(request(handle.syncOperations)) }
        whenStarted(index) { _ = request($0) }
        return .success("starting: done once it has started")
    }

    private func recordOperator(_ index: Int, _ action: String, uid: UInt32) {
        record(batchEvent: "operator", task: elements.name(index), now: MonotonicInstant.now()) { w in
            w.key("action"); w.string(action)
            w.key("uid"); w.int(Int(uid))
        }
    }

    func controlLogPath(task: String) -> Result<String, ControlFailure> {
        index(of: task).map { journal.logPath(for: elements.name($0)) }
    }

    /// A batch hears its engine's warning itself (`--warn-signal`); it takes none from a client.
    func controlExpiring(task: String, remaining: Duration) -> Result<String, ControlFailure> {
        .failure(.batchTakesNoExpiring)
    }

    /// An operator's cancel of a batch task: always the batch's own (`user`), whatever the
    /// request says; a batch's reasons are its own to give.
    func controlCancel(task: String, reason _: CancelReason, grace _: Duration?, uid: UInt32) -> Result<String, ControlFailure> {
        if let entry = elements.entry(named: task), job.tasks[entry].sweep != nil {
            record(batchEvent: "operator", task: task, now: MonotonicInstant.now()) { w in
                w.key("action"); w.string("cancel")
                w.key("uid"); w.int(Int(uid))
            }
            let now = MonotonicInstant.now()
            let words = decide(at: now) { machine, actions in machine.cancelEntry(entry, now: now, into: &actions) }
            afterInput(now)
            return .success(words)
        }
        return index(of: task).map { index in
            recordOperator(index, "cancel", uid: uid)
            let now = MonotonicInstant.now()
            let word = decide(at: now) { machine, actions in machine.cancelTask(index, now: now, into: &actions) }
            afterInput(now)
            return word
        }
    }

    func controlExtend(task: String, by amount: Duration, pastMax: Bool, uid: UInt32) -> Result<String, ControlFailure> {
        index(of: task).flatMap { index in
            changeBudget(index, ControlWords.extendAction(amount, pastMax: pastMax), uid: uid) { $0.extend(by: amount, pastMax: pastMax) }
        }
    }

    func controlRevoke(task: String, after: Duration, uid: UInt32) -> Result<String, ControlFailure> {
        index(of: task).flatMap { index in
            changeBudget(index, ControlWords.revokeAction(after), uid: uid) { $0.revoke(after: after) }
        }
    }
}
