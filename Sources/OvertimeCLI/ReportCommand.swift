import Overtime
import OvertimeLoop
import OvertimeReport

/// `overtime report RUN_DIR [-o FILE.html]`: a batch's run directory drawn as one
/// self-contained HTML page (docs/report.md).
struct ReportCommand {
    var runDirectory: String
    /// Where the page goes; nil: `RUN_DIR/report.html`.
    var output: String?

    static let help = """
    Usage: overtime report RUN_DIR [-o FILE.html]

    Draws a batch's run directory as one HTML page that needs nothing from the network: a
    timeline of every attempt of every task (a lane per GPU and per concurrency slot),
    coloured by outcome, with each cancel's reason where it happened and retries linked;
    each task's progress over time; the table of tasks with their results; memory peaks
    against each task's memory-max; a cancelled task's diagnose output; links to the logs. The journal
    (events.jsonl) is all it reads, so a run still going, or one that was killed, has a
    report too: what has no end yet is drawn up to the journal's last line.

    Options:
      -o, --output FILE    write the page to FILE (default: RUN_DIR/report.html)

    Prints the page's path. Exit status: 0 when written, 125 when RUN_DIR is not a run
    directory, its journal holds no record, or FILE cannot be written.
    """

    static let knownOptions = ["-o", "--output", "--help"]

    static func parse(_ arguments: ArraySlice<String>) throws -> ReportCommand {
        var cursor = ArgumentCursor(arguments, command: "overtime report")
        var positional: [String] = []
        var output: String?
        while let token = cursor.next() {
            switch token {
            case .endOfOptions:
                positional += cursor.rest
                cursor = ArgumentCursor([], command: "overtime report")
            case let .word(word):
                positional.append(word)
            case let .option(option, inline):
                switch option {
                case "--help", "-h":
                    throw HelpRequest(text: help)
                case "-o", "--output":
                    let path = try cursor.value(of: option, inline: inline)
                    guard !path.isEmpty else { throw UsageError(message: "overtime report: \(option) needs a file name") }
                    output = path
                default:
                    throw UsageError(message: "overtime report: unknown option '\(option)'\(suggestion(for: option, among: knownOptions)); see 'overtime report --help'")
                }
            }
        }
        guard let directory = positional.first else {
            throw UsageError(message: "overtime report: which run directory? (overtime report RUN_DIR [-o FILE.html])")
        }
        guard positional.count == 1 else {
            throw UsageError(message: "overtime report: one run directory only, got \(positional.count): \(positional.joined(separator: " "))")
        }
        return ReportCommand(runDirectory: directory, output: output)
    }

    func execute() -> Int32 {
        let directory = runDirectory.count > 1 && runDirectory.hasSuffix("/") ? String(runDirectory.dropLast()) : runDirectory
        guard Descriptors.isDirectory(directory) else {
            Terminal.error("overtime report: \(directory) is not a directory; give a batch's run directory (overtime batch --run-dir)")
            return 125
        }
        guard let journal = Descriptors.readWholeFile(directory + "/events.jsonl") else {
            Terminal.error("overtime report: \(directory) is not a run directory: it has no readable events.jsonl")
            return 125
        }
        var report: RunReport
        do {
            report = try RunReport.read(journal: journal,
                                        summary: Descriptors.readWholeFile(directory + "/summary.json"),
                                        jobFile: Descriptors.readWholeFile(directory + "/job.json"))
        } catch {
            Terminal.error("overtime report: \(directory)/events.jsonl: \(error.message)")
            return 125
        }
        let path = output ?? directory + "/report.html"
        report.logDirectory = Self.logLink(runDirectory: directory, page: path)
        report.readDiagnoses { Descriptors.readFileTail(directory + "/logs/" + $0, limit: RunReport.logTailLimit) }
        let failure: String?
        do {
            let file = try OutputFile(path: path)
            failure = file.write(RunReportPage.html(report))?.reason
        } catch {
            failure = error.reason
        }
        if let failure {
            Terminal.error("overtime report: cannot write \(path): \(failure)")
            return 125
        }
        if report.unreadableLines > 0 {
            Terminal.error("overtime report: passed over \(report.unreadableLines) unreadable journal line\(report.unreadableLines == 1 ? "" : "s") (a cut last line is normal for a run that was killed)")
        }
        Terminal.out(path)
        return 0
    }

    /// How the page at `page` links the run's logs; nil when either place cannot be resolved
    /// (the page's folder is missing: writing it fails and says so).
    static func logLink(runDirectory: String, page: String) -> String? {
        let folder = page.contains("/") ? String(page[..<page.lastIndex(of: "/")!]) : "."
        guard let run = Descriptors.realPath(runDirectory), let pageFolder = Descriptors.realPath(folder.isEmpty ? "/" : folder) else { return nil }
        return RunReport.logLink(runDirectory: run, pageDirectory: pageFolder)
    }
}
