/// How large a job file may be: what the machine can hold once it is read, and an absolute
/// bound beside that.
extension JobFile {
    /// The largest job file read whatever the memory: it keeps `/dev/zero` or a runaway
    /// generator from filling memory. A million tasks of a few hundred bytes each must fit,
    /// so the bound is 1 GiB.
    public static let maximumFileSize = 1 << 30

    /// The most memory a batch takes, before its first task starts, for each byte of its
    /// job file: the text (kept for `--resume`), the tasks read from it, their checks and
    /// the queue's state; not a metrics page, whose series are per task. Measured on files
    /// of 100,000 and 1,000,000 small tasks (the worst case: the fewer bytes a task takes in
    /// the file, the more its model weighs per byte): 5.5 to 8.5, the smaller file's fixed
    /// costs counted.
    public static let memoryPerFileByte = 8

    /// The largest file that can be read with `availableMemory` bytes free (nil: unknown).
    public static func largestReadableFile(availableMemory: UInt64?) -> Int {
        guard let availableMemory else { return maximumFileSize }
        return Int(min(UInt64(maximumFileSize), availableMemory / UInt64(memoryPerFileByte)))
    }

    /// Why a file of `size` bytes is not read, when it is too large; nil when it may be.
    /// - Parameters:
    ///   - whole: false when `size` is what was read so far (from a pipe).
    ///   - availableMemory: the memory free now (nil: unknown).
    public static func sizeProblem(_ size: Int, whole: Bool = true, availableMemory: UInt64?) -> String? {
        if size > maximumFileSize {
            return "the job file is larger than \(maximumFileSize >> 20) MiB; is this the right file?"
        }
        guard size > largestReadableFile(availableMemory: availableMemory), let availableMemory else { return nil }
        let needed = UInt64(size) * UInt64(memoryPerFileByte)
        let over = whole ? "" : "over "
        return "the job file is \(over)\(ByteSize.text(UInt64(size))); reading it takes up to \(memoryPerFileByte) bytes of memory "
            + "for each of its bytes (\(over)\(ByteSize.text(needed))), more than the \(ByteSize.text(availableMemory)) available "
            + "here (MemAvailable, or what the memory cgroup still allows); split the job into smaller files, or free memory"
    }
}
