import OvertimeLoop

/// What a server answers a request with.
enum HTTPAnswer {
    /// One response, after which the connection closes.
    case whole([UInt8])
    /// One response, made off the loop: `make` is given where to send it.
    case later(_ make: (_ send: @escaping ([UInt8]) -> Void) -> Void)
    /// A response head, then a stream of bytes (Server-Sent Events) that the server pushes
    /// (`HTTPClient.push`) until it drops the client or the peer goes.
    case stream(head: [UInt8], open: (HTTPClient) -> Void)
}

/// One HTTP client of the supervisor's servers (`/metrics`, the live page): what it sent so
/// far, its time, its answer and its end. Loop-thread only.
///
/// It has `time` to send its request (then 408) and as long again to take a whole answer.
/// One request a connection: nothing after the first request is read (so pipelined
/// requests cost nothing), and the connection closes as soon as the answer is written. A
/// client that closes its side right after its request (`printf ... | nc`) still gets the
/// whole answer. A stream has no time limit: its server bounds what waits for it.
final class HTTPClient {
    /// The kernel's send buffer for a stream: a reader's lag is then counted where the
    /// server bounds it, not hidden in up to 4 MiB the kernel would take first.
    static let streamSendBuffer = 64 * 1024
    let connection: TCPConnection
    private let timer: LoopTimer
    private let time: Duration
    private let maxBody: Int?
    private let respond: (HTTPRequest.Read) -> HTTPAnswer
    private let onGone: (HTTPClient) -> Void
    private var reader: HTTPRequest.Reader
    private var receivedCount = 0
    private var answered = false
    private(set) var isStreaming = false
    private var gone = false

    /// - Parameter maxBody: the longest request body taken (`HTTPRequest.read`).
    init(connection: TCPConnection, loop: EventLoop, time: Duration, maxBody: Int?, respond: @escaping (HTTPRequest.Read) -> HTTPAnswer,
         onGone: @escaping (HTTPClient) -> Void) {
        self.connection = connection
        timer = LoopTimer(loop: loop)
        self.time = time
        self.maxBody = maxBody
        reader = HTTPRequest.Reader(maxBody: maxBody)
        self.respond = respond
        self.onGone = onGone
    }

    func begin() {
        timer.schedule(inNanoseconds: time.nanoseconds) { [self] in answer(.incomplete) }
        let limit = HTTPRequest.maxBytes(maxBody: maxBody)
        connection.startReading(onData: { [self] bytes in
            guard !answered else { return }
            let taken = bytes.prefix(limit + 1 - receivedCount)
            receivedCount += taken.count
            let read = reader.take(ArraySlice(taken))
            if read != .incomplete { answer(read) }
        }, onEnd: { [self] in
            // Gone before a whole request: there is nothing to answer.
            drop()
        })
    }

    /// Sends the answer to `read` (408 for a request that never came), then ends.
    private func answer(_ read: HTTPRequest.Read) {
        guard !answered else { return }
        answered = true
        reader = HTTPRequest.Reader(maxBody: maxBody)
        connection.stopReading()
        switch respond(read) {
        case let .whole(bytes):
            finish(bytes)
        case let .later(make):
            make { [weak self] bytes in self?.finish(bytes) }
            timer.schedule(inNanoseconds: time.nanoseconds) { [self] in drop() }
        case let .stream(head, open):
            isStreaming = true
            timer.close()
            connection.limitSendBuffer(Self.streamSendBuffer)
            guard connection.send(head) else { return drop() }
            // Read on only to hear the peer go: what it sends is not taken.
            connection.startReading(onData: { _ in }, onEnd: { [self] in drop() })
            open(self)
        }
    }

    private func finish(_ bytes: [UInt8]) {
        guard !gone else { return }
        connection.sendAndFinish(bytes) { [weak self] in self?.drop() }
        // The rest of its time to take the answer; then it is dropped, taken or not.
        timer.schedule(inNanoseconds: time.nanoseconds) { [self] in drop() }
    }

    /// Sends `bytes` on a stream, unless more than `maxQueued` bytes would then wait for a
    /// peer that does not read: then the client is dropped. - Returns: false when dropped.
    @discardableResult
    func push(_ bytes: [UInt8], maxQueued: Int) -> Bool {
        guard !gone else { return false }
        guard connection.queuedBytes + bytes.count <= maxQueued, connection.send(bytes) else {
            drop()
            return false
        }
        return true
    }

    /// A newer client takes its place: one still sending its request is told 408 (what
    /// fits in the socket's buffer at once), one being answered is cut off.
    func pushOut() {
        if !answered { answer(.incomplete) }
        drop()
    }

    /// Closes the connection, taken or not. Idempotent.
    func drop() {
        guard !gone else { return }
        gone = true
        timer.close()
        connection.close()
        onGone(self)
    }
}
