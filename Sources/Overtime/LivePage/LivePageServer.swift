import OvertimeLoop
import OvertimeProtocol
import OvertimeReport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The live page's server on the loop thread (docs/ui.md, docs/control.md "HTTP API"): the
/// page, the JSON API over the control target, and the event stream. Loop-thread only.
///
/// Its limits are /metrics' (`MetricsExporter`): so many clients at once, so many from one
/// host, a new one pushing out the oldest; a request head of 8 KiB and a body of
/// `maxBody`, within `MetricsExporter.clientTime`. An event stream whose reader falls more
/// than `maxQueuedEvents` bytes behind is dropped: the loop never waits for a browser.
final class LivePageServer {
    static let maxBody = 4 * 1024
    /// What may wait for one event stream's reader before it is dropped (its page reconnects
    /// and starts again from `/api/status`).
    static let maxQueuedEvents = 256 * 1024
    /// Event streams at once (each a page open somewhere), apart from the other connections.
    static let maxStreams = 16
    /// Log tails read at once, each on a thread of its own.
    static let maxLogReads = 4
    /// How long events gather before they go to the event streams together: a send per
    /// stream per interval, not one per event (a loopback send also runs the receiving
    /// side's TCP in the supervisor's time, a thousand times a second for a thousand busy
    /// tasks), and still more updates a second than a person reads off a row.
    static let gatherInterval = Duration.milliseconds(100)
    /// Gathered events go at once when they reach this, so that a burst (a thousand tasks
    /// ending together) reaches a reader in pieces its `maxQueuedEvents` holds.
    static let gatherLimit = 16 * 1024

    let access: LivePageAccess
    private let listener: TCPListener
    private let loop: EventLoop
    private weak var target: (any ControlTarget)?
    /// The socketless control server whose watchers' lines the event streams carry, and
    /// whose `status` answer `/api/status` gives.
    private let control: ControlServer
    private var clients: [ObjectIdentifier: HTTPClient] = [:]
    private var streams: [ObjectIdentifier: HTTPClient] = [:]
    /// The streams, oldest first.
    private var streamOrder: [ObjectIdentifier] = []
    private var logReadsInFlight = 0
    /// Called once, at the first request for the status or the events (the page opened).
    var onFirstLook: (() -> Void)?
    /// Events not yet sent, framed once for every stream.
    private var gathered = EventGather(limit: LivePageServer.gatherLimit)
    private let gatherTimer: LoopTimer
    private var slots = MetricsClientSlots<ObjectIdentifier>(capacity: MetricsExporter.maxClients, perPeer: MetricsExporter.maxClientsPerPeer)
    private let uid = geteuid()

    /// - Throws: `SystemError` when `address` cannot be bound.
    init(loop: EventLoop, address: MetricsAddress, token: String, target: any ControlTarget, control: ControlServer) throws(SystemError) {
        self.loop = loop
        self.target = target
        self.control = control
        gatherTimer = LoopTimer(loop: loop)
        // The listener is made before `self` is whole: its handler reaches `self` through
        // this variable, set below (nothing is accepted before the loop runs again).
        var accept: (TCPConnection) -> Void = { $0.close() }
        listener = try TCPListener(loop: loop, host: address.host, port: address.port) { accept($0) }
        access = LivePageAccess(token: token, address: MetricsAddress(host: listener.host, port: listener.port))
        accept = { [weak self] connection in
            guard let self else { return connection.close() }
            self.accept(connection)
        }
    }

    /// The supervisor shuts down: the events gathered so far (a run's last ones, its tasks'
    /// ends) go to the streams now, and no one new is let in. The loop's shutdown closes
    /// the connections after, what the kernel has taken still delivered.
    func finish() {
        sendGathered()
        gatherTimer.close()
        listener.close()
    }

