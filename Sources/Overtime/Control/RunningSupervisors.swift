import OvertimeProtocol

/// The supervisors running for this user, found by their control sockets and asked who
/// they are: what `overtime ctl` chooses among when it is not told which (docs/control.md,
/// "Which supervisor").
public struct RunningSupervisor: Sendable {
    public var socket: String
    /// Its answer to `info`; nil when it gave none (an older supervisor, or one not
    /// answering), with `problem` saying why.
    public var info: SupervisorInfo?
    public var problem: String?
    /// Its tasks' names, when asked for them (`having(task:)`).
    public var taskNames: [String] = []

    /// How long one supervisor may take to answer: a stopped one is passed over.
    public static let replyLimit: Duration = .seconds(2)

    /// Every supervisor with a live socket in `directory`, oldest run first, each asked
    /// `info`; and the stale sockets removed on the way.
    public static func all(in directory: String = ControlSocketPath.defaultDirectory()) -> (supervisors: [RunningSupervisor], removed: [String]) {
        let (live, removed) = ControlSocketPath.scan(directory)
        return (live.map(describe), removed)
    }

    /// Asks the supervisor at `socket` who it is.
    public static func describe(_ socket: String) -> RunningSupervisor {
        var found = RunningSupervisor(socket: socket)
        switch ask(socket, .info) {
        case let .success(.supervisor(info)): found.info = info
        case let .success(other): found.problem = "answered info with \(other)"
        case let .failure(problem): found.problem = problem.message
        }
        return found
    }

    /// The supervisors among `supervisors` that have a task named `name` (running, waiting
    /// or done), each with its task names filled in; and every task name seen, for a
    /// "did you mean".
    public static func having(task name: String, among supervisors: [RunningSupervisor]) -> (matches: [RunningSupervisor], allNames: [String]) {
        var matches: [RunningSupervisor] = []
        var allNames: [String] = []
        for var supervisor in supervisors {
            guard case let .success(.status(tasks, _, _)) = ask(supervisor.socket, .status) else { continue }
            supervisor.taskNames = tasks.map(\.name)
            allNames += supervisor.taskNames
            if supervisor.taskNames.contains(name) { matches.append(supervisor) }
        }
        return (matches, allNames)
    }

    /// Why a supervisor asked gave no usable answer.
    private enum Unanswered: Error {
        case unreachable(ControlClient.Failure)
        /// It refused the request, in its own words.
        case refused(String)
        case noAnswer(within: Duration)
        case unreadable(ProtocolError)

        var message: String {
            switch self {
            case let .unreachable(failure): failure.message
            case let .refused(message): message
            case let .noAnswer(limit): "no answer within \(DurationText.format(limit))"
            case let .unreadable(problem): "an unreadable answer (\(problem.message))"
            }
        }
    }

    private static func ask(_ socket: String, _ op: ControlRequest.Op) -> Result<ControlReply.Outcome, Unanswered> {
        let client: ControlClient
        do {
            client = try ControlClient(path: socket, replyLimit: replyLimit)
        } catch {
            return .failure(.unreachable(error))
        }
        defer { client.close() }
        switch client.request(ControlRequest(id: .number(1), op)) {
        case let .reply(reply, _):
            if case let .failed(message) = reply.outcome { return .failure(.refused(message)) }
            return .success(reply.outcome)
        case .closed: return .failure(.noAnswer(within: replyLimit))
        case let .unreadable(problem): return .failure(.unreadable(problem))
        }
    }
}
