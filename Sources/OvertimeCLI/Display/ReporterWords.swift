import Overtime
import OvertimeProtocol

/// How the display and `ctl status` name the processes reporting for a task.
enum ReporterWords {
    /// `2 ranks` when the reporters are a distributed job's ranks (the one shown, or every
    /// one listed, named `rank N`), else `3 reporters`.
    static func count(_ n: Int, names: [String]) -> String {
        let ranks = !names.isEmpty && names.allSatisfy(isRank)
        return "\(n) \(ranks ? "ranks" : "reporters")"
    }

    /// Who the shown progress is from, when several report: nil with one reporter, whose
    /// name would say nothing new.
    static func shownReporter(_ p: Progress?) -> String? {
        guard let p, p.reporting != nil else { return nil }
        return p.reporter
    }

    private static func isRank(_ name: String) -> Bool {
        ReporterName.rank(name) != nil
    }
}
