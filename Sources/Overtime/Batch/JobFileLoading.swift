#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension JobFile {
    /// The largest job file read: it keeps `/dev/zero` or a runaway generator from filling
    /// memory. A million tasks of a few hundred bytes each must fit (16 MiB held about
    /// 350,000 of the smallest), so the bound is 1 GiB.
    public static let maximumFileSize = 1 << 30

    /// Reads, parses and validates the job file at `path`. A relative `cwd` is resolved
    /// against the file's directory, or against the current directory when the file is a
    /// pipe or a device (`overtime batch <(generate-jobs)` reads `/dev/fd/63`).
    /// - Throws: `JobFileError`, also when the file is missing or cannot be read.
    public static func load(path: String) throws(JobFileError) -> JobFile {
        try loadWithText(path: path).job
    }

    /// Like `load(path:)`, and also returns the bytes read and the directory relative
    /// `cwd`s were resolved against: a pipe can be read only once, and a batch keeps both
    /// for `--resume`.
    /// - Parameter directory: where to resolve relative `cwd`s; nil for the file's own
    ///   directory (the current one for a pipe).
    public static func loadWithText(path: String, directory: String? = nil) throws(JobFileError) -> (job: JobFile, text: [UInt8], directory: String) {
        switch JobFilePath.read(path) {
        case let .success(file):
            let directory = directory ?? (file.isRegular ? JobFilePath.absoluteDirectory(of: path) : JobFilePath.currentDirectory())
            return (try parse(file.bytes, origin: path, directory: directory), file.bytes, directory)
        case let .failure(problem):
            throw JobFileError(origin: path, problems: [problem.message])
        }
    }
}

/// Reading the file and placing relative paths: the only parts of the job file that touch
/// the system.
enum JobFilePath {
    struct ReadProblem: Error {
        var message: String
    }

    /// A file's content, and whether it is a regular file (not a pipe or a device).
    static func read(_ path: String) -> Result<(bytes: [UInt8], isRegular: Bool), ReadProblem> {
        if path.isEmpty {
            return .failure(ReadProblem(message: "no job file path given"))
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            return .failure(ReadProblem(message: "cannot open the job file: \(explain(errno))"))
        }
        defer { close(fd) }
        var info = stat()
        var isRegular = true
        if fstat(fd, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFDIR {
                return .failure(ReadProblem(message: "cannot read the job file: it is a directory; expected a JSON file"))
            }
            isRegular = info.st_mode & S_IFMT == S_IFREG
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(ReadProblem(message: "cannot read the job file: \(explain(errno))"))
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > JobFile.maximumFileSize {
                return .failure(ReadProblem(message: "the job file is larger than \(JobFile.maximumFileSize >> 20) MiB; is this the right file?"))
            }
        }
        return .success((bytes, isRegular))
    }

    private static func explain(_ code: Int32) -> String {
        switch code {
        case ENOENT: "there is no such file (check the path)"
        case EACCES: "permission denied"
        case EISDIR: "it is a directory; expected a JSON file"
        default: String(cString: strerror(code))
        }
    }

    /// The absolute directory that holds `path` (the current directory for a bare name).
    static func absoluteDirectory(of path: String) -> String {
        let directory: String
        if let slash = path.lastIndex(of: "/") {
            directory = slash == path.startIndex ? "/" : String(path[..<slash])
        } else {
            directory = "."
        }
        if directory.hasPrefix("/") { return normalize(directory) }
        return resolve(directory, against: currentDirectory())
    }

    /// `path` if absolute, else `base/path`; `.` components and doubled slashes are
    /// dropped, `..` is left for the kernel (it may cross a symbolic link).
    static func resolve(_ path: String, against base: String) -> String {
        normalize(path.hasPrefix("/") ? path : base + "/" + path)
    }

    private static func normalize(_ path: String) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        let joined = parts.joined(separator: "/")
        return path.hasPrefix("/") ? "/" + joined : (joined.isEmpty ? "." : joined)
    }

    static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "." }
        let length = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
