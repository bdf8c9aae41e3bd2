#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import OvertimeLoop
import OvertimeProtocol
import Synchronization

/// A batch's run directory: `events.jsonl` (every state change, appended as it happens),
/// `logs/<task>.log` (each task's stdout and stderr, written by the task itself; created,
/// and marked before a retry, by the journal's thread), `job.json`
/// (the job file it ran) with `job-directory` (where its relative `cwd`s were resolved), and
/// `summary.json` at the end.
///
/// The journal's lines are written by a thread of its own (`QueuedWriter`): a run directory
/// on a filesystem that stalls (NFS, Lustre, a frozen mount) never holds the loop, and with
/// it the deadlines, the signals and the cancels. Lines go out in order, whole, on an
/// `O_APPEND` descriptor: a supervisor killed at any moment leaves only whole lines behind,
/// so `--resume` can always read it. While the filesystem stalls, state changes wait in
/// memory however long it takes; progress and heartbeat lines are held back once 4 MiB wait,
/// and a `held-back` line says how many, once the journal is written again.
public final class RunJournal: Sendable {
    public let directory: String
    private let writer: QueuedWriter
    private let file: JournalFile

    /// What the writing thread found, read on the loop once the journal is drained.
    fileprivate struct Record {
        /// What could not be written, one message per file and cause, in order: the record
        /// of the run is incomplete, whatever the tasks did.
        var failures: [String] = []
        /// Journal lines that could not be written (wholly or in part).
        var lostLines = 0
        /// Said at once, on the writing thread: a failure not said before.
        var onFailure: @Sendable (String) -> Void = { _ in }
    }

    /// Opens (creating as needed) the run directory and its journal.
    /// - Throws: `BatchError` naming the path that could not be made.
    public init(directory: String, runID: String) throws(BatchError) {
        self.directory = directory
        try Self.makeDirectories(directory + "/logs")
        let path = directory + "/events.jsonl"
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .cannotOpenJournal(path: path, SystemError("open", errno: errno)) }
        let encoder = EventEncoder(runID: runID)
        let lines = JournalFile(fd: fd, path: path)
        file = lines
        writer = QueuedWriter(output: { bytes in lines.write(bytes) }, onClose: { Descriptors.close(fd) }) { held, bytes in
            var w = JSONWriter(capacity: 128)
            w.beginObject()
            w.key("time"); w.string(encoder.timestamp(.now()))
            w.key("run"); w.string(runID)
            w.key("event"); w.string("held-back")
            w.key("lines"); w.int(held)
            w.key("bytes"); w.int(bytes)
            w.endObject()
            w.raw("\n")
            _ = lines.write(w.bytes)
        }
    }

    deinit {
        writer.closeWhenWritten()
    }

    public var eventsPath: String { directory + "/events.jsonl" }

    /// What could not be written, one message per file and cause (complete once `drain` returned).
    public var failures: [String] { file.record.withLock { $0.failures } }
    /// Journal lines that could not be written (complete once `drain` returned).
    public var lostLines: Int { file.record.withLock { $0.lostLines } }

    /// Where a failure to write is said, as it is found (on the journal's writing thread).
    public func onFailure(_ handler: @escaping @Sendable (String) -> Void) {
        file.record.withLock { $0.onFailure = handler }
    }

    /// Where task `name` writes its output (the same file for every attempt).
    public func logPath(for name: String) -> String {
        directory + "/logs/" + JobElements.logFileName(for: name)
    }

    /// Queues one line (newline included); never waits. A progress or heartbeat line is
    /// `.event`: held back, and counted, while the filesystem stalls; anything else `.kept`.
    public func append(_ line: [UInt8], _ importance: QueuedWriter.Importance = .kept) {
        writer.write(line, importance)
    }

    /// Waits until every line queued is written: before the summary, which says what was lost.
    public func drain() {
        writer.flush()
    }

    /// Writes a whole file atomically (a temporary, then rename): a failed write leaves the
    /// old file, or none, never a cut one. Only at the start and the end of a run, when no
    /// task's deadline can wait on it.
    /// - Returns: a message when it could not be written (also kept in `failures`).
    @discardableResult
    public func writeFile(_ name: String, _ bytes: [UInt8], mode: mode_t = 0o644) -> String? {
        let path = directory + "/" + name
        guard let code = Descriptors.replaceFile(path, with: bytes, temporary: path + ".tmp", mode: mode) else { return nil }
        return file.record.withLock { Self.fail(&$0, "cannot write \(path)", code) }
    }

    /// `writeFile` for a file the run cannot go without (`--resume` reads `job.json`): its
    /// failure stops the run, so it is thrown rather than kept in `failures`.
    /// - Throws: `BatchError.cannotWrite`.
    func writeRequiredFile(_ name: String, _ bytes: [UInt8]) throws(BatchError) {
        let path = directory + "/" + name
        if let code = Descriptors.replaceFile(path, with: bytes, temporary: path + ".tmp") {
            throw .cannotWrite(path: path, SystemError("write", errno: code))
        }
    }

    /// Makes task `name`'s log ready for an attempt on the journal's thread, never the
    /// loop's (creating a file waits while its filesystem stalls): creates it, and before a
    /// retry appends a marker, so retries read apart. Then calls `done` there, with a message
    /// when the marker could not be written. A log that cannot be created is not reported
    /// here: the task's start then fails, saying why.
    public func prepareLog(_ name: String, attempt: Int, then done: @escaping @Sendable (String?) -> Void) {
        let path = logPath(for: name), file = self.file
        writer.perform {
            let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            let code = fd < 0 ? errno : attempt > 1 ? Self.writeAll(fd, Array("--- overtime: attempt \(attempt) ---\n".utf8)) : 0
            if fd >= 0 { close(fd) }
            done(code == 0 || attempt == 1 ? nil : file.record.withLock { Self.fail(&$0, "cannot write \(path)", code) })
        }
    }

    /// Records a failure; returns its message unless the same one was recorded already
    /// (a full disk fails every write after the first: it is said once, and counted).
    fileprivate static func fail(_ record: inout Record, _ what: String, _ code: Int32) -> String? {
        let message = "\(what): \(String(cString: strerror(code)))"
        guard !record.failures.contains(message) else { return nil }
        record.failures.append(message)
        return message
    }

    /// The tasks that succeeded in a run directory's journal: the names whose last
    /// `finished` line says `succeeded`. Lines that are not valid JSON are passed over.
    public static func succeededTasks(in directory: String) throws(BatchError) -> Set<String> {
        guard let bytes = Descriptors.readWholeFile(directory + "/events.jsonl") else {
            throw .notARunDirectory(path: directory)
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
            throw .holdsARun(path: directory)
        }
        throw .notEmpty(path: directory, found: found)
    }

    /// The directory the run's job file resolved relative `cwd`s against (its
    /// `job-directory` file), or nil for a run directory that has none.
    public static func jobFileDirectory(in directory: String) -> String? {
        guard let bytes = Descriptors.readWholeFile(directory + "/job-directory"), !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes every byte (`Descriptors.writeAll`); returns 0, or the errno of the write that
    /// failed (ENOSPC for a write that made no progress without saying why).
    fileprivate static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
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
                throw .cannotCreateDirectory(path: current, SystemError("mkdir", errno: errno))
            }
        }
    }
}

