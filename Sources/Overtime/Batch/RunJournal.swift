#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import OvertimeLoop
import OvertimeProtocol

/// A batch's run directory: `events.jsonl` (every state change, appended and written through
/// as it happens), `logs/<task>.log` (each task's stdout and stderr, written by the task
/// itself), `job.json` (the job file it ran) with `job-directory` (where its relative
/// `cwd`s were resolved), and `summary.json` at the end.
///
/// Each journal line goes out in one `write(2)` on an `O_APPEND` descriptor: a supervisor
/// killed at any moment leaves only whole lines behind, so `--resume` can always read it.
public final class RunJournal: @unchecked Sendable {
    // Only the batch's loop thread writes (and reads the failure state below).
    public let directory: String
    private let events: Int32
    /// What could not be written, one message per file and cause, in order: the record of
    /// the run is incomplete, whatever the tasks did.
    public private(set) var failures: [String] = []
    /// Journal lines that could not be written (wholly or in part).
    public private(set) var lostLines = 0
    /// The last append was cut short: the next one starts on a line of its own, so one
    /// cut line never swallows the whole line after it.
    private var cutLine = false

    /// Opens (creating as needed) the run directory and its journal.
    /// - Throws: `BatchError` naming the path that could not be made.
    public init(directory: String) throws(BatchError) {
        self.directory = directory
        try Self.makeDirectories(directory + "/logs")
        let fd = open(directory + "/events.jsonl", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BatchError("cannot open \(directory)/events.jsonl: \(String(cString: strerror(errno)))") }
        events = fd
    }

    deinit {
        close(events)
    }

    public var eventsPath: String { directory + "/events.jsonl" }

    /// Where task `name` writes its output (the same file for every attempt).
    public func logPath(for name: String) -> String {
        directory + "/logs/" + name + ".log"
    }

    /// Appends one line (newline included).
    /// - Returns: a message when this write failed in a way not reported before (the first
    ///   lost line, or a new cause), for the caller to say at once; nil otherwise.
    @discardableResult
    public func append(_ line: [UInt8]) -> String? {
        if cutLine {
            let code = Self.writeAll(events, [0x0A])
            guard code == 0 else { return lose(code) }
            cutLine = false
        }
        let code = Self.writeAll(events, line)
        guard code != 0 else { return nil }
        // Whatever part of the line went out stays; the next line starts fresh after it.
        cutLine = true
        return lose(code)
    }

    /// Writes a whole file atomically (a temporary, then rename): a failed write leaves the
    /// old file, or none, never a cut one.
    /// - Returns: a message when it could not be written (also kept in `failures`).
    @discardableResult
    public func writeFile(_ name: String, _ bytes: [UInt8]) -> String? {
        let path = directory + "/" + name
        guard let code = Descriptors.replaceFile(path, with: bytes, temporary: path + ".tmp") else { return nil }
        return fail("cannot write \(path)", code)
    }

    /// Appends a marker to a task's log before an attempt, so retries read apart.
    /// - Returns: a message when it could not be written.
    @discardableResult
    public func markAttempt(_ name: String, attempt: Int) -> String? {
        guard attempt > 1 else { return nil }
        let fd = open(logPath(for: name), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return fail("cannot write \(logPath(for: name))", errno) }
        let code = Self.writeAll(fd, Array("--- overtime: attempt \(attempt) ---\n".utf8))
        close(fd)
        return code == 0 ? nil : fail("cannot write \(logPath(for: name))", code)
    }

    private func lose(_ code: Int32) -> String? {
        lostLines += 1
        return fail("cannot write \(eventsPath)", code)
    }

    /// Records a failure; returns its message unless the same one was recorded already
    /// (a full disk fails every write after the first: it is said once, and counted).
    private func fail(_ what: String, _ code: Int32) -> String? {
        let message = "\(what): \(String(cString: strerror(code)))"
        guard !failures.contains(message) else { return nil }
        failures.append(message)
        return message
    }

    /// The tasks that succeeded in a run directory's journal: the names whose last
    /// `finished` line says `succeeded`. Lines that are not valid JSON are passed over.
    public static func succeededTasks(in directory: String) throws(BatchError) -> Set<String> {
        guard let bytes = Descriptors.readWholeFile(directory + "/events.jsonl") else {
            throw BatchError("\(directory) is not a run directory: no events.jsonl")
        }
        var last: [String: Bool] = [:]
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            guard let value = try? JSONValue.parse(Array(line)),
                  case .string("finished")? = value["event"],
                  case let .string(task)? = value["task"],
                  case let .string(state)? = value["state"]
            else { continue }
            last[task] = state == "succeeded"
        }
        return Set(last.filter(\.value).keys)
    }

    /// Refuses a directory that already holds something: an earlier run (resume it instead)
    /// or anything else (a run would scatter its files among them). A directory that does
    /// not exist yet, or is empty, is fine.
    /// - Throws: `BatchError` saying what is there and what to do instead.
    public static func checkFresh(_ directory: String) throws(BatchError) {
        guard let names = Descriptors.directoryEntries(directory) else { return }  // missing: it will be made
        guard let found = names.contains("events.jsonl") ? "events.jsonl" : names.first else { return }
        if found == "events.jsonl" {
            throw BatchError("\(directory) already holds a run (events.jsonl); a second run would append to its journal and overwrite its summary. Rerun what did not succeed there with --resume \(directory), or give a new --run-dir")
        }
        throw BatchError("\(directory) is not empty (it holds '\(found)'); give --run-dir a new or empty directory")
    }

    /// The directory the run's job file resolved relative `cwd`s against (its
    /// `job-directory` file), or nil for a run directory that has none.
    public static func jobFileDirectory(in directory: String) -> String? {
        guard let bytes = Descriptors.readWholeFile(directory + "/job-directory"), !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes every byte (`Descriptors.writeAll`); returns 0, or the errno of the write that
    /// failed (ENOSPC for a write that made no progress without saying why).
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        do throws(SystemError) {
            try Descriptors.writeAll(fd, bytes)
            return 0
        } catch {
            return error.errno
        }
    }

    private static func makeDirectories(_ path: String) throws(BatchError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0, errno != EEXIST {
                throw BatchError("cannot create \(current): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// A batch could not run: its run directory, its resume source, its supervisor.
public struct BatchError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
