import OvertimeLoop
import OvertimeProtocol

/// One task on the loop: carries out what its `TaskMachine` decides, and feeds it what the
/// process, its channel and its timer report. Loop-thread only.
final class TaskRunner {
    let ref: TaskRef
    private let spec: TaskSpec
    private let handle: TaskHandle
    private unowned let supervisor: Supervisor
    private unowned let core: SupervisorCore
    private var machine: TaskMachine
    private var process: ChildProcess?
    /// What the child processes' exit callbacks reach this runner by: they may come after
    /// it is gone (a task ended by the supervisor's shutdown is freed before its reaping).
    /// Not a weak reference, which would give the runner a side table and put every retain
    /// of it (one a progress line, through its streams' callbacks) on the runtime's slow
    /// path: 8% of the loop's samples at 10,000 lines a second.
    private var link: RunnerLink {
        if let madeLink { return madeLink }
        let made = RunnerLink(self)
        madeLink = made
        return made
    }
    private var madeLink: RunnerLink?
    /// The leader's fd 3; nil once it has reached its end.
    private var channel: ReporterChannel?
    /// The task's other processes, connected to its `OVERTIME_SOCKET` (DESIGN §3a).
    private var reporters: [ReporterID: ReporterChannel] = [:]
    private var nextReporter = 1
    /// Where they connect; nil when no socket could be had (the task runs without one).
    private var reporterListener: UnixListener?
    /// The task's sd_notify socket (DESIGN §3b); nil when off or not to be had.
    private var notifyReceiver: DatagramReceiver?
    /// Senders refused on it lately: their datagrams are dropped unread and counted.
    private var refusedNotifiers = RefusedSenders()
    /// The read end of s6's notification fd (`Readiness.notifyFD`) until its first newline.
    private var notifyFDReader: ByteStream?
    private var outputs: [OutputReader] = []
    /// The pseudo-terminals the task writes to, and the terminal whose size each follows.
    private var terminals: [(reader: TerminalReader, sizeFrom: Int32)] = []
    private let timer: LoopTimer
    private var armedFor: MonotonicInstant?
    private var exit: ChildExit?
    private var exitedAt: MonotonicInstant?
    private var finished = false
    /// Cancelled by Ctrl-C (see `TaskOutcome.interrupted`).
    var interrupted = false
    /// SIGKILLed because the supervisor shut down with the task still running.
    private var killedAtShutdown = false
    /// The task's own cgroup (DESIGN §7); nil where the run has none.
    private var cgroup: TaskCgroup?
    /// The kernel's word when its memory crosses the max (v1).
    private var memoryLevels: MemoryLevelWatch?
    /// The signals Overtime sent the task, and those it passed on, to say who sent the one
    /// it died of.
    private var sentSignals: Set<Int32> = []
    private var forwardedSignals: Set<Int32> = []

    /// A reporter writing bad lines faster than this is read no faster: past it within a
    /// second, its channel is not read until the second is over (its own writes wait), so
    /// garbage on one channel costs the loop a bounded share however fast it comes.
    static let badLinesPerSecond = 20_000

    /// After the leader exits, how long to wait for its channel and pipes to reach end of
    /// file. Whatever it wrote before dying is already buffered and read at once; this only
    /// bounds the wait for a descendant outside its group that still holds them open.
    static let drainLimit = Duration.seconds(2)
    /// While a consumer holds the task's output back (a terminal slower than the task),
    /// the drain limit starts again, up to this long after the leader's exit.
    static let heldDrainLimit = Duration.seconds(30)
    /// A consumer held the output back since the drain limit was last armed.
    private var heldSinceDrainArmed = false

    deinit {
        madeLink?.runner = nil
    }

    init(spec: TaskSpec, handle: TaskHandle, supervisor: Supervisor, core: SupervisorCore) {
        self.spec = spec
        self.handle = handle
        self.ref = handle.ref
        self.supervisor = supervisor
        self.core = core
        let now = Self.clock()
        machine = TaskMachine(policy: Self.machinePolicy(spec), memory: spec.memory, startedAt: now)
        timer = LoopTimer(loop: supervisor.loop)
    }

    /// The task's time rules with its diagnose command's limit.
    private static func machinePolicy(_ spec: TaskSpec) -> BudgetPolicy {
        var policy = spec.policy
        policy.diagnoseLimit = spec.diagnose?.limit
        return policy
    }

    static func clock() -> MonotonicInstant {
        .now()
    }

    // MARK: Start

