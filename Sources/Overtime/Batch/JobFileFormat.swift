import OvertimeCore
import OvertimeProtocol
import OvertimeYAML

/// The language a job file is written in: JSON or YAML, one model and one set of checks
/// for both.
public enum JobFileFormat: Sendable, Equatable {
    case json
    case yaml

    /// By the file's name (`.json`; `.yaml` or `.yml`), else by its content: a file whose
    /// first character (spaces and a byte-order mark aside) is `{` is JSON, any other is
    /// YAML. A pipe (`/dev/fd/63`) has no telling name.
    public init(path: String, bytes: [UInt8]) {
        let name = path.split(separator: "/").last.map { $0.lowercased() } ?? ""
        if name.hasSuffix(".json") {
            self = .json
        } else if name.hasSuffix(".yaml") || name.hasSuffix(".yml") {
            self = .yaml
        } else {
            var text = bytes[...]
            if text.starts(with: [0xEF, 0xBB, 0xBF]) { text = text.dropFirst(3) }
            let first = text.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
            self = first == UInt8(ascii: "{") ? .json : .yaml
        }
    }
}

extension JobFile {
    /// Parses and validates a job file's text in `format`.
    /// - Parameters:
    ///   - bytes: the file's content (UTF-8).
    ///   - format: its language (`JobFileFormat(path:bytes:)`).
    ///   - origin, directory, host: as for `parse(_:origin:directory:host:)`.
    /// - Throws: `JobFileError` listing every problem found.
    public static func parse(_ bytes: [UInt8], format: JobFileFormat, origin: String, directory: String,
                             host: JobFileHost) throws(JobFileError) -> JobFile {
        switch format {
        case .json: try parse(bytes, origin: origin, directory: directory, host: host)
        case .yaml: try parse(try json(fromYAML: bytes, origin: origin), origin: origin, directory: directory, host: host)
        }
    }

    /// A YAML job file written as JSON, its tasks one at a time (`YAMLDocument.jsonText`),
    /// for the JSON reader, decoder and checks: the same model and the same messages. The
    /// JSON is also what a run directory keeps (`job.json`, which `--resume` and
    /// `overtime report` read).
    /// - Throws: `JobFileError` with the YAML's one problem, placed.
    static func json(fromYAML bytes: [UInt8], origin: String) throws(JobFileError) -> [UInt8] {
        let json: [UInt8]?
        do {
            json = try YAMLDocument.jsonText(bytes, streaming: "tasks")
        } catch {
            throw JobFileError(origin: origin, problems: [problem(error, in: bytes)])
        }
        guard let json else {
            throw JobFileError(origin: origin, problems: ["the file is empty; expected a YAML mapping with the tasks, such as:  tasks: [{name: hello, command: [echo, hello]}]"])
        }
        return json
    }

    /// "not YAML: … at line L, column C" for what libyaml refused, "… at line L, column C"
    /// for what a job file's YAML may not hold; each with the line's text.
    private static func problem(_ error: YAMLError, in bytes: [UInt8]) -> String {
        var text = (error.isSyntax ? "not YAML: " : "") + error.description
        if let line = JobFileText.excerpt(around: offset(ofLine: error.line, in: bytes), in: bytes) {
            text += " (the line reads: \(line))"
        }
        return text
    }

    /// Where line `line` (from 1) starts.
    private static func offset(ofLine line: Int, in bytes: [UInt8]) -> Int {
        var seen = 1
        var offset = 0
        while seen < line, let newline = bytes[offset...].firstIndex(of: UInt8(ascii: "\n")) {
            offset = newline + 1
            seen += 1
        }
        return offset
    }
}
