import OvertimeLoop

/// Stragglers (docs/jobfile.md, Stragglers): the batch feeds its tasks' starts, shares done
/// and ends to a `StragglerWatch`, asks it on a tick, and carries out what it decides.
extension BatchState {
    /// How often the running tasks' paces are compared. A pace is a share per second since a
    /// start at least a warm-up ago: it moves slowly, and a straggler found a tick late costs
    /// a tick of a run that lasts many.
    static let stragglerCheckInterval = Duration.seconds(2)

    /// The rule and the group the job file's task `task` is watched under; nil: not watched.
    func stragglerRule(of task: JobTask) -> (policy: StragglerPolicy, group: String)? {
        // A sweep's elements are its group unless they name another; a task that is no
        // element is in a group only when it names one.
        guard let policy = task.stragglers ?? job.stragglers,
              let group = task.peerGroup ?? (task.sweep != nil ? task.name : nil) else { return nil }
        return (policy, group)
    }

    var stragglerGroups: [String: String] {
        guard stragglerWatch != nil else { return [:] }
        var groups: [String: String] = [:]
        for task in job.tasks { if let rule = stragglerRule(of: task) { groups[task.name] = rule.group } }
        return groups
    }

    /// Feeds one event of element `index` to the watch.
    func watchPace(_ index: Int, _ event: TaskEvent) {
        switch event.kind {
        case .started:
            guard let rule = stragglerRule(of: job.tasks[elements.entry(of: index)]) else { return }
            stragglerWatch?.started(index, group: rule.group, policy: rule.policy, at: event.time)
        case let .progress(progress, _):
            stragglerWatch?.progressed(index, fraction: progress.fractionCompleted)
        case .exited:
            stragglerWatch?.ended(index)
        default:
            break
        }
    }

    func scheduleStragglerCheck() {
        let timer = stragglerTimer ?? LoopTimer(loop: supervisor.loop)
        stragglerTimer = timer
        timer.schedule(inNanoseconds: Self.stragglerCheckInterval.nanoseconds) { [weak self] in
            guard let self, self.stragglerTimer != nil else { return }
            self.checkStragglers(now: MonotonicInstant.now())
            if self.stragglerTimer != nil { self.scheduleStragglerCheck() }
        }
    }

    /// Flags what the watch finds now: a `straggler` event of the task, which goes where its
    /// own events go (the journal, the display, the event file, the metrics), and for a
    /// restart, the queue's cancel with reason `straggler` and its new attempt.
    private func checkStragglers(now: MonotonicInstant) {
        guard let flags = stragglerWatch?.check(now: now), !flags.isEmpty else { return }
        for flag in flags {
            guard let handle = handles[flag.element] else { continue }
            supervisor.emit(TaskEvent(task: handle.ref, time: now,
                                      kind: .straggler(rate: flag.rate, median: flag.median, below: flag.below, restart: flag.restart)))
            if flag.restart {
                decide(at: now) { machine, actions in machine.restartStraggler(flag.element, now: now, into: &actions) }
            }
        }
        afterInput(now)
    }
}
