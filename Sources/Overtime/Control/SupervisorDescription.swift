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
    /// The live page's URL (`--ui`), set when it is served.
    public var livePage: String?

    /// The login name of `uid`, from the account files or the C library; nil when unlisted.
    /// Read on the first `info` request, not at start: every `overtime run` would pay for a
    /// lookup that only `ctl list` needs.
    static func nameOfUser(_ uid: UInt32) -> String? {
        (try? Account.lookUp(String(uid)))?.name
    }

    /// `overtime run`: the command it runs.
    public static func run(command: [String]) -> Self {
        Self(kind: .run, command: command)
    }

    /// `overtime batch`: its job file and run directory.
    public static func batch(jobFile: String, runDirectory: String?) -> Self {
        Self(kind: .batch, jobFile: jobFile, runDirectory: runDirectory)
    }

    /// The whole answer but for the task counts and the user's name (looked up when asked:
    /// `nameOfUser`), read now: this process, its uid, the time and its working directory.
    func info(runID: String) -> SupervisorInfo {
        let uid = geteuid()
        var directory = "?"
        if let cwd = getcwd(nil, 0) {
            directory = String(cString: cwd)
            free(cwd)
        }
        var info = SupervisorInfo(run: runID, kind: kind, pid: getpid(), uid: uid, user: nil,
                                  started: EventEncoder(runID: runID).timestamp(.now()), cwd: directory,
                                  command: command, jobFile: jobFile, runDirectory: runDirectory, running: 0, total: 0)
        info.livePage = livePage
        return info
    }
}
