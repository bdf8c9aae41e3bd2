import Overtime
import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `overtime` command: a thin skin over the Overtime library. (Not named after its
/// module, `OvertimeCLI`: a type of the module's name would capture `OvertimeCLI.X`.)
@main
enum OvertimeCommand {
    /// The VERSION file's, stamped in at build time (Plugins/BuildInfo).
    static let version = BuildInfo.version

    static let help = """
    Usage: overtime <command> [options]

    A supervisor that runs tasks under time budgets their progress extends, and cancels
    them by telling them why, then SIGTERM, then SIGKILL.

    Commands:
      run [options] -- CMD [ARG...]   run one command under a budget
      batch FILE [options]            run a queue of tasks from a job file
      ctl [--socket PATH] COMMAND     see and steer a running supervisor
      report RUN_DIR [-o FILE.html]   draw a batch's run directory as an HTML page
      help [COMMAND]                  show help
      version                         show the version

    'overtime run --help' lists the run options and exit codes.
    """

    // A synchronous main: `overtime run` sits in front of every task a user runs, and
    // starting Swift's concurrency runtime would add to every start.
    static func main() {
        // Writing a report to a closed pipe must end in an exit code, not a SIGPIPE death.
        // (Tasks start with every signal reset to its default.)
        signal(SIGPIPE, SIG_IGN)
        // One malloc arena for the whole process. glibc gives each new thread an arena of
        // its own (64 MiB reserved, its first pages touched at once): the loop thread's
        // was a share of every start's page faults and of the resident memory a container
        // pays for PID 1. The supervisor's few threads
        // (the caller, the loop, the samplers) seldom allocate at the same moment.
        ProcessMemoryUse.useOneMallocArena()
        // The task guard is this binary run again rather than a fork of the supervisor
        // (whose page tables a fork would copy): it knows to become the guard when so run.
        EventLoop.startTaskGuardsAsThisProgram()
        // A supervisor that lives past its first second (PID 1 above all) hands back the
        // pages of this binary its start touched and it will not run again: most of what
        // an idle PID 1 holds (docs/benchmarks.md, "As PID 1").
        ProgramPages.releaseOnceSettled()
        openMissingStandardDescriptors()
        let arguments = CommandLine.arguments.dropFirst()
        let code = run(arguments)
        Terminal.flush()
        exit(code)
    }

    /// Started with stdin, stdout or stderr closed (`overtime run ... >&-`), the next
    /// descriptor opened would take that number: a task's channel could become its stdout,
    /// and libuv refuses to close a descriptor below 3. /dev/null fills each gap first, as
    /// daemons do; a task then inherits it where it would have inherited the closed one.
    static func openMissingStandardDescriptors() {
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY)
            if opened >= 0, opened != fd {
                // A lower gap was filled first; move it to its own number.
                dup2(opened, fd)
                close(opened)
            }
        }
    }

    static func run(_ arguments: ArraySlice<String>) -> Int32 {
        guard let command = arguments.first else {
            Terminal.error(help)
            return 125
        }
        do {
            switch command {
            case "run":
                let run = try RunCommand.parse(arguments.dropFirst())
                return run.execute()
            case "batch":
                let batch = try BatchCommand.parse(arguments.dropFirst())
                return batch.execute()
            case "ctl":
                return try CtlCommand.parse(arguments.dropFirst()).execute()
            case "report":
                return try ReportCommand.parse(arguments.dropFirst()).execute()
            case "help", "--help", "-h":
                if arguments.dropFirst().first == "run" { throw HelpRequest(text: RunCommand.help) }
                if arguments.dropFirst().first == "batch" { throw HelpRequest(text: BatchCommand.help) }
                if arguments.dropFirst().first == "ctl" { throw HelpRequest(text: CtlCommand.help) }
                if arguments.dropFirst().first == "report" { throw HelpRequest(text: ReportCommand.help) }
                throw HelpRequest(text: help)
            case "version", "--version", "-V":
                Terminal.out("overtime \(version) (commit \(BuildInfo.commit))")
                return 0
            default:
                throw UsageError(message: "overtime: unknown command '\(command)'\(suggestion(for: command, among: ["run", "batch", "ctl", "report", "help", "version"])); see 'overtime --help'")
            }
        } catch let help as HelpRequest {
            Terminal.out(help.text)
            return 0
        } catch let usage as UsageError {
            Terminal.error(usage.message)
            return 125
        } catch {
            Terminal.error("overtime: \(error)")
            return 125
        }
    }
}
