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
        case list(json: Bool)
        case status(json: Bool)
        case watch
        case cancel(task: String)
        case extend(task: String, by: Duration, pastMax: Bool)
        case revoke(task: String, after: Duration)
    }

    var socket: String?
    var action: Action

    static let help = """
    Usage: overtime ctl [--socket PATH|RUN] COMMAND

    Talks to a running supervisor (overtime run or overtime batch) over its control socket.
    --socket takes the socket's path or the supervisor's run id (from 'list'). Left out:
    the one supervisor running for you; with several, a command naming a task goes to the
    one that has it, 'status' shows them all, and otherwise they are listed to choose from.

    Commands:
      list [--json]              the supervisors running for you: run id, pid, user, start,
                                 directory, what each runs, tasks running/total
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
        case "list": action = .list(json: json)
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
        switch chooseSupervisor() {
        case let .failure(problem):
            Terminal.error("overtime ctl: \(problem.message)")
            return 125
        case let .success(.listed(supervisors)) where supervisors.isEmpty:
            // Not a usage error: the list is empty, as it always was, with exit 1.
            Terminal.error("overtime ctl: no supervisor is running for you (looked in \(ControlSocketPath.defaultDirectory()))")
            return 1
        case let .success(.listed(supervisors)):
            if case .list(json: true) = action {
                for supervisor in supervisors { Terminal.writeOut(Self.listLine(supervisor)) }
            } else {
                Terminal.writeOut(Array(Self.supervisorTable(supervisors).utf8))
                for supervisor in supervisors {
                    if let info = supervisor.info, let url = info.livePage { Terminal.out(TextWidth.sanitize("\(info.run)  live page: \(url)")) }
                }
            }
            return 0
        case let .success(.each(supervisors)):
            // `status` of every supervisor, each under a line saying whose it is.
            var worst: Int32 = 0
            for (index, supervisor) in supervisors.enumerated() {
                Terminal.out((index == 0 ? "" : "\n") + "== " + Self.heading(supervisor))
                // One that did not say who it is (stopped, say) is not asked again: it
                // would hold up the rest.
                guard supervisor.info != nil else {
                    Terminal.out("(\(supervisor.problem ?? "no answer"))")
                    worst = max(worst, 125)
                    continue
                }
                worst = max(worst, request(at: supervisor.socket, replyLimit: RunningSupervisor.replyLimit))
            }
            return worst
        case let .success(.one(path)):
            return request(at: path)
        }
    }

    /// Sends this command's request to the supervisor at `path` and shows its answer.
    /// - Parameter replyLimit: how long it may take to answer (nil: as long as it takes).
    private func request(at path: String, replyLimit: Duration? = nil) -> Int32 {
        let connection: ControlClient
        do {
            connection = try ControlClient(path: path, replyLimit: replyLimit)
        } catch {
            Terminal.error("overtime ctl: cannot reach the supervisor at \(path): \(error.message)")
            return 125
        }
        defer { connection.close() }
        let op: ControlRequest.Op
        switch action {
        case .list: op = .info  // answered without a request; here only for completeness
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
            // The supervisor's words may quote a task's name, which may hold anything.
            Terminal.error("overtime ctl: \(TextWidth.sanitize(message))")
            return 1
        case let .status(tasks, _, _):
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
            Terminal.out(TextWidth.sanitize(result))
        case .supervisor:
            Terminal.out(String(decoding: replyLine, as: UTF8.self))
        }
        return 0
    }

    /// Where the command goes.
    private enum Choice {
        /// The socket at this path.
        case one(String)
        /// Nowhere: `list` shows these.
        case listed([RunningSupervisor])
        /// Every one of these (`status` with several running).
        case each([RunningSupervisor])
    }

    /// The task a command acts on, if it names one.
    private var taskNamed: String? {
        switch action {
        case let .cancel(task), let .extend(task, _, _), let .revoke(task, _): task
        case .list, .status, .watch: nil
        }
    }

    /// Why no supervisor could be chosen.
    private enum NoChoice: Error {
        /// None is running for this user (none in `directory`).
        case noneRunning(directory: String)
        /// Several are running and none has the task named.
        case noneHasTask(String, among: [RunningSupervisor], names: [String])
        /// Several could be meant and there is no terminal to ask on.
        case several(because: String, [RunningSupervisor])
        /// The person asked chose none.
        case noneChosen

        var message: String {
            switch self {
            case let .noneRunning(directory):
                "no supervisor is running for you (looked in \(directory)); pass --socket PATH"
            case let .noneHasTask(task, supervisors, names):
                "none of the \(supervisors.count) supervisors running has a task named '\(task)'"
                    + (Spelling.closest(to: task, among: names).map { "; did you mean '\($0)'?" } ?? "") + ":\n"
                    + CtlCommand.supervisorTable(supervisors).dropLast()
            case let .several(why, candidates):
                "\(why); choose one with --socket RUN:\n" + CtlCommand.supervisorTable(candidates, numbered: true).dropLast()
            case .noneChosen:
                "no supervisor chosen"
            }
        }
    }

    /// The supervisor to talk to: the one given, or the only one running for this user; with
    /// several, the one that has the task named, or all of them for `status`, or the one a
    /// person picks when there is a terminal to ask on.
    private func chooseSupervisor() -> Result<Choice, NoChoice> {
        if let socket {
            let path = ControlSocketPath.resolve(socket)
            if case .list = action { return .success(.listed([RunningSupervisor.describe(path)])) }
            return .success(.one(path))
        }
        let directory = ControlSocketPath.defaultDirectory()
        let (supervisors, removed) = RunningSupervisor.all(in: directory)
        if !removed.isEmpty {
            // Named when few; counted when a crash-looping script left hundreds.
            let names = removed.count <= 3 ? ": " + removed.joined(separator: ", ") : " from \(directory)"
            Terminal.error("overtime ctl: removed \(removed.count == 1 ? "a socket" : "\(removed.count) sockets") left by supervisors no longer running\(names)")
        }
        if case .list = action { return .success(.listed(supervisors)) }
        switch supervisors.count {
        case 0:
            return .failure(.noneRunning(directory: directory))
        case 1:
            return .success(.one(supervisors[0].socket))
        default:
            break
        }
        if let task = taskNamed {
            let (matches, names) = RunningSupervisor.having(task: task, among: supervisors)
            switch matches.count {
            case 0:
                return .failure(.noneHasTask(task, among: supervisors, names: names))
            case 1:
                return .success(.one(matches[0].socket))
            default:
                return pick(among: matches, because: "\(matches.count) supervisors have a task named '\(task)'")
            }
        }
        if case .status(json: false) = action { return .success(.each(supervisors)) }
        return pick(among: supervisors, because: "\(supervisors.count) supervisors are running")
    }

    /// Asks which of `candidates` on a terminal; without one, lists them for `--socket`.
    private func pick(among candidates: [RunningSupervisor], because why: String) -> Result<Choice, NoChoice> {
        guard isatty(0) == 1 else { return .failure(.several(because: why, candidates)) }
        Terminal.error("\(why):\n" + Self.supervisorTable(candidates, numbered: true).dropLast())
        write(2, "which one? ", 11)
        guard let answer = readLine(), let n = Int(answer.filter { !$0.isWhitespace }), (1...candidates.count).contains(n) else {
            return .failure(.noneChosen)
        }
        return .success(.one(candidates[n - 1].socket))
    }

    /// `RUN  PID  USER  STARTED  UP  TASKS  DIRECTORY  RUNS`, a row per supervisor.
    static func supervisorTable(_ supervisors: [RunningSupervisor], numbered: Bool = false, now: Int = Int(time(nil))) -> String {
        var rows = [(numbered ? ["#"] : []) + ["RUN", "PID", "USER", "STARTED", "UP", "TASKS", "DIRECTORY", "RUNS"]]
        for (index, supervisor) in supervisors.enumerated() {
            var row = numbered ? ["\(index + 1))"] : []
            if let info = supervisor.info {
                let start = Self.startTime(info.started)
                let up = start.map { DurationText.format(.seconds(max(0, now - $0))) } ?? "-"
                row += [info.run, String(info.pid), info.user ?? String(info.uid), start.map(Self.localTime) ?? info.started, up,
                        "\(info.running)/\(info.total)", info.cwd, info.runs]
            } else {
                let name = supervisor.socket.split(separator: "/").last.map { String($0.dropLast(".sock".count)) } ?? supervisor.socket
                row += [name, "-", "-", "-", "-", "-", "-", "(\(supervisor.problem ?? "no answer"))"]
            }
            // A command line is the user's own text: no control character reaches the
            // terminal, and a row stays one line.
            rows.append(row.map(TextWidth.sanitize))
        }
        return TextTable.render(rows)
    }

    /// `== RUN  pid N  RUNS`: whose status follows.
    static func heading(_ supervisor: RunningSupervisor) -> String {
        guard let info = supervisor.info else { return supervisor.socket }
        return TextWidth.sanitize("\(info.run)  pid \(info.pid)  \(info.kind.rawValue): \(info.runs)  (in \(info.cwd))")
    }

    /// One JSON line for `list --json`: the supervisor's `info` answer and its socket.
    static func listLine(_ supervisor: RunningSupervisor) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("socket"); w.string(supervisor.socket)
        if let info = supervisor.info {
            w.key("supervisor"); info.write(into: &w)
        } else {
            w.key("supervisor"); w.null()
            w.key("error"); w.string(supervisor.problem ?? "no answer")
        }
        w.endObject()
        w.raw("\n")
        return w.bytes
    }

    /// Seconds since the epoch of `2026-12-01T17:48:14.120Z`; nil for other text.
    static func startTime(_ iso: String) -> Int? {
        let digits = iso.utf8.map { Int($0) - 48 }
        guard iso.utf8.count >= 19 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var n = 0
            for i in range { guard (0...9).contains(digits[i]) else { return nil }; n = n * 10 + digits[i] }
            return n
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19) else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Int(timegm(&parts))
    }

    /// `17:48:14` today, `Nov 30 17:48` before: local time, as `ps` and `ls` show it.
    static func localTime(_ seconds: Int) -> String {
        var when = time_t(seconds)
        var now = time(nil)
        var local = tm()
        var today = tm()
        localtime_r(&when, &local)
        localtime_r(&now, &today)
        var buffer = [UInt8](repeating: 0, count: 32)
        let sameDay = local.tm_year == today.tm_year && local.tm_yday == today.tm_yday
        let length = strftime(&buffer, buffer.count, sameDay ? "%H:%M:%S" : "%b %d %H:%M", &local)
        return String(decoding: buffer[..<length], as: UTF8.self)
    }

    /// `NAME  STATE  PROGRESS  LEFT  PID` for humans; under it, for each task that named a
    /// phase, has a learned window or is stalled, those; for each task with every-reporter
    /// on, each reporter's own time left.
    static func statusTable(_ tasks: [TaskStatus]) -> String {
        statusRows(tasks) + tasks.compactMap(hangLine).joined() + tasks.compactMap(everyReporterLine).joined()
    }

    /// `train: phase eval, window 45s (learned), stalled for 12s (since 2026-12-01T17:48:14.120Z)`
    static func hangLine(_ task: TaskStatus) -> String? {
        guard let live = task.live, live.phase != nil || live.windowLearned || live.stalled != nil else { return nil }
        var parts: [String] = []
        if let phase = live.phase { parts.append("phase " + TextWidth.sanitize(phase)) }
        if let window = live.window {
            parts.append("window \(DurationText.format(.seconds(fromDouble: window)))" + (live.windowLearned ? " (learned)" : ""))
        } else if live.phase != nil {
            parts.append("no window")
        }
        if let stalled = live.stalled {
            parts.append("stalled for \(DurationText.format(.seconds(fromDouble: stalled)))" + (live.stalledSince.map { " (since \($0))" } ?? ""))
        }
        return TextWidth.sanitize(task.name) + ": " + parts.joined(separator: ", ") + "\n"
    }

    /// `train: every-reporter: rank 1 700ms left, rank 0 1s left`
    static func everyReporterLine(_ task: TaskStatus) -> String? {
        guard let every = task.live?.everyReporter else { return nil }
        let each = every.map { "\(TextWidth.sanitize($0.reporter)) \(DurationText.format(.seconds(fromDouble: $0.remaining))) left" }
        return TextWidth.sanitize(task.name) + ": every-reporter: " + (each.isEmpty ? "no reporter has reported yet" : each.joined(separator: ", ")) + "\n"
    }

    private static func statusRows(_ tasks: [TaskStatus]) -> String {
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
            if let shownFrom = ReporterWords.shownReporter(task.live?.progress) { progress = "\(shownFrom): \(progress)" }
            if let reporting = task.live?.progress?.reporting, reporting > 1 {
                // The bar shown is the one furthest behind, or the one that moved last, of
                // several processes' bars: counted as the live row counts them, those that
                // report progress (a leader that only waits for its ranks is not one).
                let names = task.live?.byReporter?.filter { $0.progress != nil }.map(\.name) ?? []
                progress += " (\(ReporterWords.count(reporting, names: names)))"
            }
            var left = "-"
            if let live = task.live { left = live.remaining.map { DurationText.format(.seconds(fromDouble: $0)) } ?? "no limit" }
            var state = task.state.word
            if case let .cancelling(reason) = task.state { state += " (\(reason.rawValue))" }
            else if task.live?.stalled != nil { state += " (stalled)" }
            else if let reason = task.reason { state += " (\(reason))" }
            let pid = task.live?.pid.map { String($0) } ?? "-"
            // A task's title is the task's own text: no control character of it reaches the
            // terminal, and a row stays one line.
            rows.append([task.name, state, progress, left, pid].map(TextWidth.sanitize))
        }
        return TextTable.render(rows)
    }
}

/// Columns padded to their widest cell (in terminal columns), two spaces apart.
enum TextTable {
    static func render(_ rows: [[String]]) -> String {
        guard let header = rows.first else { return "" }
        let widths = header.indices.map { column in rows.map { TextWidth.columns($0[column]) }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] + 2 - TextWidth.columns(cell))
            }.joined()
        }.joined(separator: "\n") + "\n"
    }
}
