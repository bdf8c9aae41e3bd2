import OvertimeLoop
import OvertimeProtocol

/// Everything a task reports on (DESIGN §3, §3a, §3b): the leader's fd 3, the connections
/// of its other processes to its `OVERTIME_SOCKET`, its sd_notify socket and s6's
/// notification fd. Bytes come in; machine inputs go out to the runner, which decides.
/// Owns those handles and closes them in `close`. Loop-thread only.
final class TaskChannels {
    /// Not a safe `unowned`: this is the runner's own part, closed before the runner goes,
    /// and a checked reference would cost a pair of atomic reference-count operations on
    /// every line a task reports.
    private unowned(unsafe) let runner: TaskRunner
    private let loop: EventLoop
    /// The uid a process of the task runs as, for a sender gone before it is checked.
    private let taskUserID: UInt32
    /// The leader's fd 3; nil once it has reached its end.
    private var leader: ReporterChannel?
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

    /// A reporter writing bad lines faster than this is read no faster: past it within a
    /// second, its channel is not read until the second is over (its own writes wait), so
    /// garbage on one channel costs the loop a bounded share however fast it comes.
    static let badLinesPerSecond = 20_000

    init(runner: TaskRunner, loop: EventLoop, taskUserID: UInt32) {
        self.runner = runner
        self.loop = loop
        self.taskUserID = taskUserID
    }

    var reporterSocketPath: String? { reporterListener?.path }
    var notifySocketPath: String? { notifyReceiver?.path }
    /// Every channel has reached its end (or was closed).
    var isDrained: Bool { leader == nil && reporters.isEmpty }

    // MARK: Opening, before the spawn

    /// The leader's channel: returns the child's end of the socket pair, in `passed`.
    func openLeader(passing passed: inout [Int32]) throws -> Int32 {
        let (ours, theirs) = try Descriptors.socketPair()
        passed.append(theirs)
        leader = ReporterChannel(id: .leader, stream: try ByteStream(loop: loop, fd: ours), now: MonotonicInstant.now())
        return theirs
    }

    /// The task's own socket, in the abstract namespace (nothing on disk to clean up; the
    /// name goes with the socket): `@overtime/<run>/<task id>`. A task still runs without
    /// one (out of descriptors, say): only its leader can report then.
    func openReporterSocket(named base: String) {
        // A random part: a name taken already (squatted, or left by anything) makes the
        // next try differ rather than leave the task without a socket.
        for _ in 0..<3 where reporterListener == nil {
            reporterListener = try? UnixListener(loop: loop, path: "\(base)-\(Self.nameSuffix())") { [unowned self] stream, peer in
                self.reporterConnected(stream, peer: peer)
            }
        }
    }

    /// `<base>-<random>/notify`, a datagram socket whose every datagram carries its
    /// sender's credentials.
    func openNotifySocket(named base: String) {
        for _ in 0..<3 where notifyReceiver == nil {
            notifyReceiver = try? DatagramReceiver(loop: loop, path: "\(base)-\(Self.nameSuffix())/notify", admit: { [unowned self] sender in
                self.admitsNotifier(sender)
            }) { [unowned self] datagram in
                self.notified(datagram)
            }
        }
    }

    /// s6's notification fd: returns the child's end of the pipe, in `passed`.
    func openNotifyFD(passing passed: inout [Int32]) throws -> Int32 {
        let (readEnd, writeEnd) = try Descriptors.pipe()
        passed.append(writeEnd)
        notifyFDReader = try ByteStream(loop: loop, fd: readEnd)
        return writeEnd
    }

    /// Eight random hex digits for a socket's name.
    private static func nameSuffix() -> String {
        let text = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return String(repeating: "0", count: 8 - text.count) + text
    }

    /// The task is running: its leader's channel and notification fd are read from now.
    func startReading() {
        if let leader { startReading(leader) }
        notifyFDReader?.startReading(
            onData: { [unowned self] bytes in
                // s6's protocol: a newline means ready; whatever precedes it is ignored.
                guard bytes.contains(UInt8(ascii: "\n")) else { return }
                self.closeNotifyFD()
                let now = MonotonicInstant.now()
                self.runner.decide(at: now) { machine, actions in machine.receive(.ready, now: now, into: &actions) }
            },
            onEnd: { [unowned self] _ in self.closeNotifyFD() }
        )
    }

    // MARK: Lines