    private func accept(_ connection: TCPConnection) {
        let client = HTTPClient(connection: connection, loop: loop, time: MetricsExporter.clientTime, maxBody: Self.maxBody,
                                respond: { [weak self] read in self?.respond(read) ?? .whole(LivePageHTTP.refusal(.init(503, "shutting down"))) },
                                onGone: { [weak self] client in self?.gone(client) })
        for pushedOut in slots.admit(ObjectIdentifier(client), peer: connection.peerAddress()) {
            clients[pushedOut]?.pushOut()
        }
        clients[ObjectIdentifier(client)] = client
        client.begin()
    }

    private func gone(_ client: HTTPClient) {
        let key = ObjectIdentifier(client)
        clients[key] = nil
        slots.remove(key)
        if streams.removeValue(forKey: key) != nil {
            streamOrder.removeAll { $0 == key }
            if streams.isEmpty { control.relay = nil }
        }
    }

    /// An event stream, its token checked, leaves the pool that anyone who connects shares
    /// (where new connections push out the oldest) for one of its own: connections that
    /// never show a token cannot push a page's stream out. Past `maxStreams`, a new stream
    /// pushes out the oldest stream (a page left open somewhere).
    private func admitStream(_ client: HTTPClient) {
        let key = ObjectIdentifier(client)
        slots.remove(key)
        if streamOrder.count >= Self.maxStreams, let oldest = streamOrder.first { streams[oldest]?.drop() }
        streams[key] = client
        streamOrder.append(key)
    }

    private func respond(_ read: HTTPRequest.Read) -> HTTPAnswer {
        guard case let .complete(request) = read else { return .whole(LivePageHTTP.refusal(read)) }
        switch access.verdict(request) {
        case let .refused(refusal): return .whole(LivePageHTTP.refusal(refusal))
        case .exchangeToken: return .whole(LivePageHTTP.tokenExchange(access))
        case .allowed: break
        }
        switch LivePageRoute.of(request) {
        case let .failure(refusal): return .whole(LivePageHTTP.refusal(refusal))
        case let .success(route): return answer(route, withBody: request.method != "HEAD")
        }
    }

    private func answer(_ route: LivePageRoute, withBody: Bool) -> HTTPAnswer {
        guard let target else { return .whole(LivePageHTTP.refusal(.init(503, "the supervisor is shutting down"))) }
        let result: Result<String, ControlFailure>
        switch route {
        case .page:
            guard let nonce = try? LivePageToken.make(bytes: 16) else {
                return .whole(LivePageHTTP.refusal(.init(500, "no random bytes for the page's nonce")))
            }
            return .whole(LivePageHTTP.response(200, contentType: "text/html; charset=utf-8", body: LivePageDocument.html(nonce: nonce),
                                                withBody: withBody, policy: LivePageHTTP.pagePolicy(nonce: nonce)))
        case .status:
            firstLook()
            return .whole(LivePageHTTP.reply(200, control.statusOutcome(), withBody: withBody))
        case .events:
            guard withBody else { return .whole(LivePageHTTP.eventStreamHead()) }
            firstLook()
            return .stream(head: LivePageHTTP.eventStreamHead()) { [weak self] client in
                guard let self else { return client.drop() }
                // What gathered before this stream opened is older than the status its page read.
                self.sendGathered()
                self.admitStream(client)
                self.control.relay = { [weak self] line in self?.publish(line) }
            }
        case let .log(task, tail):
            switch target.controlLogPath(task: task) {
            case let .failure(failure): return .whole(LivePageHTTP.refusal(LivePageRefusal(failure)))
            case let .success(path):
                // A log on a stalled filesystem must not hold the loop, nor gather a thread
                // for every poll of a page left open on it.
                guard logReadsInFlight < Self.maxLogReads else {
                    return .whole(LivePageHTTP.refusal(.init(503, "earlier log reads have not come back (a stalled filesystem?)")))
                }
                logReadsInFlight += 1
                return .later { [loop] send in
                    let reply = LoopBound({ [weak self] (answer: [UInt8]) in
                        self?.logReadsInFlight -= 1
                        send(answer)
                    }, loop: loop)
                    DetachedThread.run {
                        let answer = switch LogTail.lines(ofFile: path, last: tail) {
                        case let lines?: LivePageHTTP.response(200, contentType: "text/plain; charset=utf-8", body: lines, withBody: withBody)
                        case nil: LivePageHTTP.refusal(.init(404, "the task has no log yet"))
                        }
                        _ = loop.execute { reply.value(answer) }
                    }
                }
            }
        case let .extend(task, amount, pastMax):
            result = target.controlExtend(task: task, by: amount, pastMax: pastMax, uid: uid)
        case let .revoke(task, after):
            result = target.controlRevoke(task: task, after: after, uid: uid)
        case let .cancel(task):
            result = target.controlCancel(task: task, reason: .user, grace: nil, uid: uid)
        }
        switch result {
        case let .success(words): return .whole(LivePageHTTP.reply(200, .done(words)))
        case let .failure(failure): return .whole(LivePageHTTP.refusal(LivePageRefusal(failure)))
        }
    }

