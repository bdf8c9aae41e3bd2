import OvertimeLoop
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads what has been appended to a file since the last read (`tail -f`), for
/// `overtime batch --follow`: the task writes its log itself, so the log stays complete
/// and following it changes nothing for the task.
final class LogFollower: Sendable {
    let path: String
    /// At most this much is read per call, so one call never holds up a frame for long.
    static let chunk = 256 * 1024

    private struct State: Sendable {
        var fd: Int32 = -1
        var offset: Int64 = 0
    }

    private let state: Mutex<State>

    /// Starts at the current end of the file (a resumed run's earlier output is not
    /// shown again), or at its start once it appears.
    init(path: String) {
        self.path = path
        var info = stat()
        let start = stat(path, &info) == 0 ? Int64(info.st_size) : 0
        state = Mutex(State(offset: start))
    }

    deinit {
        state.withLock { if $0.fd >= 0 { close($0.fd) } }
    }

    /// The bytes appended since the last call (empty when none, or no file yet).
    func read() -> [UInt8] {
        state.withLock { state in
            if state.fd < 0 {
                state.fd = open(path, O_RDONLY | O_CLOEXEC)
                if state.fd < 0 { return [] }
            }
            var info = stat()
            if fstat(state.fd, &info) == 0, Int64(info.st_size) < state.offset {
                state.offset = 0  // truncated: start over
            }
            var result: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while result.count < Self.chunk {
                let got = try? Syscall.retrying("read \(path)") {
                    buffer.withUnsafeMutableBytes { pread(state.fd, $0.baseAddress, $0.count, off_t(state.offset)) }
                }
                guard let n = got, n > 0 else { break }
                result += buffer[0..<n]
                state.offset += Int64(n)
            }
            return result
        }
    }
}