    private func startReading(_ reporter: ReporterChannel) {
        reporter.stream.startReading(
            onData: { [unowned self, unowned reporter] bytes in self.channelData(bytes, from: reporter) },
            onEnd: { [unowned self, unowned reporter] _ in self.channelEnded(reporter) }
        )
    }

    private func channelData(_ bytes: UnsafeRawBufferPointer, from reporter: ReporterChannel) {
        let now = MonotonicInstant.now()
        let badBefore = reporter.badLines
        reporter.framer.feed(bytes) { item in handleLine(item, from: reporter, now: now) }
        runner.rearm(now: now)
        paceBadLines(of: reporter, inThisChunk: reporter.badLines - badBefore, now: now)
    }

    /// Holds back a reporter that has sent more than `badLinesPerSecond` bad lines this second.
    private func paceBadLines(of reporter: ReporterChannel, inThisChunk: Int, now: MonotonicInstant) {
        if now - reporter.badLinesSince >= .seconds(1) {
            // A new second, which this chunk opens.
            reporter.badLinesSince = now
            reporter.badLines = inThisChunk
        }
        guard reporter.badLines > Self.badLinesPerSecond, !runner.hasExited, !reporter.closed else { return }
        reporter.stream.pauseReading()
        let timer = reporter.paceTimer ?? LoopTimer(loop: loop)
        reporter.paceTimer = timer
        timer.schedule(inNanoseconds: max(0, (reporter.badLinesSince + .seconds(1) - now).nanoseconds)) { [unowned reporter] in
            if !reporter.closed { reporter.stream.resumeReading() }
        }
    }