    private func firstLook() {
        guard let look = onFirstLook else { return }
        onFirstLook = nil
        look()
    }

    /// A watcher's line to every event stream, with the others gathered in its interval.
    private func publish(_ line: [UInt8]) {
        switch gathered.add(line) {
        case .first: gatherTimer.schedule(inNanoseconds: Self.gatherInterval.nanoseconds) { [weak self] in self?.sendGathered() }
        case .full: sendGathered()
        case .more: break
        }
    }

    /// What gathered, to every event stream; a reader too far behind is dropped.
    private func sendGathered() {
        gatherTimer.cancel()
        guard let events = gathered.take() else { return }
        for client in Array(streams.values) { client.push(events, maxQueued: Self.maxQueuedEvents) }
    }
}

/// Event lines framed for the event streams (`text/event-stream`) as they come, and taken
/// together when they are sent.
struct EventGather {
    let limit: Int
    private var bytes: [UInt8] = []

    init(limit: Int) { self.limit = limit }

    enum Added: Equatable {
        /// The first since the last take: send them after the interval.
        case first
        /// Others wait already.
        case more
        /// They reached the limit: send them now.
        case full
    }

    mutating func add(_ line: [UInt8]) -> Added {
        let first = bytes.isEmpty
        LivePageHTTP.appendEvent(line, to: &bytes)
        return bytes.count >= limit ? .full : first ? .first : .more
    }

    /// The events gathered, nil when none.
    mutating func take() -> [UInt8]? {
        guard !bytes.isEmpty else { return nil }
        let taken = bytes
        // Room for as much again: the next interval's events are appended without growing.
        bytes = []
        bytes.reserveCapacity(taken.count)
        return taken
    }
}

/// The page's token and nonces: random bytes from the kernel, as hexadecimal.
enum LivePageToken {
    /// - Throws: `SystemError` when the kernel gives no random bytes (a seccomp filter).
    static func make(bytes count: Int = 32) throws(SystemError) -> String {
        try Descriptors.randomBytes(count).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// The last lines of a task's log, read off the loop.
enum LogTail {
    /// At most this much of the file's end is read: a line longer than that is cut.
    static let maxBytes = 1 << 20

    /// The last `count` lines of `path`; nil when it cannot be read.
    static func lines(ofFile path: String, last count: Int) -> [UInt8]? {
        guard let bytes = Descriptors.readFileTail(path, limit: maxBytes) else { return nil }
        guard count > 0 else { return [] }
        var newlines = 0
        var index = bytes.endIndex
        if bytes.last == 0x0A { index -= 1 }
        while index > bytes.startIndex {
            if bytes[index - 1] == 0x0A {
                newlines += 1
                if newlines == count { break }
            }
            index -= 1
        }
        return Array(bytes[index...])
    }
}
