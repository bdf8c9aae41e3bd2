import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension JobFile {
    /// Reads, parses and validates the job file at `path`, and finds every task's command
    /// on its `PATH` (see `CommandLookup`). A relative `cwd` is resolved
    /// against the file's directory, or against the current directory when the file is a
    /// pipe or a device (`overtime batch <(generate-jobs)` reads `/dev/fd/63`).
    /// - Throws: `JobFileError`, also when the file is missing or cannot be read.
    public static func load(path: String) throws(JobFileError) -> JobFile {
        try loadWithText(path: path).job
    }

    /// Like `load(path:)`, and also returns the job as JSON text and the directory relative
    /// `cwd`s were resolved against: a pipe can be read only once, and a batch keeps both
    /// for `--resume` (as `job.json`). The text is the bytes read for a JSON file, and the
    /// same job written as JSON for a YAML one.
    /// - Parameter directory: where to resolve relative `cwd`s; nil for the file's own
    ///   directory (the current one for a pipe).
    public static func loadWithText(path: String, directory: String? = nil) throws(JobFileError) -> (job: JobFile, text: [UInt8], directory: String) {
        switch JobFilePath.read(path) {
        case let .success(file):
            let directory = directory ?? (file.isRegular ? JobFilePath.absoluteDirectory(of: path) : JobFilePath.currentDirectory())
            let host = JobFileHost.system(commandEnvironment: ProcessEnvironment.current())
            let text = JobFileFormat(path: path, bytes: file.bytes) == .yaml ? try json(fromYAML: file.bytes, origin: path) : file.bytes
            return (try parse(text, origin: path, directory: directory, host: host), text, directory)
        case let .failure(problem):
            throw JobFileError(origin: path, problems: [problem.message])
        }
    }
}

/// Reading the file and placing relative paths: the only parts of the job file that touch
/// the system.
extension JobFilePath {
    /// Why a job file could not be read.
    enum ReadProblem: Error, Equatable {
        /// An empty path.
        case noPath
        case cannotOpen(SystemError)
        case directory
        case cannotRead(SystemError)
        /// Larger than the limit, or than this machine's memory can parse: by how much, in
        /// the core's words (`JobFile.sizeProblem`).
        case tooLarge(String)

        var message: String {
            switch self {
            case .noPath: "no job file path given"
            case let .cannotOpen(error): "cannot open the job file: \(JobFilePath.explain(error.errno))"
            case .directory: "cannot read the job file: it is a directory; expected a JSON or YAML file"
            case let .cannotRead(error): "cannot read the job file: \(JobFilePath.explain(error.errno))"
            case let .tooLarge(problem): problem
            }
        }
    }