    func start() {
        guard !spec.arguments.isEmpty else {
            // Before anything is opened: a log file must not be truncated for it.
            failToStart(SpawnError(.exec, errno: ErrorNumber.ENOENT))
            return
        }
        var passed: [Int32] = []   // descriptors the child inherits, closed here after spawn
        defer { passed.forEach(Descriptors.close) }
        do {
            let (ours, theirs) = try Descriptors.socketPair()
            passed.append(theirs)
            channel = ReporterChannel(id: .leader, stream: try ByteStream(loop: supervisor.loop, fd: ours), now: Self.clock())
            openReporterSocket()
            if spec.readiness.notifySocket { openNotifySocket() }
            var stdin: Int32 = 0
            if case .null = spec.stdin {
                stdin = try core.nullInput ?? Descriptors.openNull(forWriting: false).also { passed.append($0) }
            }
            let stdout = try outputDescriptor(spec.stdout, inherit: 1, &passed)
            let stderr: Int32
            if case let .file(outPath, _) = spec.stdout, case let .file(errPath, true) = spec.stderr, outPath == errPath {
                stderr = stdout  // one log for both: one open, and the two streams interleave in order
            } else if case .terminal = spec.stdout, case .terminal = spec.stderr {
                stderr = stdout  // one terminal for both, as on a real one
            } else {
                stderr = try outputDescriptor(spec.stderr, inherit: 2, &passed)
            }
            var descriptors = [stdin, stdout, stderr, theirs]
            if let notifyFD = spec.readiness.notifyFD {
                let (readEnd, writeEnd) = try Descriptors.pipe()
                passed.append(writeEnd)
                notifyFDReader = try ByteStream(loop: supervisor.loop, fd: readEnd)
                while descriptors.count < Int(notifyFD) { descriptors.append(-1) }
                descriptors.append(writeEnd)
            }
            var request = SpawnRequest(
                arguments: spec.arguments,
                baseEnvironment: spec.inheritEnvironment ? core.inheritedEnvironment : nil,
                environment: environmentOverrides(),
                workingDirectory: spec.workingDirectory,
                descriptors: descriptors
            )
            isolate(&request)
            if let tree = core.cgroups {
                let made = try tree.taskCgroup(memoryLimit: spec.memory.hardLimit, memoryBeforeExec: spec.memory.max != nil)
                cgroup = made
                request.cgroupProcs = made.procsForSpawn
                request.cgroupDirectory = made.v2DirectoryDescriptor
            }
            defer { cgroup?.spawned() }
            process = try ChildProcess(loop: supervisor.loop, request: request) { [link] exit in
                link.runner?.processExited(exit)
            }
        } catch {
            failToStart(error)
            return
        }
        core.runners[ref.id] = self
        if let cgroup, cgroup.memoryJoinPending { core.memoryJoins.schedule(ref.id, loop: supervisor.loop) }
        if let max = spec.memory.max {
            core.memoryWatch.watch(ref.id, loop: supervisor.loop)
            // The kernel says when the usage crosses the max (v1): a burst faster than the
            // samples is heard at once, not after the hard limit above the max.
            if let cgroup {
                memoryLevels = MemoryLevelWatch(loop: supervisor.loop, cgroup: cgroup, levels: [max]) { [unowned self] in
                    if let used = cgroup.memoryInUse(exactFrom: self.memoryCheckLevel) { self.memorySample(used) }
                }
            }
        }
        let now = Self.clock()
        machine = TaskMachine(policy: Self.machinePolicy(spec), memory: spec.memory, startedAt: now)
        if let channel { startReading(channel) }
        notifyFDReader?.startReading(
            onData: { [unowned self] bytes in
                // s6's protocol: a newline means ready; whatever precedes it is ignored.
                guard bytes.contains(UInt8(ascii: "\n")) else { return }
                self.closeNotifyFD()
                let now = Self.clock()
                self.decide(at: now) { machine, actions in machine.receive(.ready, now: now, into: &actions) }
            },
            onEnd: { [unowned self] _ in self.closeNotifyFD() }
        )
        let pid = process!.pid
        decide(at: now) { machine, actions in machine.start(pid: pid, now: now, into: &actions) }
        rearm(now: now)
        // A SIGTERM or SIGINT that came while this task was being spawned.
        core.applyTermination(to: self)
    }

    private func outputDescriptor(_ target: OutputTarget, inherit fd: Int32, _ passed: inout [Int32]) throws(SystemError) -> Int32 {
        switch target {
        case .inherit:
            return fd
        case .discard:
            if let shared = core.nullOutput { return shared }
            return try Descriptors.openNull(forWriting: true).also { passed.append($0) }
        case let .file(path, append):
            return try Descriptors.openForWriting(path, append: append).also { passed.append($0) }
        case let .capture(sink):
            return try capturePipe(into: sink, valve: nil, &passed)
        case let .terminal(sizeFrom, valve, sink):
            // Where no pseudo-terminal can be had (a container without /dev/pts), a pipe:
            // the output still arrives, only buffered as a pipe makes programs buffer it.
            guard let (reader, terminal) = try? Descriptors.outputTerminal(sizeFrom: sizeFrom) else {
                return try capturePipe(into: sink, valve: valve, &passed)
            }
            passed.append(terminal)
            let terminalReader = try TerminalReader(loop: supervisor.loop, fd: reader)
            drain(terminalReader, into: sink, valve: valve)
            terminals.append((terminalReader, sizeFrom))
            return terminal
        }
    }

    private func capturePipe(into sink: @escaping @Sendable ([UInt8]) -> Void, valve: OutputValve?, _ passed: inout [Int32]) throws(SystemError) -> Int32 {
        let (readEnd, writeEnd) = try Descriptors.pipe()
        passed.append(writeEnd)
        drain(try ByteStream(loop: supervisor.loop, fd: readEnd), into: sink, valve: valve)
        return writeEnd
    }

    /// Reads the task's output to its end into `sink`, before its `exited` event; while
    /// `valve` is held, reads nothing (the task then waits on its own output, never the loop).
    private func drain(_ reader: OutputReader, into sink: @escaping @Sendable ([UInt8]) -> Void, valve: OutputValve?) {
        outputs.append(reader)
        let loop = supervisor.loop
        reader.startReading(
            onData: { [unowned self, unowned reader] bytes in
                sink(Array(bytes))
                guard let valve, valve.isHeld else { return }
                self.heldSinceDrainArmed = true
                reader.pauseReading()
                let paused = LoopBound(reader, loop: loop)
                let registered = valve.whenReleased { loop.execute { paused.value.resumeReading() } }
                if !registered { reader.resumeReading() }  // released in between
            },
            onEnd: { [unowned self, unowned reader] _ in
                reader.close()
                self.outputs.removeAll { $0 === reader }
                self.terminals.removeAll { $0.reader === reader }
                self.finishIfDrained()
            }
        )
    }