    private func handleLine(_ item: LineFramer.Item, from reporter: ReporterChannel, now: MonotonicInstant) {
        switch item {
        case let .line(line):
            do {
                var name: String?
                let message = try ChildMessage.decode(line, reporter: &name)
                if let name {
                    runner.decide(at: now) { machine, _ in machine.reporterNamed(reporter.id, name) }
                }
                runner.receive(message, from: reporter.id, now: now)
            } catch {
                reporter.badLines += 1
                runner.rejectLine(error, excerpt: Self.excerpt(line), now: now)
            }
        case let .overlong(excerpt):
            reporter.badLines += 1
            runner.rejectLine(ProtocolError(.tooLong, "line longer than 64 KiB"), excerpt: excerpt.withUnsafeBytes { Self.excerpt($0) }, now: now)
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
        let now = MonotonicInstant.now()
        reporter.framer.finish { item in handleLine(item, from: reporter, now: now) }
        reporter.close()
        if reporter.id == .leader {
            leader = nil
        } else {
            reporters[reporter.id] = nil
        }
        runner.decide(at: now) { machine, actions in machine.reporterLeft(reporter.id, into: &actions) }
        runner.finishIfDrained()
    }

    /// Writes `message` to whom the machine addressed it.
    func send(_ message: SupervisorMessage, to recipient: TaskMachine.Recipient) {
        switch recipient {
        case let .reporter(id):
            (id == .leader ? leader : reporters[id])?.stream.write(message.encoded())
        case .everyReporter:
            let line = message.encoded()
            leader?.stream.write(line)
            for reporter in reporters.values { reporter.stream.write(line) }
        }
    }

    /// The leader exited: what is left on the channels is read to their end now, however bad.
    func leaderExited() {
        for reporter in [leader].compactMap({ $0 }) + Array(reporters.values) {
            reporter.paceTimer?.cancel()
            reporter.stream.resumeReading()
        }
    }

    /// The drain limit passed: every channel ends with what was read. A reporter still
    /// connected is a descendant that outlived the leader: what it wrote so far counts.
    func endAll() {
        for reporter in Array(reporters.values) { channelEnded(reporter) }
        if let leader { channelEnded(leader) }
    }

    // MARK: Reporters and sd_notify

    /// A process connected to the task's socket: a reporter when it is part of the task
    /// (DESIGN §3a), else refused and counted.
    private func reporterConnected(_ stream: ByteStream, peer: PeerCredentials?) {
        let now = MonotonicInstant.now()
        guard isMember(peer) else {
            stream.close()
            runner.emit(.reporterRefused(pid: peer?.pid, uid: peer?.uid), at: now)
            return
        }
        let reporter = ReporterChannel(id: ReporterID(nextReporter), stream: stream, now: now)
        nextReporter += 1
        reporters[reporter.id] = reporter
        startReading(reporter)
        runner.decide(at: now) { machine, actions in machine.reporterJoined(reporter.id, pid: peer?.pid, now: now, into: &actions) }
    }

    /// One sd_notify datagram: from a process of the task, its notifications in order, a
    /// barrier's descriptor closed once those before it are handled; any other descriptor
    /// it carried is closed (no file-descriptor store here).
    private func notified(_ datagram: DatagramReceiver.Datagram) {
        var descriptors = datagram.descriptors
        defer { descriptors.forEach(Descriptors.close) }
        let now = MonotonicInstant.now()
        if datagram.truncated {
            runner.rejectLine(ProtocolError(.tooLong, "an sd_notify datagram longer than \(DatagramReceiver.maximumLength) bytes"),
                              excerpt: datagram.bytes.withUnsafeBytes { Self.excerpt($0) }, now: now)
            return
        }
        let (notifications, problems) = Notification.parse(datagram.bytes)
        for problem in problems {
            runner.rejectLine(problem, excerpt: datagram.bytes.withUnsafeBytes { Self.excerpt($0) }, now: now)
        }
        for notification in notifications {
            if notification == .barrier {
                // Everything before it is handled: closing the descriptor tells the sender.
                descriptors.forEach(Descriptors.close)
                descriptors.removeAll()
                continue
            }
            runner.decide(at: now) { machine, actions in machine.notify(notification, now: now, into: &actions) }
        }
        runner.rearm(now: now)
    }

    /// A process of the task (DESIGN §3a). A sender already gone when it is read (it wrote
    /// and exited: `python -c 'sd_notify(…)'`, a short-lived hook) leaves nothing to ask but
    /// the uid the kernel recorded: it counts when that is the task's own user. (systemd
    /// meets the same race; `systemd-notify` waits on a barrier to avoid it.) The check
    /// keeps tasks from hearing each other and strangers out; it is no wall against the
    /// task's own user, who may signal or trace the task anyway.
    private func isMember(_ peer: PeerCredentials?) -> Bool {
        guard let leader = runner.leaderPID, let peer else { return false }
        // With a cgroup, the kernel's own list says it (DESIGN §3a): a process that left the
        // session and lost its parent is still the task's.
        if let cgroup = runner.cgroup, peer.pid > 0, cgroup.processIDs().contains(peer.pid) { return true }
        switch ProcessTree.membership(of: peer.pid, inTaskLedBy: leader) {
        case .member: return true
        case .stranger: return false
        case .gone: return peer.uid == taskUserID
        }
    }

    /// Whether a datagram from `sender` is the task's, asked before it is read: a sender
    /// refused in the last second is dropped unchecked and counted; a new one is checked, and
    /// refused once, said. So only the task's own datagrams count against the socket's
    /// budget of handled datagrams a second, and an outsider's flood cannot use it up. A
    /// sender without a pid the supervisor can see (another pid namespace) is never a
    /// process of the task: it is remembered under pid 0.
    private func admitsNotifier(_ sender: PeerCredentials?) -> Bool {
        let now = MonotonicInstant.now()
        let key = RefusedSenders.Sender(pid: sender?.pid ?? 0, uid: sender?.uid ?? .max)
        if refusedNotifiers.remembers(key, now: now) { return false }
        if isMember(sender) { return true }
        reportRefusedNotifiers(now: now)
        refusedNotifiers.refused(key, now: now)
        runner.emit(.reporterRefused(pid: sender?.pid, uid: sender?.uid), at: now)
        return false
    }

    /// The datagrams of refused senders dropped unread, once their senders are forgotten
    /// (`now` nil: all of them, at the end).
    private func reportRefusedNotifiers(now: MonotonicInstant?) {
        for (sender, count) in refusedNotifiers.due(now: now) {
            let named = sender.pid > 0   // pid 0: a sender the kernel could not name here
            runner.emit(.reporterRefused(pid: named ? sender.pid : nil, uid: named ? sender.uid : nil, count: count),
                        at: now ?? MonotonicInstant.now())
        }
    }

    private func closeNotifyFD() {
        notifyFDReader?.close()
        notifyFDReader = nil
    }

    /// Closes every channel and socket, and says how many datagrams of refused senders
    /// were dropped. Idempotent.
    func close() {
        leader?.close()
        leader = nil
        closeNotifyFD()
        reporterListener?.close()
        reporterListener = nil
        notifyReceiver?.close()
        notifyReceiver = nil
        reportRefusedNotifiers(now: nil)
        for reporter in reporters.values { reporter.close() }
        reporters.removeAll()
    }
}
