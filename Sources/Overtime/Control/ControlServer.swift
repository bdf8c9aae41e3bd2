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
    /// Every task the supervisor knows, as JSON objects (docs/control.md).
    func controlStatus(now: MonotonicInstant) -> [JSONValue]
    /// Cancels `task` (reason `user`); the result is the reply's `result` word.
    func controlCancel(task: String, uid: UInt32) -> Result<String, ControlFailure>
    func controlExtend(task: String, by amount: Duration, pastMax: Bool, uid: UInt32) -> Result<String, ControlFailure>
    func controlRevoke(task: String, after: Duration, uid: UInt32) -> Result<String, ControlFailure>
}

/// Why a control request was refused, in a sentence.
struct ControlFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
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
        let stream: ByteStream
        let uid: UInt32
        var framer = LineFramer()
        var watching = false
        init(stream: ByteStream, uid: UInt32) {
            self.stream = stream
            self.uid = uid
        }
    }

    let path: String
    private var listener: UnixListener?
    private weak var target: (any ControlTarget)?
    private var clients: [ObjectIdentifier: Client] = [:]
    private let onRefused: (PeerCredentials?) -> Void
    private let ownUID = geteuid()

    init(loop: EventLoop, path: String, target: any ControlTarget, onRefused: @escaping (PeerCredentials?) -> Void) throws(SystemError) {
        self.path = path
        self.target = target
        self.onRefused = onRefused
        listener = try UnixListener(loop: loop, path: path) { [unowned self] stream, peer in
            self.accept(stream, peer)
        }
    }

    func close() {
        listener?.close()
        listener = nil
        for client in clients.values { client.stream.close() }
        clients.removeAll()
    }

    /// Sends a line to every client that asked to `watch`.
    func broadcast(_ line: [UInt8]) {
        for client in clients.values where client.watching {
            client.stream.write(line)  // a slow watcher loses whole lines, never the supervisor's time
        }
    }

    private func accept(_ stream: ByteStream, _ peer: PeerCredentials?) {
        guard let peer, peer.uid == ownUID || peer.uid == 0 else {
            stream.write(Self.reply(id: nil) { w in
                w.key("ok"); w.bool(false)
                w.key("error"); w.string("permission denied: only uid \(ownUID) (the supervisor's user) or root may use this socket")
            })
            stream.close()
            onRefused(peer)
            return
        }
        let client = Client(stream: stream, uid: peer.uid)
        let key = ObjectIdentifier(client)
        clients[key] = client
        stream.startReading(
            onData: { [unowned self] bytes in
                client.framer.feed(bytes) { item in self.handle(item, from: client) }
            },
            onEnd: { [unowned self] _ in
                client.stream.close()
                self.clients[key] = nil
            }
        )
    }

    private func handle(_ item: LineFramer.Item, from client: Client) {
        switch item {
        case .overlong:
            client.stream.write(Self.error(id: nil, "request line longer than 64 KiB"))
        case let .line(line):
            guard !line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) else { return }
            let request: JSONValue
            do {
                request = try JSONValue.parse(Array(line))
            } catch {
                client.stream.write(Self.error(id: nil, "not a JSON request: \(error.message)"))
                return
            }
            client.stream.write(respond(to: request, from: client))
        }
    }

    private func respond(to request: JSONValue, from client: Client) -> [UInt8] {
        let id = request["id"]
        guard case .object = request else { return Self.error(id: id, "a request is a JSON object") }
        guard case let .string(op)? = request["op"] else { return Self.error(id: id, "no \"op\"; expected status, watch, cancel, extend or revoke") }
        guard let target else { return Self.error(id: id, "the supervisor is shutting down") }
        switch op {
        case "status":
            let tasks = target.controlStatus(now: TaskRunner.clock())
            return Self.reply(id: id) { w in
                w.key("ok"); w.bool(true)
                w.key("tasks"); w.value(.array(tasks))
            }
        case "watch":
            client.watching = true
            return Self.reply(id: id) { w in
                w.key("ok"); w.bool(true)
                w.key("watching"); w.bool(true)
            }
        case "cancel", "extend", "revoke":
            guard case let .string(task)? = request["task"], !task.isEmpty else {
                return Self.error(id: id, "\"\(op)\" needs \"task\": the task's name")
            }
            let result: Result<String, ControlFailure>
            switch op {
            case "cancel":
                result = target.controlCancel(task: task, uid: client.uid)
            case "extend":
                guard let amount = Self.duration(request["by"]), amount > .zero else {
                    return Self.error(id: id, "\"extend\" needs \"by\": a duration such as \"10m\" or a number of seconds")
                }
                let pastMax: Bool
                if case .bool(true)? = request["past_max"] { pastMax = true } else { pastMax = false }
                result = target.controlExtend(task: task, by: amount, pastMax: pastMax, uid: client.uid)
            default:
                let after: Duration
                if request["after"] == nil || request["after"] == .null {
                    after = .zero
                } else if let given = Self.duration(request["after"]) {
                    after = given
                } else {
                    return Self.error(id: id, "\"after\" must be a duration such as \"30s\" or a number of seconds")
                }
                result = target.controlRevoke(task: task, after: after, uid: client.uid)
            }
            switch result {
            case let .success(word):
                return Self.reply(id: id) { w in
                    w.key("ok"); w.bool(true)
                    w.key("result"); w.string(word)
                }
            case let .failure(failure):
                return Self.error(id: id, failure.message)
            }
        default:
            return Self.error(id: id, "unknown op \"\(op.prefix(40))\"; expected status, watch, cancel, extend or revoke")
        }
    }

    static func duration(_ value: JSONValue?) -> Duration? {
        switch value {
        case let .number(seconds)?:
            return seconds >= 0 && seconds.isFinite && seconds <= DurationText.maximum.seconds ? .seconds(fromDouble: seconds) : nil
        case let .string(text)?:
            return (try? DurationText.parse(text)) ?? nil
        default:
            return nil
        }
    }

    static func reply(id: JSONValue?, _ fields: (inout JSONWriter) -> Void) -> [UInt8] {
        var w = JSONWriter(capacity: 128)
        w.beginObject()
        if let id { w.key("id"); w.value(id) }
        fields(&w)
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    static func error(id: JSONValue?, _ message: String) -> [UInt8] {
        reply(id: id) { w in
            w.key("ok"); w.bool(false)
            w.key("error"); w.string(message)
        }
    }
}
