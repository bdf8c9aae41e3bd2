// upload-file: the seed's UploadFileIntent as a program Overtime runs. It "uploads" a file
// in 100 chunks, reports progress after each (which keeps its budget alive), checks for
// cancellation before each, and returns "Upload complete!" as its result. With
// --read-ahead-mb it first reads that much of the file into memory, and gives half of it
// back when Overtime warns that the task's memory is running short. With --hash-ms it first
// hashes the file, a silent part it names as the phase `hash` with a window of its own (and
// with --hash-fails the hash fails and the upload goes on unverified). With --resume-file,
// when Overtime advises a checkpoint (the upload will not be done before its max-runtime),
// it writes the chunk it reached there, in the phase `checkpoint`, and stops.
//
//   overtime run --budget 2s -- upload-file [--chunks N] [--chunk-ms MS] [--read-ahead-mb MB]
//       [--hash-ms MS [--hash-fails]] [--resume-file F]
import OvertimeWorker
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The part of the file read ahead of the upload, held in memory in 1 MiB blocks: the more,
/// the fewer stalls on a slow disk, and the first thing to give back when memory is short.
final class ReadAhead: Sendable {
    private struct Held {
        var blocks: [[UInt8]] = []
        /// How much to hold, in MiB. Halving it mid-fill stops the fill there too, so the
        /// warning that the fill itself brings on is obeyed whenever it comes.
        var target = 0
        /// How often it was halved: a fill that starts after a warning starts smaller.
        var halvings = 0
    }

    private let held = Mutex(Held())

    /// Reads `megabytes` MiB ahead (here: fills them, so that the pages are really in use).
    func fill(megabytes: Int) {
        held.withLock { $0.target = max(0, megabytes) >> $0.halvings }
        while held.withLock({ $0.blocks.count < $0.target }) {
            let block = [UInt8](repeating: 0xA5, count: 1 << 20)
            held.withLock { h in
                if h.blocks.count < h.target { h.blocks.append(block) }
            }
        }
    }

    /// The MiB held now.
    var megabytes: Int { held.withLock { $0.blocks.count } }

    /// Halves what is to be held (rounded down) and gives back what is beyond it; returns
    /// the MiB to be held before and after.
    func halve() -> (before: Int, after: Int) {
        held.withLock { h in
            let before = h.target
            h.target /= 2
            h.halvings += 1
            if h.blocks.count > h.target { h.blocks.removeLast(h.blocks.count - h.target) }
            return (before, h.target)
        }
    }
}

struct HashFailed: Error {}
struct CheckpointFailed: Error {}

/// Writes `text` to `path` whole: a temporary file, then a rename.
func save(_ text: String, to path: String) -> Bool {
    let temporary = path + ".tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return false }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    return written == bytes.count && rename(temporary, path) == 0
}

/// Prints to stderr with write(2): no shared C stream to race on.
func complain(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

@main
struct UploadFile {
    static func main() async {
        var chunks = 100
        var chunkDelay = Duration.milliseconds(30)
        var readAheadMegabytes = 0
        var hashDelay: Duration?
        var hashFails = false
        var resumeFile: String?
        var args = CommandLine.arguments.dropFirst()
        while let arg = args.popFirst() {
            switch arg {
            case "--chunks": chunks = args.popFirst().flatMap(Int.init) ?? chunks
            case "--chunk-ms": chunkDelay = .milliseconds(args.popFirst().flatMap(Int.init) ?? 30)
            case "--read-ahead-mb": readAheadMegabytes = args.popFirst().flatMap(Int.init) ?? 0
            case "--hash-ms": hashDelay = .milliseconds(args.popFirst().flatMap(Int.init) ?? 0)
            case "--hash-fails": hashFails = true
            case "--resume-file": resumeFile = args.popFirst()
            default:
                complain("usage: upload-file [--chunks N] [--chunk-ms MS] [--read-ahead-mb MB] [--hash-ms MS [--hash-fails]] [--resume-file F]")
                exit(2)
            }
        }
        let total = chunks
        let delay = chunkDelay
        let readAhead = ReadAhead()
        let megabytesAhead = readAheadMegabytes
        let (hashing, failing, resumeAt) = (hashDelay, hashFails, resumeFile)
        // Registered before the read-ahead fills, so that the warning it may cause is heard.
        Worker.onMemoryWarning { warning in
            let (before, after) = readAhead.halve()
            complain("upload-file: memory warning, \(warning.used) of \(warning.limit) bytes: read-ahead cut from \(before) to \(after) MiB")
        }
        Worker.onCheckpointAdvice { advice in
            complain("upload-file: advised to checkpoint, \(advice.remaining) left: \(advice.why)")
        }

        do {
            let result = try await performBackgroundTask { progress in
                progress.totalUnitCount = Int64(total)
                progress.localizedDescription = "Uploading file"
                // Inside the task's cancellation scope: a memory cancel while it fills is
                // heard as one, and the upload unwinds at its first chunk.
                readAhead.fill(megabytes: megabytesAhead)
                if let hashing {
                    do {
                        // Silent for as long as the file takes: a window of its own, so
                        // the upload's short one does not cut it off.
                        try await Worker.phase("hash", window: .seconds(60)) {
                            try await Task.sleep(for: hashing)
                            if failing { throw HashFailed() }
                        }
                    } catch is HashFailed {
                        complain("upload-file: hashing failed; uploading unverified")
                    }
                }
                for chunk in 0..<total {
                    try Task.checkCancellation()
                    if let resumeAt, Worker.checkpointAdvice != nil {
                        let saved = Worker.phase("checkpoint") { save("\(chunk)\n", to: resumeAt) }
                        guard saved else { throw CheckpointFailed() }
                        return "Upload paused at chunk \(chunk) of \(total)"
                    }
                    try await Task.sleep(for: delay)  // uploading the chunk would go here
                    progress.completedUnitCount = Int64(chunk + 1)
                    progress.localizedAdditionalDescription = "\((chunk + 1) * 100 / total)% complete"
                }
                return "Upload complete!"
            }
            if let warning = Worker.memoryWarning {
                complain("upload-file: finished after a memory warning at \(warning.used) of \(warning.limit) bytes, with \(readAhead.megabytes) MiB read ahead")
            }
            print(result)
        } catch {
            let why = Worker.cancellation.map { " (\($0))" } ?? ""
            complain("upload-file: upload stopped\(why) after \(Worker.progress.completedUnitCount) of \(total) chunks")
            exit(1)
        }
    }
}