    /// The variables set on top of the inherited environment: the account's (HOME, USER,
    /// LOGNAME, when switching user), the task's own, PYTHONPATH with the Python bridge after
    /// the task's own entries, then the `OVERTIME_*` ones, which nothing may override.
    private func environmentOverrides() -> [String] {
        var overrides = spec.isolation.accountEnvironment.merging(spec.environment) { _, task in task }
        if let bridge = spec.pythonBridge {
            let own = spec.environment["PYTHONPATH"] ?? (spec.inheritEnvironment ? ProcessEnvironment.values(of: ["PYTHONPATH"])["PYTHONPATH"] : nil)
            overrides["PYTHONPATH"] = PythonBridge.searchPath(own, appending: bridge)
        }
        overrides["OVERTIME_FD"] = "3"
        if let reporterListener { overrides["OVERTIME_SOCKET"] = reporterListener.path }
        if let notifyReceiver {
            overrides["NOTIFY_SOCKET"] = notifyReceiver.path
            // A daemon that pets systemd's watchdog does so at half this: each ping is a
            // heartbeat, so the window is the interval it must keep.
            if let window = spec.policy.effectiveWindow, window > .zero {
                overrides["WATCHDOG_USEC"] = String(max(1, window.nanoseconds / 1000))
            } else {
                overrides["WATCHDOG_USEC"] = nil
            }
        }
        overrides["OVERTIME_TASK"] = spec.name
        overrides["OVERTIME_RUN"] = core.runID
        return overrides.sorted(by: { $0.key < $1.key }).map { "\($0.key)=\($0.value)" }
    }

    private func isolate(_ request: inout SpawnRequest) {
        let isolation = spec.isolation
        request.limits = isolation.limits.map(RLimit.init)
        request.niceness = isolation.niceness
        if let (uid, gid) = isolation.credentialsToSwitch() {
            request.userID = uid
            request.groupID = gid
        }
    }

    private func failToStart(_ error: any Error) {
        if let cgroup, let tree = core.cgroups { core.retiredCgroups.retire(cgroup, from: tree, loop: supervisor.loop) }
        cgroup = nil
        channel?.close()
        channel = nil
        closeReporters()
        outputs.forEach { $0.close() }
        outputs.removeAll()
        let failure: SpawnFailure
        if let spawn = error as? SpawnError {
            failure = Self.spawnFailure(spawn, spec: spec)
        } else if let system = error as? SystemError {
            failure = SpawnFailure(errno: system.errno, message: system.description, beforeExec: true)
        } else {
            failure = SpawnFailure(errno: 0, message: "\(error)", beforeExec: true)
        }
        exit = nil
        finish(termination: .failedToStart(failure))
    }

    static func spawnFailure(_ error: SpawnError, spec: TaskSpec) -> SpawnFailure {
        let command = spec.arguments.first ?? ""
        let reason = SystemError("", errno: error.errno).reason
        let isolation = spec.isolation
        let userName = isolation.user.map { $0.name ?? String($0.uid) } ?? "?"
        let groupName = isolation.effectiveGroupID.map(String.init) ?? "?"
        let message = switch error.step {
        case .exec:
            switch error.errno {
            case ErrorNumber.ENOENT: command.isEmpty ? "no command given" : "\(command): command not found"
            case ErrorNumber.EACCES where command.contains("/") && Descriptors.isDirectory(command): "\(command): is a directory"
            case ErrorNumber.EACCES: "\(command): permission denied"
            case ErrorNumber.ENOEXEC: "\(command): not an executable format"
            case ErrorNumber.EISDIR: "\(command): is a directory"
            default: "\(command): \(reason)"
            }
        case .workingDirectory: "cannot use working directory \(spec.workingDirectory ?? ""): \(reason)"
        case .user: "cannot run as user \(userName): \(reason)"
        case .group, .supplementaryGroups:
            isolation.user == nil ? "cannot run as group \(groupName): \(reason)"
                                  : "cannot run as user \(userName): cannot switch to group \(groupName): \(reason)"
        case let .limit(index):
            "cannot set the \(isolation.limits.indices.contains(index) ? isolation.limits[index].resource.rawValue : "?") limit: \(reason)"
        case .priority: "cannot set nice value \(isolation.niceness.map(String.init) ?? "?"): \(reason)"
        case .parentDeath: "cannot tie the task's life to the supervisor's: \(reason)"
        case .fork: "cannot start a process: \(reason)"
        case .cgroup: "cannot enter the task's cgroup: \(reason)"
        case .session: "cannot start a session for the task: \(reason)"
        case .descriptors: "cannot pass descriptors to the task: \(reason)"
        }
        return SpawnFailure(errno: error.errno, message: message, beforeExec: error.step != .exec)
    }

    // MARK: Inputs

    private func startReading(_ reporter: ReporterChannel) {
        reporter.stream.startReading(
            onData: { [unowned self, unowned reporter] bytes in self.channelData(bytes, from: reporter) },
            onEnd: { [unowned self, unowned reporter] _ in self.channelEnded(reporter) }
        )
    }

    private func channelData(_ bytes: UnsafeRawBufferPointer, from reporter: ReporterChannel) {
        let now = Self.clock()
        let badBefore = reporter.badLines
        reporter.framer.feed(bytes) { item in handleLine(item, from: reporter, now: now) }
        rearm(now: now)
        paceBadLines(of: reporter, inThisChunk: reporter.badLines - badBefore, now: now)
    }

    /// Holds back a reporter that has sent more than `badLinesPerSecond` bad lines this second.
    private func paceBadLines(of reporter: ReporterChannel, inThisChunk: Int, now: MonotonicInstant) {
        if now - reporter.badLinesSince >= .seconds(1) {
            // A new second, which this chunk opens.
            reporter.badLinesSince = now
            reporter.badLines = inThisChunk
        }
        guard reporter.badLines > Self.badLinesPerSecond, exit == nil, !reporter.closed else { return }
        reporter.stream.pauseReading()
        let timer = reporter.paceTimer ?? LoopTimer(loop: supervisor.loop)
        reporter.paceTimer = timer
        timer.schedule(inNanoseconds: max(0, (reporter.badLinesSince + .seconds(1) - now).nanoseconds)) { [unowned reporter] in
            if !reporter.closed { reporter.stream.resumeReading() }
        }
    }