/// The journal's descriptor, written on the journal's thread: whole lines, and after a write
/// cut short, the next line on a line of its own, so one cut line never swallows the next.
private final class JournalFile: @unchecked Sendable {
    let record = Mutex(RunJournal.Record())
    // The rest is the journal's writing thread's only.
    private let fd: Int32
    private let path: String
    private var cutLine = false

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Writes `bytes` (whole lines); always true: a failed write loses its lines, counted,
    /// and the next write tries again (space may be freed).
    func write(_ bytes: [UInt8]) -> Bool {
        if cutLine {
            guard RunJournal.writeAll(fd, [0x0A]) == 0 else { return lose(bytes, written: 0, errno) }
            cutLine = false
        }
        var written = 0
        let code = bytes.withUnsafeBytes { raw -> Int32 in
            while written < raw.count {
                let n = systemWrite(fd, raw.baseAddress! + written, raw.count - written)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return n == 0 ? ENOSPC : errno }
                written += n
            }
            return 0
        }
        return code == 0 ? true : lose(bytes, written: written, code)
    }

    private func lose(_ bytes: [UInt8], written: Int, _ code: Int32) -> Bool {
        // Whatever part of a line went out stays; the next line starts fresh after it.
        cutLine = written > 0 && bytes[written - 1] != 0x0A
        let lost = bytes[written...].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        let message = record.withLock { r -> (String, @Sendable (String) -> Void)? in
            r.lostLines += lost
            return RunJournal.fail(&r, "cannot write \(path)", code).map { ($0, r.onFailure) }
        }
        if let (text, say) = message { say(text) }
        return true
    }
}

/// A batch could not run: its run directory, its resume source, its executor.
public enum BatchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A directory of the run directory's path could not be made.
    case cannotCreateDirectory(path: String, SystemError)
    /// The journal (`events.jsonl`) could not be opened.
    case cannotOpenJournal(path: String, SystemError)
    /// A file the run cannot go without (`job.json`, `job-directory`) could not be written.
    case cannotWrite(path: String, SystemError)
    /// `--resume` was given a directory without a journal.
    case notARunDirectory(path: String)
    /// The run directory already holds a run: resume it instead.
    case holdsARun(path: String)
    /// The run directory holds something else (`found` is one of its entries).
    case notEmpty(path: String, found: String)
    /// The srun executor outside a Slurm allocation (no SLURM_JOB_ID).
    case outsideSlurmAllocation
    /// The run directory is on a filesystem (`filesystem`: ext4, tmpfs, …) that the other
    /// nodes of Slurm job `job` do not see.
    case runDirectoryNotShared(path: String, filesystem: String, otherNodes: Int, job: String)
    /// Where this overtime binary is cannot be told, for the nodes to run it.
    case binaryNotFound

    public var message: String {
        switch self {
        case let .cannotCreateDirectory(path, error): "cannot create \(path): \(error.reason)"
        case let .cannotOpenJournal(path, error): "cannot open \(path): \(error.reason)"
        case let .cannotWrite(path, error): "cannot write \(path): \(error.reason)"
        case let .notARunDirectory(path): "\(path) is not a run directory: no events.jsonl"
        case let .holdsARun(path):
            "\(path) already holds a run (events.jsonl); a second run would append to its journal and overwrite its summary. "
                + "Rerun what did not succeed there with --resume \(path), or give a new --run-dir"
        case let .notEmpty(path, found): "\(path) is not empty (it holds '\(found)'); give --run-dir a new or empty directory"
        case .outsideSlurmAllocation:
            "the srun executor runs inside a Slurm allocation (sbatch or salloc): SLURM_JOB_ID is not set"
        case let .runDirectoryNotShared(path, filesystem, otherNodes, job):
            "the run directory \(path) is on \(filesystem), which the other \(otherNodes) node(s) of job \(job) do not see: "
                + "the tasks' logs must be on a filesystem every node shares (NFS, Lustre, GPFS, …); pass --run-dir on one"
        case .binaryNotFound: "cannot tell where this overtime binary is, for the nodes to run it; pass its path"
        }
    }

    public var description: String { message }
}
