import OvertimeLoop
import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a control socket acts on: the running tasks of `overtime run`, or a whole batch.
/// Loop-thread only.
protocol ControlTarget: AnyObject {
    /// Every task the supervisor knows (docs/control.md).
    func controlStatus(now: MonotonicInstant) -> [TaskStatus]
    /// Cancels `task` with `reason` (`user` from `ctl`), with `grace` or the task's own; the
    /// result is the reply's `result` word.
    func controlCancel(task: String, reason: CancelReason, grace: Duration?, uid: UInt32) -> Result<String, ControlFailure>
    func controlExtend(task: String, by amount: Duration, pastMax: Bool, uid: UInt32) -> Result<String, ControlFailure>
    func controlRevoke(task: String, after: Duration, uid: UInt32) -> Result<String, ControlFailure>
    /// The engine ends in `remaining`: the task is sent `expiring`.
    func controlExpiring(task: String, remaining: Duration) -> Result<String, ControlFailure>
    /// Where `task` writes its output (the live page's log tail).
    func controlLogPath(task: String) -> Result<String, ControlFailure>
    /// The sweeps whose elements the metrics count without series of their own
    /// (`RunMetrics.sweepsWithoutSeries`).
    var sweepsWithoutSeries: Set<String> { get }
    /// The group each watched task of the job file is compared in for stragglers, by the
    /// task's name (`MetricsRecorder.stragglerGroups`).
    var stragglerGroups: [String: String] { get }
}

extension ControlTarget {
    func controlLogPath(task: String) -> Result<String, ControlFailure> { .failure(.noLogFile) }
    var sweepsWithoutSeries: Set<String> { [] }
    var stragglerGroups: [String: String] { [:] }
}

/// Why a control request was refused; its message is the reply's sentence.
enum ControlFailure: Error, Equatable {
    /// `overtime run` has no running task of that name; `closest` is the nearest it has.
    case noRunningTask(String, closest: String?)
    /// The batch has no task of that name; `closest` is the nearest it has.
    case noTaskInBatch(String, closest: String?)
    /// The batch's task of that name is waiting or has ended.
    case notRunning(String)
    /// A whole sweep or array was named where one element is meant (an extend, a revoke).
    case wholeSweep(String)
    /// The task is already being cancelled: its budget no longer changes.
    case alreadyCancelling
    /// The task has finished.
    case finished
    /// A batch takes no `expiring` from a client: it hears its own engine's warning.
    case batchTakesNoExpiring
    /// `overtime run` keeps no log: its task writes to the supervisor's own streams.
    case noLogFile

    var message: String {
        switch self {
        case let .noRunningTask(name, closest): "no running task named '\(name)'" + Self.didYouMean(closest)
        case let .noTaskInBatch(name, closest): "no task named '\(name)' in this batch" + Self.didYouMean(closest)
        case let .notRunning(name): "'\(name)' is not running"
        case let .wholeSweep(name):
            "'\(name)' is a sweep or an array; name one of its elements, as '\(name)[7]' or '\(name)[lr=0.01]' (ctl status lists them)"
        case .alreadyCancelling: "the task is already being cancelled"
        case .finished: "the task has finished"
        case .batchTakesNoExpiring:
            "a batch passes on its own engine's warning (--warn-signal); 'expiring' is for a run that an executor's head started"
        case .noLogFile:
            "overtime run keeps no log file: its task's output goes to the supervisor's own stdout and stderr"
        }
    }

    /// "; did you mean 'train'?" for a name close to one the supervisor has.
    private static func didYouMean(_ closest: String?) -> String {
        closest.map { "; did you mean '\($0)'?" } ?? ""
    }
}

/// Serves the control socket (docs/control.md): JSON-line requests, JSON-line replies, and
/// a live event stream for `watch`. Loop-thread only.
///
/// Only the supervisor's own user, or root, may talk to it: the peer's credentials are read
/// from the kernel (SO_PEERCRED) at accept, and anyone else gets an error and is logged.
/// A request line longer than 64 KiB, a malformed request, a client that vanishes
/// mid-request or floods the socket: each costs that client only.
final class ControlServer {
    private final class Client {
        /// Where its requests come from and where its replies go: one socket, or (a client
        /// on the supervisor's own standard streams) stdin and stdout.
        let reader: ByteStream
        let writer: ByteStream
        let uid: UInt32
        var framer = LineFramer()
        var watching = false
        init(reader: ByteStream, writer: ByteStream, uid: UInt32) {
            self.reader = reader
            self.writer = writer
            self.uid = uid
        }

        func close() {
            reader.close()
            writer.close()
        }
    }

    let path: String
    private var listener: UnixListener?
    private weak var target: (any ControlTarget)?
    /// How the supervisor holds its tasks, for `status` replies (DESIGN §7).
    var containment: Containment?
    /// `containment` as JSON, made at the first `status`: most runs are never asked, and
    /// writing and parsing it would cost every `overtime run`'s start.
    private lazy var containmentJSON: JSONValue? = containment.flatMap { containment in
        var w = JSONWriter(capacity: 256)
        containment.write(into: &w)
        return try? JSONValue.parse(w.bytes)
    }
    /// Who the supervisor is, for `info` replies; its task counts are filled in when asked.
    var identity: SupervisorInfo?
    /// The run `status` replies name, so a reader of status alone (the live page) can say which.
    var runID: String?
    private var clients: [ObjectIdentifier: Client] = [:]
    /// Clients that asked to `watch`: with none, events are not even encoded for them.
    private(set) var watcherCount = 0
    /// Told every line its watchers get, besides its own clients (the live page's event
    /// streams); set only while someone listens, so that unwatched events are not encoded.
    var relay: (([UInt8]) -> Void)?
    var hasWatchers: Bool { watcherCount > 0 || relay != nil }
    private let onRefused: (PeerCredentials?) -> Void
    private let ownUID = geteuid()

