import OvertimeLoop
import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A blocking client of a supervisor's control socket (docs/control.md): JSON lines out,
/// JSON lines back. What `overtime ctl` speaks through.
public final class ControlClient {
    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Why no connection could be made to a control socket; each case names the path.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Longer than a Unix socket address holds.
        case pathTooLong(path: String)
        /// Something other than a socket is there.
        case notASocket(path: String)
        /// A socket is there but nobody listens on it: left by a supervisor that has ended.
        case noSupervisor(path: String)
        /// A supervisor is there but did not take the connection in time: stopped (SIGSTOP,
        /// a debugger) with its backlog full, or too busy.
        case notAccepting(path: String)
        /// Any other failure to connect, as the system gave it: nothing at the path
        /// (ENOENT), no permission (EACCES), an abstract name nobody holds (ECONNREFUSED).
        case cannotConnect(path: String, SystemError)

        /// Why, in words: "it is not a socket", "No such file or directory".
        public var message: String {
            switch self {
            case .pathTooLong: "the path is too long for a Unix socket"
            case .notASocket: "it is not a socket"
            case .noSupervisor: "nobody listens on it (left by a supervisor that has ended)"
            case .notAccepting: "it does not accept connections (a supervisor stopped, or too busy)"
            case let .cannotConnect(_, error): error.reason
            }
        }

        public var description: String { message }
    }

    /// Connects to the socket at `path`.
    /// - Parameter replyLimit: how long a read may wait for the supervisor (nil: for ever);
    ///   past it the reply counts as not come. For asking many supervisors at once
    ///   (`ctl list`), where one that is stopped (SIGSTOP, a debugger) must not hang the rest.
    public init(path: String, replyLimit: Duration? = nil) throws(Failure) {
        do {
            fd = try UnixListener.clientSocket(connectedTo: path, within: replyLimit ?? .seconds(10))
            if let replyLimit { UnixListener.setTimeout(fd, SO_RCVTIMEO, replyLimit) }
        } catch {
            switch (error.errno, UnixListener.probe(path)) {
            case (ENAMETOOLONG, _): throw .pathTooLong(path: path)
            case (EAGAIN, _): throw .notAccepting(path: path)
            case (_, .notASocket): throw .notASocket(path: path)
            case (_, .stale): throw .noSupervisor(path: path)
            default: throw .cannotConnect(path: path, error)
            }
        }
    }

    /// Sends `bytes` whole (a request line, newline included); false once the supervisor
    /// has gone. Never raises SIGPIPE.
    public func send(_ bytes: [UInt8]) -> Bool {
        (try? Descriptors.writeAll(fd, bytes, suppressingSIGPIPE: true)) != nil
    }

    /// What came back for a request.
    public enum Answer {
        /// The reply, and the line it came as (for a client that passes it on untouched).
        case reply(ControlReply, line: [UInt8])
        /// The supervisor hung up without a reply.
        case closed
        /// A line came that is not a reply.
        case unreadable(ProtocolError)
    }

    /// Sends `request` and reads its reply. The reply is read even when the send failed:
    /// a supervisor that refuses this user writes its refusal and hangs up before the
    /// request arrives.
    public func request(_ request: ControlRequest) -> Answer {
        _ = send(request.encoded())
        guard let line = readLine() else { return .closed }
        do {
            return .reply(try ControlReply.decode(line), line: line)
        } catch {
            return .unreadable(error)
        }
    }

    /// The next line, without its newline; nil at end of stream.
    public func readLine() -> [UInt8]? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = (try? Syscall.retrying("read") { chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }) ?? -1
            if n <= 0 {
                defer { buffer.removeAll() }
                return buffer.isEmpty ? nil : buffer
            }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    public func close() {
        Descriptors.close(fd)
    }
}
