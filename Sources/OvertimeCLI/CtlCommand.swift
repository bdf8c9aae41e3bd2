import Overtime
import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `overtime ctl [--socket PATH] status|watch|cancel|extend|revoke|list`: talks to a
/// running supervisor over its control socket (docs/control.md).
struct CtlCommand {
    enum Action {
        case list
        case status(json: Bool)
        case watch
        case cancel(task: String)
        case extend(task: String, by: Duration, pastMax: Bool)
        case revoke(task: String, after: Duration)
    }

    var socket: String?
    var action: Action

    static let help = """
    Usage: overtime ctl [--socket PATH] COMMAND

    Talks to a running supervisor (overtime run or overtime batch) over its control socket.
    With one supervisor running, --socket may be left out; with several, 'list' shows them.

    Commands:
      list                       the supervisors running for you, and their sockets
      status [--json]            every task: state, progress, budget left, pid
      watch                      the live event stream, as JSON lines, until the run ends
      cancel TASK                cancel TASK (reason 'user'); a batch task not yet started
                                 is skipped
      extend TASK DUR [--past-max]
                                 give TASK DUR more time, from its current deadline;
                                 past its max-runtime only with --past-max
      revoke TASK [DUR]          take TASK's budget back: it ends DUR from now (default 0)
                                 with reason 'revoked', whatever progress it reports

    Exit status: 0 done, 1 the supervisor refused the request, 125 bad usage or no
    supervisor to talk to.
    """

    static func parse(_ arguments: ArraySlice<String>) throws -> CtlCommand {
        var words: [String] = []
        var socket: String?
        var json = false
        var pastMax = false
        var rest = arguments
        while let arg = rest.popFirst() {
            switch arg {
            case "--help", "-h": throw HelpRequest(text: help)
            case "--socket":
                guard let value = rest.popFirst() else { throw UsageError(message: "overtime ctl: --socket needs a path") }
                socket = value
            case _ where arg.hasPrefix("--socket="): socket = String(arg.dropFirst("--socket=".count))
            case "--json": json = true
            case "--past-max": pastMax = true
            case _ where arg.hasPrefix("-") && arg.count > 1:
                throw UsageError(message: "overtime ctl: unknown option '\(arg)'\(suggestion(for: arg, among: ["--socket", "--json", "--past-max", "--help"])); see 'overtime ctl --help'")
            default: words.append(arg)
            }
        }
        guard let verb = words.first else {
            throw UsageError(message: "overtime ctl: no command; expected list, status, watch, cancel, extend or revoke")
        }
        let args = Array(words.dropFirst())
        func task() throws(UsageError) -> String {
            guard let name = args.first else { throw UsageError(message: "overtime ctl \(verb): which task? usage: overtime ctl \(verb) TASK") }
            return name
        }
        func duration(_ text: String) throws(UsageError) -> Duration {
            let parsed: Duration?
            do {
                parsed = try DurationText.parse(text)
            } catch {
                throw UsageError(message: "overtime ctl \(verb): \(error.message)")
            }
            guard let parsed else { throw UsageError(message: "overtime ctl \(verb): 'none' is not a duration here") }
            return parsed
        }
        let action: Action
        switch verb {
        case "list": action = .list
        case "status": action = .status(json: json)
        case "watch": action = .watch
        case "cancel": action = .cancel(task: try task())
        case "extend":
            guard args.count == 2 else { throw UsageError(message: "overtime ctl extend: usage: overtime ctl extend TASK DUR [--past-max]") }
            action = .extend(task: args[0], by: try duration(args[1]), pastMax: pastMax)
        case "revoke":
            guard args.count <= 2 else { throw UsageError(message: "overtime ctl revoke: usage: overtime ctl revoke TASK [DUR]") }
            action = .revoke(task: try task(), after: args.count == 2 ? try duration(args[1]) : .zero)
        default:
            throw UsageError(message: "overtime ctl: unknown command '\(verb)'\(suggestion(for: verb, among: ["list", "status", "watch", "cancel", "extend", "revoke"])); see 'overtime ctl --help'")
        }
        if case .list = action {} else if args.count > 2 {
            throw UsageError(message: "overtime ctl \(verb): too many arguments")
        }
        return CtlCommand(socket: socket, action: action)
    }

