import OvertimeCore

/// What the report takes from the tasks' logs (`logs/NAME.log` in the run directory): the
/// output of a diagnose command, and where the page links each log from.
extension RunReport {
    /// Bytes read from the end of a diagnosed task's log: a diagnosis comes right before
    /// its cancel, so it sits near the end, and a log of gigabytes is not read whole.
    public static let logTailLimit = 4 << 20
    /// A diagnosis is cut to this many bytes (its last line, which says how it ended, kept):
    /// a stack dump of a few hundred threads fits, a runaway command's output does not.
    public static let diagnosisLimit = 16 * 1024
    /// The diagnoses a page holds in all: past this, a diagnosed task's log is linked only,
    /// so a run of 100,000 timed-out elements makes no page of gigabytes.
    public static let diagnosesLimit = 4 << 20

    /// Reads the last diagnosis of each task whose journal says one ran, from its log's tail.
    /// - Parameter readLogTail: the last `logTailLimit` bytes of the log of that file name
    ///   (`Task.logFile`), or nil when it cannot be read.
    public mutating func readDiagnoses(_ readLogTail: (String) -> [UInt8]?) {
        var room = Self.diagnosesLimit
        for i in tasks.indices where tasks[i].diagnosed && room > 0 {
            guard let tail = readLogTail(tasks[i].logFile), let diagnosis = Self.lastDiagnosis(inLog: tail) else { continue }
            tasks[i].diagnosis = diagnosis
            room -= diagnosis.utf8.count
        }
    }

    /// The last diagnosis in `log`: from the supervisor's line that says it begins
    /// (`overtime: NAME: timeout due; diagnosing first …`) to the one that says how the
    /// command ended (`… the diagnose command exited 0 after 0.1s`, `… was cut …`,
    /// `… could not start …`), or to the log's end when that line is not there yet. Whatever
    /// the task itself wrote meanwhile is in it too: they share the log. Cut to
    /// `diagnosisLimit` bytes, keeping its last line.
    public static func lastDiagnosis(inLog log: [UInt8]) -> String? {
        let lines = log.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        guard let first = lines.lastIndex(where: { isNote($0, saying: "; diagnosing") }) else { return nil }
        let last = lines[first...].firstIndex(where: { isNote($0, saying: ": the diagnose command ") }) ?? lines.index(before: lines.endIndex)
        var kept = lines[first...last]
        // A log that ends in a newline splits into one empty line more.
        if kept.count > 1, kept.last?.isEmpty == true { kept = kept.dropLast() }
        let text = kept.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\n")
        guard text.utf8.count > diagnosisLimit, let end = kept.last else { return text }
        // The last line says how the command ended; one that is itself long (output with
        // no end line yet) is cut with the rest.
        let ending = end.count <= diagnosisLimit / 4 ? String(decoding: end, as: UTF8.self) : ""
        let room = diagnosisLimit - ending.utf8.count
        var head = ""
        for scalar in text.unicodeScalars {
            guard head.utf8.count + String(scalar).utf8.count <= room else { break }
            head.unicodeScalars.append(scalar)
        }
        let left = text.utf8.count - head.utf8.count - ending.utf8.count
        return head + "\n… (\(ByteSize.text(UInt64(max(0, left)))) more in the log)" + (ending.isEmpty ? "" : "\n" + ending)
    }

    /// A line the supervisor wrote into the log: `overtime: NAME: …` holding `words`.
    private static func isNote(_ line: ArraySlice<UInt8>, saying words: String) -> Bool {
        guard line.starts(with: "overtime: ".utf8) else { return false }
        let needle = Array(words.utf8)
        guard line.count >= needle.count else { return false }
        var i = line.startIndex
        while i + needle.count <= line.endIndex {
            if line[i..<i + needle.count].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }

    /// How a page written in `pageDirectory` links the logs of the run directory
    /// `runDirectory` (both absolute, without symlinks): `logs/` beside it, `../logs/` from a
    /// folder inside it, else an absolute `file://` address (a page mailed away loses them).
    public static func logLink(runDirectory: String, pageDirectory: String) -> String {
        let run = runDirectory.hasSuffix("/") && runDirectory.count > 1 ? String(runDirectory.dropLast()) : runDirectory
        if pageDirectory == run { return "logs/" }
        let inside = run == "/" ? "/" : run + "/"
        if pageDirectory.hasPrefix(inside) {
            let depth = pageDirectory.dropFirst(inside.count).split(separator: "/").count
            return String(repeating: "../", count: depth) + "logs/"
        }
        return "file://" + percentEncodedPath(inside + "logs/")
    }

    /// A path as a URL's path: every byte but the unreserved ones and `/` as `%XX`.
    static func percentEncodedPath(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out += "%"
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 15)])
            }
        }
        return out
    }
}
