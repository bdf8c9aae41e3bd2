import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a supervisor runs, for its control socket's `info` answer: how `overtime ctl list`
/// tells one supervisor from another (docs/control.md, "Which supervisor").
public struct SupervisorDescription: Sendable {
    public var kind: SupervisorInfo.Kind
    public var command: [String]?
    public var jobFile: String?
    public var runDirectory: String?

    /// `overtime run`: the command it runs.
    public static func run(command: [String]) -> Self {
        Self(kind: .run, command: command)
    }

    /// `overtime batch`: its job file and run directory.
    public static func batch(jobFile: String, runDirectory: String?) -> Self {
        Self(kind: .batch, jobFile: jobFile, runDirectory: runDirectory)
    }

    /// The whole answer but for the task counts, read now: this process, its user, the
    /// time and its working directory.
    func info(runID: String) -> SupervisorInfo {
        let uid = geteuid()
        var directory = "?"
        if let cwd = getcwd(nil, 0) {
            directory = String(cString: cwd)
            free(cwd)
        }
        return SupervisorInfo(run: runID, kind: kind, pid: getpid(), uid: uid, user: (try? Account.lookUp(String(uid)))?.name,
                              started: EventEncoder(runID: runID).timestamp(.now()), cwd: directory,
                              command: command, jobFile: jobFile, runDirectory: runDirectory, running: 0, total: 0)
    }
}