    func execute() -> Int32 {
        if case .list = action {
            let live = ControlSocketPath.live()
            if live.isEmpty {
                Terminal.error("overtime ctl: no supervisor is running for you (looked in \(ControlSocketPath.defaultDirectory()))")
                return 1
            }
            for path in live { Terminal.out(path) }
            return 0
        }
        let path: String
        switch resolveSocket() {
        case let .success(found): path = found
        case let .failure(problem):
            Terminal.error("overtime ctl: \(problem.message)")
            return 125
        }
        let connection: ControlClient
        do {
            connection = try ControlClient(path: path)
        } catch {
            Terminal.error("overtime ctl: cannot reach the supervisor at \(path): \(error.message)")
            return 125
        }
        defer { connection.close() }
        let op: ControlRequest.Op
        switch action {
        case .list: return 0  // answered above, without a supervisor
        case .status: op = .status
        case .watch: op = .watch
        case let .cancel(task): op = .cancel(task: task, reason: .user)
        case let .extend(task, by, pastMax): op = .extend(task: task, by: .seconds(by.seconds), pastMax: pastMax)
        case let .revoke(task, after): op = .revoke(task: task, after: .seconds(after.seconds))
        }
        let reply: ControlReply
        let replyLine: [UInt8]
        switch connection.request(ControlRequest(id: .number(1), op)) {
        case let .reply(answer, line):
            (reply, replyLine) = (answer, line)
        case .closed:
            Terminal.error("overtime ctl: the supervisor at \(path) closed the connection without a reply")
            return 125
        case let .unreadable(problem):
            Terminal.error("overtime ctl: the supervisor at \(path) sent a reply this ctl cannot read (\(problem.message))")
            return 125
        }
        switch reply.outcome {
        case let .failed(message):
            Terminal.error("overtime ctl: \(message)")
            return 1
        case let .status(tasks, _):
            if case .status(json: true) = action {
                // The reply as it came: fields this ctl does not know reach a script too.
                Terminal.out(String(decoding: replyLine, as: UTF8.self))
            } else {
                Terminal.writeOut(Array(Self.statusTable(tasks).utf8))
            }
        case .watching:
            // Written here and now, not queued: ctl has no loop to keep going, and a reader
            // that stops reading (`ctl watch | less`, paused) must hold back the socket, so
            // that the supervisor drops lines for this slow watcher rather than ctl keeping
            // them without bound. A reader gone (`| head -1`) ends the watch.
            Terminal.flush()
            while let line = connection.readLine() {
                guard TerminalDevice.writeAll(1, line + [0x0A]) else { break }
            }
        case let .done(result):
            Terminal.out(result)
        }
        return 0
    }

    /// The socket to use: the one given, or the only supervisor running for this user;
    /// with several, ask which when there is a terminal to ask on.
    private func resolveSocket() -> Result<String, ControlSocketError> {
        if let socket { return .success(socket) }
        let live = ControlSocketPath.live()
        switch live.count {
        case 0:
            return .failure(ControlSocketError("no supervisor is running for you (looked in \(ControlSocketPath.defaultDirectory())); pass --socket PATH"))
        case 1:
            return .success(live[0])
        default:
            let choices = live.enumerated().map { "  \($0.offset + 1)) \($0.element)" }.joined(separator: "\n")
            guard isatty(0) == 1 else {
                return .failure(ControlSocketError("\(live.count) supervisors are running; choose one with --socket:\n\(choices)"))
            }
            Terminal.error("\(live.count) supervisors are running:\n\(choices)")
            write(2, "which one? ", 11)
            guard let answer = readLine(), let n = Int(answer.filter { !$0.isWhitespace }), (1...live.count).contains(n) else {
                return .failure(ControlSocketError("no supervisor chosen"))
            }
            return .success(live[n - 1])
        }
    }

    /// `NAME  STATE  PROGRESS  LEFT  PID` for humans.
    static func statusTable(_ tasks: [TaskStatus]) -> String {
        guard !tasks.isEmpty else { return "no tasks\n" }
        var rows = [["TASK", "STATE", "PROGRESS", "LEFT", "PID"]]
        for task in tasks {
            var progress = "-"
            if let p = task.live?.progress {
                var parts: [String] = []
                if let f = p.fraction { parts.append("\(Int(f * 100))%") }
                if let c = p.completed { parts.append(p.total.map { "\(c)/\($0)" } ?? "\(c)") }
                if let title = p.title { parts.append(title) }
                if let detail = p.detail { parts.append(detail) }
                progress = parts.isEmpty ? "-" : parts.joined(separator: " ")
            }
            if let reporters = task.live?.reporters, reporters > 1 {
                // The bar shown is the one that moved last, of several processes' bars.
                progress += " (\(reporters) reporters)"
            }
            var left = "-"
            if let live = task.live { left = live.remaining.map { DurationText.format(.seconds(fromDouble: $0)) } ?? "no limit" }
            var state = task.state.word
            if case let .cancelling(reason) = task.state { state += " (\(reason.rawValue))" }
            else if let reason = task.reason { state += " (\(reason))" }
            let pid = task.live?.pid.map { String($0) } ?? "-"
            // A task's title is the task's own text: no control character of it reaches the
            // terminal, and a row stays one line.
            rows.append([task.name, state, progress, left, pid].map(TextWidth.sanitize))
        }
        let widths = rows[0].indices.map { column in rows.map { TextWidth.columns($0[column]) }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] + 2 - TextWidth.columns(cell))
            }.joined()
        }.joined(separator: "\n") + "\n"
    }
}