    private func handleLine(_ item: LineFramer.Item, from reporter: ReporterChannel, now: MonotonicInstant) {
        switch item {
        case let .line(line):
            do {
                let message = try ChildMessage.decode(line)
                // Not through `decide`'s closure, which would copy the message once more:
                // this is the path every progress line takes.
                var actions = takeActionList()
                machine.receive(message, from: reporter.id, now: now, into: &actions)
                carryOut(&actions, at: now)
            } catch {
                reporter.badLines += 1
                let text = Self.excerpt(line)
                decide(at: now) { machine, actions in machine.rejectLine(error, excerpt: text, into: &actions) }
            }
        case let .overlong(excerpt):
            reporter.badLines += 1
            let text = excerpt.withUnsafeBytes { Self.excerpt($0) }
            decide(at: now) { machine, actions in
                machine.rejectLine(ProtocolError(.tooLong, "line longer than 64 KiB"), excerpt: text, into: &actions)
            }
        }
    }

    /// The first bytes of a bad line, printable: invalid UTF-8 and control characters are
    /// replaced, so a report never carries them on.
    static func excerpt(_ line: UnsafeRawBufferPointer) -> String {
        let limit = 60
        var text = String(decoding: line.prefix(limit), as: UTF8.self)
        text = String(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "�" : Character($0) })
        return line.count > limit ? text + "…" : text
    }

    private func channelEnded(_ reporter: ReporterChannel) {
        let now = Self.clock()
        reporter.framer.finish { item in handleLine(item, from: reporter, now: now) }
        reporter.close()
        if reporter.id == .leader {
            channel = nil
            finishIfDrained()
        } else {
            reporters[reporter.id] = nil
            decide(at: now) { machine, actions in machine.reporterLeft(reporter.id, into: &actions) }
            finishIfDrained()
        }
    }

    // MARK: Reporters

    /// The task's own socket, in the abstract namespace (nothing on disk to clean up; the
    /// name goes with the socket): `@overtime/<run>/<task id>`. A task still runs without
    /// one (out of descriptors, say): only its leader can report then.
    private func openReporterSocket() {
        // A random part: a name taken already (squatted, or left by anything) makes the
        // next try differ rather than leave the task without a socket.
        for _ in 0..<3 where reporterListener == nil {
            let address = "@overtime/\(core.runID)/\(ref.id)-\(Self.nameSuffix())"
            reporterListener = try? UnixListener(loop: supervisor.loop, path: address) { [unowned self] stream, peer in
                self.reporterConnected(stream, peer: peer)
            }
        }
    }

    /// Eight random hex digits for a socket's name.
    private static func nameSuffix() -> String {
        let text = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return String(repeating: "0", count: 8 - text.count) + text
    }

    /// A process connected to the task's socket: a reporter when it is part of the task
    /// (DESIGN §3a), else refused and counted.
    private func reporterConnected(_ stream: ByteStream, peer: PeerCredentials?) {
        guard isMember(peer) else {
            stream.close()
            supervisor.emit(TaskEvent(task: ref, time: Self.clock(), kind: .reporterRefused(pid: peer?.pid, uid: peer?.uid)))
            return
        }
        let now = Self.clock()
        let reporter = ReporterChannel(id: ReporterID(nextReporter), stream: stream, now: now)
        nextReporter += 1
        reporters[reporter.id] = reporter
        startReading(reporter)
        decide(at: now) { machine, actions in machine.reporterJoined(reporter.id, now: now, into: &actions) }
    }

    /// `@overtime/<run>/<task id>/notify`, a datagram socket whose every datagram carries
    /// its sender's credentials.
    private func openNotifySocket() {
        for _ in 0..<3 where notifyReceiver == nil {
            let address = "@overtime/\(core.runID)/\(ref.id)-\(Self.nameSuffix())/notify"
            notifyReceiver = try? DatagramReceiver(loop: supervisor.loop, path: address, admit: { [unowned self] sender in
                self.admitsNotifier(sender)
            }) { [unowned self] datagram in
                self.notified(datagram)
            }
        }
    }

    /// One sd_notify datagram: from a process of the task, its notifications in order, a
    /// barrier's descriptor closed once those before it are handled; any other descriptor
    /// it carried is closed (no file-descriptor store here).
    private func notified(_ datagram: DatagramReceiver.Datagram) {
        var descriptors = datagram.descriptors
        defer { descriptors.forEach(Descriptors.close) }
        let now = Self.clock()
        if datagram.truncated {
            decide(at: now) { machine, actions in
                machine.rejectLine(ProtocolError(.tooLong, "an sd_notify datagram longer than \(DatagramReceiver.maximumLength) bytes"),
                                   excerpt: datagram.bytes.withUnsafeBytes { Self.excerpt($0) }, into: &actions)
            }
            return
        }
        let (notifications, problems) = Notification.parse(datagram.bytes)
        for problem in problems {
            decide(at: now) { machine, actions in
                machine.rejectLine(problem, excerpt: datagram.bytes.withUnsafeBytes { Self.excerpt($0) }, into: &actions)
            }
        }
        for notification in notifications {
            if notification == .barrier {
                // Everything before it is handled: closing the descriptor tells the sender.
                descriptors.forEach(Descriptors.close)
                descriptors.removeAll()
                continue
            }
            decide(at: now) { machine, actions in machine.notify(notification, now: now, into: &actions) }
        }
        rearm(now: now)
    }

    /// A process of the task (DESIGN §3a). A sender already gone when it is read (it wrote
    /// and exited: `python -c 'sd_notify(…)'`, a short-lived hook) leaves nothing to ask but
    /// the uid the kernel recorded: it counts when that is the task's own user. (systemd
    /// meets the same race; `systemd-notify` waits on a barrier to avoid it.) The check
    /// keeps tasks from hearing each other and strangers out; it is no wall against the
    /// task's own user, who may signal or trace the task anyway.
    private func isMember(_ peer: PeerCredentials?) -> Bool {
        guard let leader = process?.pid, let peer else { return false }
        // With a cgroup, the kernel's own list says it (DESIGN §3a): a process that left the
        // session and lost its parent is still the task's.
        if let cgroup, peer.pid > 0, cgroup.processIDs().contains(peer.pid) { return true }
        switch ProcessTree.membership(of: peer.pid, inTaskLedBy: leader) {
        case .member: return true
        case .stranger: return false
        case .gone: return peer.uid == (spec.isolation.user?.uid ?? ProcessTree.currentUserID)
        }
    }

    /// Whether a datagram from `sender` is the task's, asked before it is read: a sender
    /// refused in the last second is dropped unchecked and counted; a new one is checked, and
    /// refused once, said. So only the task's own datagrams count against the socket's
    /// budget of handled datagrams a second, and an outsider's flood cannot use it up. A
    /// sender without a pid the supervisor can see (another pid namespace) is never a
    /// process of the task: it is remembered under pid 0.
    private func admitsNotifier(_ sender: PeerCredentials?) -> Bool {
        let now = Self.clock()
        let key = RefusedSenders.Sender(pid: sender?.pid ?? 0, uid: sender?.uid ?? .max)
        if refusedNotifiers.remembers(key, now: now) { return false }
        if isMember(sender) { return true }
        reportRefusedNotifiers(now: now)
        refusedNotifiers.refused(key, now: now)
        supervisor.emit(TaskEvent(task: ref, time: now, kind: .reporterRefused(pid: sender?.pid, uid: sender?.uid)))
        return false
    }

    /// The datagrams of refused senders dropped unread, once their senders are forgotten
    /// (`now` nil: all of them, at the end).
    private func reportRefusedNotifiers(now: MonotonicInstant?) {
        for (sender, count) in refusedNotifiers.due(now: now) {
            let named = sender.pid > 0   // pid 0: a sender the kernel could not name here
            supervisor.emit(TaskEvent(task: ref, time: now ?? Self.clock(),
                                      kind: .reporterRefused(pid: named ? sender.pid : nil, uid: named ? sender.uid : nil, count: count)))
        }
    }

    private func closeNotifyFD() {
        notifyFDReader?.close()
        notifyFDReader = nil
    }

    private func closeReporters() {
        closeNotifyFD()
        reporterListener?.close()
        reporterListener = nil
        notifyReceiver?.close()
        notifyReceiver = nil
        reportRefusedNotifiers(now: nil)
        for reporter in reporters.values { reporter.close() }
        reporters.removeAll()
    }

    private func timerFired() {
        armedFor = nil
        let now = Self.clock()
        if exit != nil {
            let held = heldSinceDrainArmed || outputs.contains(where: \.isPaused)
            if held, let exitedAt, now - exitedAt < Self.heldDrainLimit {
                // Held back by our own consumer (a terminal that does not take our output),
                // not by a descendant holding the pipe: what is in the kernel is the task's
                // output, still to be shown. Wait on, within bounds.
                heldSinceDrainArmed = false
                timer.schedule(inNanoseconds: Self.drainLimit.nanoseconds) { [unowned self] in self.timerFired() }
                return
            }
            // The drain limit passed: finish with what was read. A reporter still connected
            // is a descendant that outlived the leader: what it wrote so far counts.
            outputs.forEach { $0.close() }
            outputs.removeAll()
            for reporter in Array(reporters.values) { channelEnded(reporter) }
            if let channel { channelEnded(channel) } else { finishIfDrained() }
            return
        }
        decide(at: now) { machine, actions in machine.tick(now: now, into: &actions) }
        rearm(now: now)
    }

    private func processExited(_ status: ChildExit) {
        let now = Self.clock()
        exit = status
        exitedAt = now
        heldSinceDrainArmed = false
        cgroup?.abandonMemoryJoin()
        // What is left on the channels is read to their end now, however bad.
        for reporter in [channel].compactMap({ $0 }) + Array(reporters.values) {
            reporter.paceTimer?.cancel()
            reporter.stream.resumeReading()
        }
        decide(at: now) { machine, actions in machine.exited(into: &actions) }
        timer.cancel()
        timer.schedule(inNanoseconds: Self.drainLimit.nanoseconds) { [unowned self] in self.timerFired() }
        finishIfDrained()
    }

    // MARK: Operator requests

    func cancel(reason: CancelReason, grace: Duration?) -> TaskMachine.CancelResult {
        let now = Self.clock()
        let result = decide(at: now) { machine, actions in machine.cancel(reason: reason, grace: grace, now: now, into: &actions) }
        rearm(now: now)
        return result
    }

    /// SIGKILL now if the task is being cancelled.
    func escalate() {
        let now = Self.clock()
        decide(at: now) { machine, actions in machine.escalate(now: now, into: &actions) }
    }

    /// The task's own grace, for clipping it to a shutdown's.
    var grace: Duration { spec.policy.grace }

    func operatorExtend(by amount: Duration, pastMax: Bool) -> TaskMachine.OperatorResult {
        let now = Self.clock()
        let result = decide(at: now) { machine, actions in
            machine.operatorExtend(by: amount, pastMax: pastMax, now: now, into: &actions)
        }
        rearm(now: now)
        return result
    }

    func revoke(after: Duration) -> TaskMachine.OperatorResult {
        let now = Self.clock()
        let result = decide(at: now) { machine, actions in machine.revoke(after: after, now: now, into: &actions) }
        rearm(now: now)
        return result
    }

    /// The task as `overtime ctl status` shows it.
    func status(now: MonotonicInstant) -> TaskStatus {
        let usage: UsageSampler.Reading
        if let sampler = core.usageSampler {
            // Metrics are on: a page of a thousand tasks must not read their files here.
            usage = sampler.reading(of: ref.id) ?? UsageSampler.Reading()
        } else {
            let cpu = cpuSoFar()
            usage = UsageSampler.Reading(memory: currentMemory(), peakMemory: cgroup?.peakMemory(), cpuUser: cpu?.user, cpuSystem: cpu?.system)
        }
        let state: TaskStatus.State = switch machine.phase {
        case .running: .running
        case let .cancelling(reason): .cancelling(reason)
        case .exited: .exiting
        }
        let live = TaskStatus.Live(pid: process?.pid, elapsed: (now - machine.startedAt).seconds,
                                   remaining: machine.remaining(at: now)?.seconds, progress: machine.lastProgress,
                                   reporters: machine.reporters.count, memory: usage.memory,
                                   peakMemory: usage.peakMemory ?? (machine.peakMemory > 0 ? machine.peakMemory : nil),
                                   cpuUser: usage.cpuUser, cpuSystem: usage.cpuSystem)
        return TaskStatus(name: ref.name, state: state, live: live)
    }

    /// Where the metrics' sampler reads this task's memory and CPU (`memoryMeasure`'s
    /// sources, off the loop); nil once nothing measures it.
    var usageSource: UsageSampler.Source? {
        switch memoryMeasure {
        case let .cgroup(cgroup), let .processes(cgroup): .cgroup(cgroup.usageFilesNow)
        case let .session(leader): .session(leader: leader)
        case .none: nil
        }
    }

    /// Records an operator's request in the event stream (and so in journals), with the uid
    /// of whoever asked.
    func recordOperator(_ action: String, uid: UInt32) {
        supervisor.emit(TaskEvent(task: ref, time: Self.clock(), kind: .operatorRequest(action: action, uid: uid)))
    }

    // MARK: Memory and CPU

    /// How the memory watchdog measures this task (DESIGN §7).
    enum MemoryMeasure {
        /// Its memory cgroup's usage.
        case cgroup(TaskCgroup)
        /// The resident sets of the processes its v2 cgroup lists.
        case processes(TaskCgroup)
        /// The resident sets of its leader's session, from one pass over /proc.
        case session(Int32)
        case none
    }

    var memoryMeasure: MemoryMeasure {
        if let cgroup, cgroup.memoryCountsTask { return .cgroup(cgroup) }
        if let cgroup, cgroup.v2Directory != nil { return .processes(cgroup) }
        if let pid = process?.pid, exit == nil { return .session(pid) }
        return .none
    }

    /// Its time to join its v1 memory cgroup has come (`MemoryJoins`): while it runs.
    func joinMemoryCgroup() {
        if exit == nil { cgroup?.joinMemory() }
    }

    /// The level from which a sample must be exact: the warning level (or the max).
    var memoryCheckLevel: UInt64 {
        spec.memory.warnBytes ?? spec.memory.max ?? 0
    }

    /// A sample from the watchdog.
    func memorySample(_ used: UInt64) {
        guard exit == nil else { return }
        let now = Self.clock()
        decide(at: now) { machine, actions in machine.memorySample(used, now: now, into: &actions) }
        rearm(now: now)
    }

    /// Its memory now, measured as the watchdog would (for `ctl status`).
    private func currentMemory() -> UInt64? {
        switch memoryMeasure {
        case let .cgroup(cgroup): return cgroup.memoryInUse()
        case let .processes(cgroup): return ProcessMemory.residentSum(cgroup.processIDs())
        case let .session(leader): return core.residentBySession(at: Self.clock())[leader]   // as the watchdog measures it
        case .none: return nil
        }
    }

    /// CPU seconds so far, from the v2 cgroup (nil without one, until the reaper counts).
    private func cpuSoFar() -> (user: Double, system: Double)? {
        cgroup?.cpuMicroseconds().map { (Double($0.user) / 1e6, Double($0.system) / 1e6) }
    }

    /// What the task used, at its end: the cgroup's figures where it had one, else the
    /// watchdog's samples and what the reaper counted.
    private func finalUsage() -> ResourceUsage {
        var usage = ResourceUsage()
        let reaped = process?.usage
        if let cpu = cgroup?.cpuMicroseconds() {
            usage.cpuUser = .microseconds(Int64(clamping: cpu.user))
            usage.cpuSystem = .microseconds(Int64(clamping: cpu.system))
        } else if let reaped {
            usage.cpuUser = .microseconds(Int64(clamping: reaped.userMicroseconds))
            usage.cpuSystem = .microseconds(Int64(clamping: reaped.systemMicroseconds))
        }
        if let peak = cgroup?.peakMemory() {
            // A late join leaves out what the task touched before it: the reaper's high-water
            // mark of its biggest process may then be the larger.
            usage.peakMemory = cgroup?.memoryJoinedLate == true ? max(peak, reaped?.maxResidentBytes ?? 0) : peak
            usage.memorySource = .cgroup
        } else if machine.peakMemory > 0 {
            usage.peakMemory = max(machine.peakMemory, reaped?.maxResidentBytes ?? 0)
            usage.memorySource = .sampled
        } else if let reaped, reaped.maxResidentBytes > 0 {
            usage.peakMemory = reaped.maxResidentBytes
            usage.memorySource = .reaper
        }
        return usage
    }

    // MARK: Diagnosis

    /// The diagnose command while it runs, and the descriptor its output goes to (the
    /// task's stderr, its log, or a pipe to the task's output handler).
    private var diagnosis: (process: ChildProcess, notes: DiagnosisNotes, startedAt: MonotonicInstant)?

    /// Starts the diagnose command against the still-running leader (DESIGN §7). Outside
    /// the task's cgroup and group, so the cancel that follows does not kill it too.
    /// Returns false when it did not start (the cancel is then due at once).
    private func startDiagnosis() -> Bool {
        guard let diagnose = spec.diagnose, let pid = process?.pid, !process!.isReaped else { return false }
        let output: Int32
        let notes: DiagnosisNotes
        do {
            (output, notes) = try diagnosisOutput()
        } catch {
            return false
        }
        defer { Descriptors.close(output) }
        let command = diagnose.command(pid: pid)
        notes.write("overtime: \(notedName): \(machine.cancelReason?.rawValue ?? "cancel") due; diagnosing first (at most \(DurationText.format(diagnose.limit))): \(command)\n")
        let request = SpawnRequest(arguments: ["/bin/sh", "-c", command], baseEnvironment: core.inheritedEnvironment,
                                   environment: ["OVERTIME_TASK_PID=\(pid)", "OVERTIME_TASK=\(spec.name)"],
                                   workingDirectory: spec.workingDirectory,
                                   descriptors: [core.nullInput ?? -1, output, output])
        do {
            let child = try ChildProcess(loop: supervisor.loop, request: request) { [link] exit in
                link.runner?.diagnosisExited(exit)
            }
            diagnosis = (child, notes, Self.clock())
            return true
        } catch {
            notes.write("overtime: \(notedName): the diagnose command could not start: \(error)\n")
            notes.close()
            return false
        }
    }

    /// Where the diagnosis writes (the command's descriptor, closed once it is spawned), and
    /// where the lines around it go (a descriptor of their own, closed once it has exited).
    /// A log is appended to, as the task's own logs are opened.
    private func diagnosisOutput() throws(SystemError) -> (output: Int32, notes: DiagnosisNotes) {
        let output: Int32
        switch spec.stderr {
        case .inherit: output = try Descriptors.duplicate(2)
        case .discard: output = try Descriptors.openNull(forWriting: true)
        case let .file(path, _): output = try Descriptors.openForWriting(path, append: true)
        case let .capture(sink), let .terminal(_, _, sink):
            var writeEnd: [Int32] = []
            output = try capturePipe(into: sink, valve: nil, &writeEnd)
        }
        do {
            return (output, DiagnosisNotes(fd: try Descriptors.duplicate(output)))
        } catch {
            Descriptors.close(output)
            throw error
        }
    }

    /// The task's name as the diagnosis lines show it: they go to its stderr, a terminal
    /// perhaps, and a name (by default its command's base name) may hold anything.
    private var notedName: String { JobFileText.printable(spec.name, limit: .max) }

    private func diagnosisExited(_ exit: ChildExit) {
        guard let running = diagnosis else { return }
        diagnosis = nil
        let how = switch exit {
        case let .exited(code): "exited \(code)"
        case let .signaled(signal): "died of \(Signal(rawValue: signal).name)"
        }
        running.notes.write("overtime: \(notedName): the diagnose command \(how) after \(DurationText.format(Self.clock() - running.startedAt))\n")
        running.notes.close()
        diagnosisOver()
    }

    /// The diagnosis must stop (its limit passed, a cancel that cannot wait came, the task
    /// ended): SIGKILL to it, said now (the task, and the supervisor, may be gone before its
    /// exit is heard).
    private func cutDiagnosis(_ end: TaskMachine.DiagnosisEnd) {
        guard let running = diagnosis else { return }   // it ended by itself: said already
        diagnosis = nil
        running.process.signalGroup(Signal.kill.rawValue)
        let why = switch end {
        case .limitReached: "at its limit"
        case .preempted: "a cancel that could not wait came"
        case .taskEnded, .finished: "the task ended"
        }
        running.notes.write("overtime: \(notedName): the diagnose command was cut (\(why)) after \(DurationText.format(Self.clock() - running.startedAt))\n")
        running.notes.close()
    }

    private func diagnosisOver() {
        let now = Self.clock()
        decide(at: now) { machine, actions in machine.diagnosisEnded(now: now, into: &actions) }
        rearm(now: now)
    }

    /// The engine warned of its end: `expiring` to every reporter (`TaskMachine.engineExpiring`).
    func engineExpiring(remaining: Duration, source: EngineTimeSource) {
        let now = Self.clock()
        decide(at: now) { machine, actions in machine.engineExpiring(remaining: remaining, source: source, now: now, into: &actions) }
    }

    /// Passes a signal the supervisor received on to the task's group (while it runs).
    func forward(signal: Signal) {
        if signal == .windowChange {
            // The task's terminal follows the real one before the task is told it changed.
            for terminal in terminals { terminal.reader.copyWindowSize(from: terminal.sizeFrom) }
        }
        forwardedSignals.insert(signal.rawValue)
        process?.signalGroup(signal.rawValue)
    }

    // MARK: Actions

    /// The list inputs append to, kept between inputs so that none allocates one.
    private var spareActions: [TaskMachine.Action] = []

    /// Feeds the machine one input, then carries out what it decided, in order, stamping
    /// events with the input's time.
    @discardableResult
    private func decide<Answer>(at now: MonotonicInstant, _ input: (inout TaskMachine, inout [TaskMachine.Action]) -> Answer) -> Answer {
        var actions = takeActionList()
        let answer = input(&machine, &actions)
        carryOut(&actions, at: now)
        return answer
    }

    /// The spare list, for the length of one input: an action whose effects bring another
    /// input back here (an event whose sink cancels the task) gets a list of its own, and
    /// the machine is settled by then.
    @inline(__always)
    private func takeActionList() -> [TaskMachine.Action] {
        var actions: [TaskMachine.Action] = []
        swap(&actions, &spareActions)
        return actions
    }

    /// Carries out `actions` in order and keeps the emptied list for the next input. Each
    /// action is moved out of the list (reversed, then popped), so a progress event's
    /// strings are not retained and released once more per message, and nothing is left
    /// to clear.
    @inline(__always)
    private func carryOut(_ actions: inout [TaskMachine.Action], at now: MonotonicInstant) {
        var diagnosisFailed = false
        actions.reverse()
        while let action = actions.popLast() {
            switch consume action {
            case let .send(message, recipient):
                send(message, to: recipient)
            case let .signalGroup(signal):
                signalWhole(signal)
            case .killLeftovers:
                process?.killLeftoverGroup()
                cgroup?.killAll()
            case let .emit(kind):
                supervisor.emit(TaskEvent(task: ref, time: now, kind: kind))
            case .diagnose:
                diagnosisFailed = !startDiagnosis()
            case let .endDiagnosis(end):
                cutDiagnosis(end)
            }
        }
        spareActions = actions
        // A diagnosis that could not start ends once the list that began it is carried
        // out: its `diagnosing` event goes before the cancel that follows.
        if diagnosisFailed { diagnosisOver() }
    }

    /// A signal of Overtime's own to the whole task: every process in its cgroup where it
    /// has one (`setsid` or not; SIGKILL through `cgroup.kill`), else its process group.
    private func signalWhole(_ signal: Signal) {
        guard let process, !process.isReaped else { return }
        sentSignals.insert(signal.rawValue)
        guard let cgroup else {
            process.signalGroup(signal.rawValue)
            return
        }
        if signal == .kill {
            cgroup.killAll()
            process.signalGroup(signal.rawValue)
        } else if cgroup.signalAll(signal.rawValue) == 0 {
            process.signalGroup(signal.rawValue)  // not listed (yet, or any more): its group
        }
    }

    private func send(_ message: SupervisorMessage, to recipient: TaskMachine.Recipient) {
        switch recipient {
        case let .reporter(id):
            (id == .leader ? channel : reporters[id])?.stream.write(message.encoded())
        case .everyReporter:
            let line = message.encoded()
            channel?.stream.write(line)
            for reporter in reporters.values { reporter.stream.write(line) }
        }
    }

    /// Keeps the timer armed at the machine's next wake-up or earlier. A later wake-up
    /// (a deadline moved by progress) leaves the timer alone: it fires, finds nothing due,
    /// and re-arms.
    private func rearm(now: MonotonicInstant) {
        guard exit == nil, let wake = Self.nextWake(of: &machine) else { return }
        if let armed = armedFor, armed <= wake { return }
        armedFor = wake
        timer.schedule(inNanoseconds: max(0, (wake - now).nanoseconds)) { [unowned self] in self.timerFired() }
    }

    /// The machine's next wake, read in place. A plain read of `machine` (a struct of
    /// another module, in a class's property) copied it whole, retaining each of its
    /// fields, on every progress line: 3% of the loop at 10,000 lines a second.
    private static func nextWake(of machine: inout TaskMachine) -> MonotonicInstant? {
        machine.nextWake
    }

    // MARK: End

    /// The task ends once its leader is reaped and what it and its other reporters wrote
    /// has been read to the end (or the drain limit has passed).
    private func finishIfDrained() {
        guard let exit, channel == nil, reporters.isEmpty, outputs.isEmpty else { return }
        finish(termination: Self.termination(exit))
    }

    /// The supervisor is shutting down with this task not yet finished: SIGKILL to its
    /// group now if it still runs, and its outcome at once (killed, or how it exited if it
    /// only waited for its output to drain), so that nobody awaits it forever. What it
    /// wrote and was read is in the outcome; the loop closes the rest.
    func endForShutdown() {
        guard !finished else { return }
        // Nothing of this runner may be called back once it is gone: its streams close now
        // (what was read is in the outcome).
        channel?.close()
        channel = nil
        outputs.forEach { $0.close() }
        outputs.removeAll()
        if let exit {
            finish(termination: Self.termination(exit))
            return
        }
        sentSignals.insert(Signal.kill.rawValue)
        cgroup?.killAll()
        process?.signalGroup(Signal.kill.rawValue)
        killedAtShutdown = true
        exitedAt = Self.clock()
        finish(termination: .signaled(.kill))
    }

    private static func termination(_ exit: ChildExit) -> Termination {
        switch exit {
        case let .exited(code): .exited(code)
        case let .signaled(signal): .signaled(Signal(rawValue: signal))
        }
    }

    private func finish(termination: Termination) {
        guard !finished else { return }
        finished = true
        timer.close()
        channel?.paceTimer?.close()
        closeReporters()
        core.runners[ref.id] = nil
        cutDiagnosis(.taskEnded)
        core.memoryWatch.forget(ref.id)
        memoryLevels?.close()
        memoryLevels = nil
        let killed = (machine.killSent || killedAtShutdown) && termination == .signaled(.kill)
        var outcome = TaskOutcome(
            task: ref,
            pid: process?.pid,
            termination: termination,
            cancelReason: machine.cancelReason,
            killed: killed,
            elapsed: (exitedAt ?? machine.startedAt) - machine.startedAt,
            lastProgress: machine.lastProgress,
            result: machine.result,
            protocolErrors: machine.protocolErrors,
            wasReady: machine.isReady,
            interrupted: interrupted
        )
        outcome.usage = finalUsage()
        outcome.oomKills = cgroup?.oomKills()
        if case let .signaled(signal) = termination {
            outcome.signalSender = sentSignals.contains(signal.rawValue) ? .overtime
                : forwardedSignals.contains(signal.rawValue) ? .forwarded : .outside
            // Without a counter to ask: a SIGKILL from nobody here while the task's memory
            // was within a tenth of its max is most likely the kernel's.
            if outcome.oomKills == nil, signal == .kill, outcome.signalSender == .outside, let max = spec.memory.max,
               machine.lastMemory >= max - max / 10 {
                outcome.likelyOOM = true
            }
        }
        if let cgroup, let tree = core.cgroups {
            self.cgroup = nil
            core.retiredCgroups.retire(cgroup, from: tree, loop: supervisor.loop)
        }
        supervisor.emit(TaskEvent(task: ref, time: Self.clock(), kind: .exited(outcome)))
        handle.complete(outcome)
    }
}

extension Int32 {
    /// Runs `body` with the value and returns it (for registering a descriptor as it opens).
    func also(_ body: (Int32) -> Void) -> Int32 {
        body(self)
        return self
    }
}

/// A runner as its children's exit callbacks hold it (`TaskRunner.link`): cleared by the
/// runner's deinit, so a callback after it sees nil, as through a weak reference. Loop-thread
/// only, like the runner.
final class RunnerLink {
    unowned(unsafe) var runner: TaskRunner?

    init(_ runner: TaskRunner) {
        self.runner = runner
    }
}
