// upload-file: the seed's UploadFileIntent as a program Overtime runs. It "uploads" a file
// in 100 chunks, reports progress after each (which keeps its budget alive), checks for
// cancellation before each, and returns "Upload complete!" as its result.
//
//   overtime run --budget 2s -- upload-file [--chunks N] [--chunk-ms MS]
import OvertimeWorker
#if canImport(Glibc)
import Glibc
#endif

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
        var args = CommandLine.arguments.dropFirst()
        while let arg = args.popFirst() {
            switch arg {
            case "--chunks": chunks = args.popFirst().flatMap(Int.init) ?? chunks
            case "--chunk-ms": chunkDelay = .milliseconds(args.popFirst().flatMap(Int.init) ?? 30)
            default:
                complain("usage: upload-file [--chunks N] [--chunk-ms MS]")
                exit(2)
            }
        }
        let total = chunks
        let delay = chunkDelay

        do {
            let result = try await performBackgroundTask { progress in
                progress.totalUnitCount = Int64(total)
                progress.localizedDescription = "Uploading file"
                for chunk in 0..<total {
                    try Task.checkCancellation()
                    try await Task.sleep(for: delay)  // uploading the chunk would go here
                    progress.completedUnitCount = Int64(chunk + 1)
                    progress.localizedAdditionalDescription = "\((chunk + 1) * 100 / total)% complete"
                }
                return "Upload complete!"
            }
            print(result)
        } catch {
            let why = Worker.cancellation.map { " (\($0))" } ?? ""
            complain("upload-file: upload stopped\(why) after \(Worker.progress.completedUnitCount) of \(total) chunks")
            exit(1)
        }
    }
}