    /// A file's content, and whether it is a regular file (not a pipe or a device).
    static func read(_ path: String) -> Result<(bytes: [UInt8], isRegular: Bool), ReadProblem> {
        if path.isEmpty {
            return .failure(.noPath)
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            return .failure(.cannotOpen(SystemError("open", errno: errno)))
        }
        defer { close(fd) }
        var info = stat()
        var isRegular = true
        if fstat(fd, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFDIR {
                return .failure(.directory)
            }
            isRegular = info.st_mode & S_IFMT == S_IFREG
        }
        // Refused before it is read when its size is known, as it is read when it is not:
        // what the machine cannot hold once read would otherwise be found by the OOM killer.
        let availableMemory = MemoryHeadroom.current()
        let largest = JobFile.largestReadableFile(availableMemory: availableMemory)
        if isRegular, let problem = JobFile.sizeProblem(Int(info.st_size), availableMemory: availableMemory) {
            return .failure(.tooLarge(problem))
        }
        var bytes: [UInt8] = []
        if isRegular { bytes.reserveCapacity(Int(info.st_size)) }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n: Int
            do throws(SystemError) {
                n = try Syscall.retrying("read") { chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) } }
            } catch {
                return .failure(.cannotRead(error))
            }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > largest, let problem = JobFile.sizeProblem(bytes.count, whole: false, availableMemory: availableMemory) {
                return .failure(.tooLarge(problem))
            }
        }
        return .success((bytes, isRegular))
    }

    private static func explain(_ code: Int32) -> String {
        switch code {
        case ENOENT: "there is no such file (check the path)"
        case EACCES: "permission denied"
        case EISDIR: "it is a directory; expected a JSON or YAML file"
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

    static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "." }
        let length = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Finds a task's command as its spawn will: a name with a slash is a path from the task's
/// working directory; a bare name is looked up on the task's own `PATH` (its `env`, else
/// the inherited one, else `/usr/local/bin:/usr/bin:/bin`), relative entries from the
/// working directory too. The only part of the check that reads the filesystem.
enum CommandLookup {
    static let madeByHint = " (if an earlier task makes it, name that task in \"command-made-by\")"

    /// What is wrong with `program` for `task`, or nil when it is there to run (or cannot be
    /// judged now: a relative path from a working directory an earlier task may create).
    static func problem(_ program: String, task: JobTask, inherited: [String: String]) -> String? {
        let cwd = task.workingDirectory ?? JobFilePath.currentDirectory()
        let cwdExists = Descriptors.isDirectory(cwd)
        if program.contains("/") {
            let path = JobFilePath.resolve(program, against: cwd)
            guard program.hasPrefix("/") || cwdExists else { return nil }
            if isExecutableFile(path) { return nil }
            let made = Self.madeByHint
            return exists(path) ? "\(JobFileText.quote(program)) is not an executable file\(made)"
                                : "\(JobFileText.quote(program)) does not exist (from \(cwd))\(made)"
        }
        let searchPath = task.environment["PATH"] ?? (task.inheritEnvironment ? inherited["PATH"] : nil) ?? SpawnRequest.defaultSearchPath
        var searched: [String] = []
        var judged = true
        for entry in searchPath.split(separator: ":", omittingEmptySubsequences: false) {
            let directory = entry.isEmpty ? "." : String(entry)
            if !directory.hasPrefix("/"), !cwdExists { judged = false; continue }
            let base = JobFilePath.resolve(directory, against: cwd)
            if isExecutableFile(base + "/" + program) { return nil }
            searched.append(base)
        }
        guard judged else { return nil }
        // Only now, for a command that is missing, the directories are read for a "did you
        // mean" (a bounded look: PATH directories can hold thousands of programs).
        let names = searched.flatMap { Descriptors.directoryEntries($0, limit: 5000) ?? [] }
        let meant = Spelling.closest(to: program, among: names).map { "; did you mean \(JobFileText.quote($0))?" } ?? ""
        return "\(JobFileText.quote(program)) is not found on the task's PATH (\(searchPath))\(meant)\(madeByHint)"
    }

    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    private static func isExecutableFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o111 != 0
    }
}

extension JobFileHost {
    /// This machine: its account databases, and, given the environment tasks inherit,
    /// every command looked up on its task's `PATH` (`CommandLookup`).
    public static func system(commandEnvironment: [String: String]? = nil) -> JobFileHost {
        guard let environment = commandEnvironment else { return JobFileHost(accounts: .system) }
        return JobFileHost(accounts: .system) { program, task in
            CommandLookup.problem(program, task: task, inherited: environment)
        }
    }
}

extension JobFile {
    /// Parses and validates a job file's text, read on this machine.
    /// - Parameters:
    ///   - bytes: the file's content (UTF-8 JSON or YAML, told apart as
    ///     `JobFileFormat(path:bytes:)` does; a leading byte-order mark is skipped).
    ///   - origin: the file's path, named in every message; a relative `cwd` is resolved
    ///     against its directory.
    /// - Throws: `JobFileError` listing every problem found.
    public static func parse(_ bytes: [UInt8], origin: String) throws(JobFileError) -> JobFile {
        try parse(bytes, origin: origin, directory: JobFilePath.absoluteDirectory(of: origin))
    }

    /// Parses and validates a job file's text, resolving a relative `cwd` against
    /// `directory` rather than the directory of `origin`.
    /// - Parameter commandEnvironment: the environment tasks inherit; when given, every
    ///   command is looked up on its task's `PATH` now (`command-made-by` aside), and one
    ///   that is not there is a problem of the file.
    /// - Throws: `JobFileError` listing every problem found.
    public static func parse(_ bytes: [UInt8], origin: String, directory: String,
                             commandEnvironment: [String: String]? = nil) throws(JobFileError) -> JobFile {
        try parse(bytes, format: JobFileFormat(path: origin, bytes: bytes), origin: origin, directory: directory,
                  host: .system(commandEnvironment: commandEnvironment))
    }
}