    /// - Parameter path: the socket to listen on; nil for a server with no socket, whose one
    ///   client is attached (`attach(reading:writing:onEnd:)`).
    init(loop: EventLoop, path: String?, target: any ControlTarget, onRefused: @escaping (PeerCredentials?) -> Void) throws(SystemError) {
        self.path = path ?? ""
        self.target = target
        self.onRefused = onRefused
        if let path {
            listener = try UnixListener(loop: loop, path: path) { [unowned self] stream, peer in
                self.accept(stream, peer)
            }
        }
    }

    /// Serves a client on two streams the supervisor was given (its own stdin and stdout,
    /// from whoever started it: an executor's head over `srun`), watching every event from
    /// the start. Trusted as the supervisor's own user: it is the supervisor's parent's pipe.
    /// `onEnd` is told when its requests end.
    func attach(reading: ByteStream, writing: ByteStream, onEnd: @escaping () -> Void) {
        let client = Client(reader: reading, writer: writing, uid: ownUID)
        // Watching from the start, before the task exists: a `watch` request read later
        // would miss its first events (`started`, its first `budget`), which the head needs.
        client.watching = true
        watcherCount += 1
        serve(client, keepsWatching: true, onEnd: onEnd)
    }

    func close() {
        listener?.close()
        listener = nil
        for client in clients.values { client.close() }
        clients.removeAll()
        watcherCount = 0
    }

    /// Sends a line to every client that asked to `watch`.
    func broadcast(_ line: [UInt8]) {
        for client in clients.values where client.watching {
            client.writer.write(line)  // a slow watcher loses whole lines, never the supervisor's time
        }
        relay?(line)
    }

    private func accept(_ stream: ByteStream, _ peer: PeerCredentials?) {
        guard let peer, peer.uid == ownUID || peer.uid == 0 else {
            stream.write(ControlReply(.failed("permission denied: only uid \(ownUID) (the supervisor's user) or root may use this socket")).encoded())
            stream.close()
            onRefused(peer)
            return
        }
        serve(Client(reader: stream, writer: stream, uid: peer.uid), onEnd: {})
    }

    /// - Parameter keepsWatching: the end of its requests leaves its event stream open (the
    ///   head of an executor that closed its side still hears how the task ends, if it can).
    private func serve(_ client: Client, keepsWatching: Bool = false, onEnd: @escaping () -> Void) {
        let key = ObjectIdentifier(client)
        clients[key] = client
        client.reader.startReading(
            onData: { [unowned self] bytes in
                client.framer.feed(bytes) { item in self.handle(item, from: client) }
            },
            onEnd: { [unowned self] _ in
                if keepsWatching {
                    client.reader.close()
                } else {
                    client.close()
                    if client.watching { self.watcherCount -= 1 }
                    self.clients[key] = nil
                }
                onEnd()
            }
        )
    }

    private func handle(_ item: LineFramer.Item, from client: Client) {
        switch item {
        case .overlong:
            client.writer.write(ControlReply(.failed("request line longer than 64 KiB")).encoded())
        case let .line(line):
            guard !line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) else { return }
            let reply: ControlReply
            do {
                let request = try ControlRequest.decode(Array(line))
                reply = ControlReply(id: request.id, respond(to: request.op, from: client))
            } catch {
                reply = ControlReply(id: error.id, .failed(error.problem.message))
            }
            client.writer.write(reply.encoded())
        }
    }

    /// The answer to `status` (what `ctl status --json` prints).
    func statusOutcome() -> ControlReply.Outcome {
        guard let target else { return .failed("the supervisor is shutting down") }
        return .status(target.controlStatus(now: MonotonicInstant.now()), containment: containmentJSON, run: runID)
    }

    private func respond(to op: ControlRequest.Op, from client: Client) -> ControlReply.Outcome {
        guard let target else { return .failed("the supervisor is shutting down") }
        let result: Result<String, ControlFailure>
        switch op {
        case .status:
            return statusOutcome()
        case .info:
            guard var info = identity else { return .failed("this supervisor does not describe itself") }
            if info.user == nil, let name = SupervisorDescription.nameOfUser(info.uid) {
                info.user = name
                identity = info
            }
            let tasks = target.controlStatus(now: MonotonicInstant.now())
            info.total = tasks.count
            info.running = tasks.count { $0.state.isRunning }
            return .supervisor(info)
        case .watch:
            if !client.watching { watcherCount += 1 }
            client.watching = true
            return .watching
        case let .cancel(task, reason, grace):
            var graceGiven: Duration?
            if let grace {
                guard let duration = grace.duration else { return .failed("\"grace\" must be a duration such as \"10s\" or seconds") }
                graceGiven = duration
            }
            result = target.controlCancel(task: task, reason: reason, grace: graceGiven, uid: client.uid)
        case let .extend(task, by, pastMax):
            guard let amount = by.duration, amount > .zero else { return .failed(ControlRequest.byProblem) }
            result = target.controlExtend(task: task, by: amount, pastMax: pastMax, uid: client.uid)
        case let .revoke(task, after):
            var delay = Duration.zero
            if let after {
                guard let given = after.duration else { return .failed(ControlRequest.afterProblem) }
                delay = given
            }
            result = target.controlRevoke(task: task, after: delay, uid: client.uid)
        case let .expiring(task, remaining):
            result = target.controlExpiring(task: task, remaining: .seconds(fromDouble: remaining))
        }
        switch result {
        case let .success(word): return .done(word)
        case let .failure(failure): return .failed(failure.message)
        }
    }
}
