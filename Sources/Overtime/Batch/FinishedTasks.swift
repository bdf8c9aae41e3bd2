import OvertimeProtocol

/// What a batch keeps of each task that has finished, until the run's summary: its summary
/// row and the reason `ctl status` gives, and nothing of its attempts (no outcome, progress,
/// handle or buffer). A batch runs for as many tasks as its job file holds, so this is what
/// its memory grows by per task: one record of about a hundred bytes (the name is the job
/// file's, durations are nanoseconds, the texts are mostly short enough to need no storage
/// of their own) and a 4-byte place. Loop-thread only, as the batch is.
struct FinishedTasks {
    private struct Record {
        var reason: String?
        var detail: String?
        var result: JSONValue?
        /// Nanoseconds; `none` for no value.
        var duration: Int64
        var cpuUser: Int64
        var cpuSystem: Int64
        var peakMemory: UInt64
        var exitCode: Int32
        var attempts: Int32
        var protocolErrors: Int32
        var outcome: TaskReport.Outcome
        var hasExitCode: Bool
        var resumed: Bool
        var memorySource: ResourceUsage.MemorySource?
        var stalls: Int32
        var phase: String?

        static let none = Int64.min
        static let noPeak = UInt64.max
    }

    private var records: [Record] = []
    /// Each task's place in `records`, by its index in the job file; -1 until it finished.
    private var places: [Int32]

    init(taskCount: Int) {
        places = [Int32](repeating: -1, count: taskCount)
    }

    /// Keeps `report` as task `index`'s (a task finishes once; a second report replaces the first).
    mutating func keep(_ report: TaskReport, at index: Int) {
        let record = Record(reason: report.reason, detail: report.detail, result: report.result,
                            duration: Self.nanoseconds(report.duration), cpuUser: Self.nanoseconds(report.usage.cpuUser),
                            cpuSystem: Self.nanoseconds(report.usage.cpuSystem), peakMemory: report.usage.peakMemory ?? Record.noPeak,
                            exitCode: report.exitCode ?? 0, attempts: Int32(clamping: report.attempts),
                            protocolErrors: Int32(clamping: report.protocolErrors), outcome: report.outcome,
                            hasExitCode: report.exitCode != nil, resumed: report.resumed, memorySource: report.usage.memorySource,
                            stalls: Int32(clamping: report.stalls), phase: report.phase)
        if places[index] >= 0 {
            records[Int(places[index])] = record
        } else {
            places[index] = Int32(records.count)
            records.append(record)
        }
    }

    /// Task `index`'s report, named `name`; nil until it finished.
    func report(at index: Int, name: String) -> TaskReport? {
        guard let record = self[index] else { return nil }
        let usage = ResourceUsage(peakMemory: record.peakMemory == Record.noPeak ? nil : record.peakMemory,
                                  cpuUser: Self.duration(record.cpuUser), cpuSystem: Self.duration(record.cpuSystem),
                                  memorySource: record.memorySource)
        return TaskReport(name: name, outcome: record.outcome, reason: record.reason, detail: record.detail,
                          exitCode: record.hasExitCode ? record.exitCode : nil, attempts: Int(record.attempts),
                          duration: Self.duration(record.duration), result: record.result, resumed: record.resumed,
                          protocolErrors: Int(record.protocolErrors), usage: usage, phase: record.phase, stalls: Int(record.stalls))
    }

    /// Why task `index` failed or was skipped, once it finished.
    func reason(at index: Int) -> String? {
        self[index]?.reason
    }

    private subscript(index: Int) -> Record? {
        let place = places[index]
        return place < 0 ? nil : records[Int(place)]
    }

    private static func nanoseconds(_ duration: Duration?) -> Int64 {
        duration.map(\.nanoseconds) ?? Record.none
    }

    private static func duration(_ nanoseconds: Int64) -> Duration? {
        nanoseconds == Record.none ? nil : .nanoseconds(nanoseconds)
    }
}
