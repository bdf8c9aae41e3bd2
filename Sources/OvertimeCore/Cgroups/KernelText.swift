/// Reading the kernel's text files in place, as bytes: mountinfo, /proc/self/cgroup, a
/// cgroup's numbers and flat-keyed files, a process's `stat` and `statm`. Every `overtime
/// run` reads several, and a cgroup's are read at every task's end and by the memory
/// watchdog several times a second, where making Strings of them would cost far more than
/// the reading.
public enum KernelText {
    /// The number a file holding one number says (`memory.peak`, `memory.usage_in_bytes`):
    /// its newline ends it; nil for no file, an empty one, a v2 limit's "max", or a number
    /// past UInt64.
    public static func number(_ bytes: [UInt8]?) -> UInt64? {
        bytes.flatMap { decimal($0) }
    }

    // Inlinable: read across modules (the watchdog samples every task 4 times a second), an
    // unspecialized generic would look its collection type up at run time on each call.
    /// The number a kernel file's digits spell, up to the end or a newline: nil when there
    /// are none, when anything else comes first (a v2 limit's "max"), or past UInt64.
    @inlinable
    public static func decimal<Digits: Collection<UInt8>>(_ digits: Digits) -> UInt64? {
        var value: UInt64 = 0
        var any = false
        for byte in digits {
            if byte == UInt8(ascii: "\n") { break }
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (shifted, overflowed) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowedToo) = shifted.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            if overflowed || overflowedToo { return nil }
            value = sum
            any = true
        }
        return any ? value : nil
    }

    /// The value of `key` in a flat-keyed file ("key value" lines: `cpu.stat`,
    /// `memory.stat`, `memory.events`, `memory.oom_control`); nil when the key is missing or
    /// its value is not a number.
    public static func value(_ key: String, in bytes: [UInt8]?) -> UInt64? {
        guard let bytes else { return nil }
        let name = Array(key.utf8)
        return bytes.withUnsafeBufferPointer { text -> UInt64? in
            for line in Pieces(text, by: "\n") {
                var parts = Pieces(text, line, by: " ")
                guard let first = parts.next(), text[first].elementsEqual(name), parts.cursor < line.upperBound else { continue }
                return decimal(text[parts.cursor..<line.upperBound])
            }
            return nil
        }
    }

    /// The user and system microseconds of a v2 `cpu.stat`.
    public static func cpuMicroseconds(cpuStat: [UInt8]?) -> (user: UInt64, system: UInt64)? {
        guard let user = value("user_usec", in: cpuStat), let system = value("system_usec", in: cpuStat) else { return nil }
        return (user, system)
    }

    /// The process ids a `cgroup.procs` lists, one a line.
    public static func processIDs(_ bytes: [UInt8]) -> [Int32] {
        bytes.split(separator: UInt8(ascii: "\n")).compactMap { Int32(String(decoding: $0, as: UTF8.self)) }
    }

    /// The words of a space-separated list (`cgroup.controllers`, `cgroup.subtree_control`).
    public static func words(_ bytes: [UInt8]?) -> [String] {
        guard let bytes else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
    }

    /// The resident pages of `/proc/PID/statm` ("SIZE RESIDENT SHARED …").
    public static func residentPages(statm bytes: [UInt8]) -> UInt64? {
        let fields = bytes.split(separator: UInt8(ascii: " "))
        guard fields.count > 1 else { return nil }
        return UInt64(String(decoding: fields[1], as: UTF8.self))
    }

    /// The session id and the resident pages of `/proc/PID/stat` ("PID (COMM) STATE PPID
    /// PGRP SESSION … RSS …"). The command name may hold spaces and parentheses: the fields
    /// are counted from its last ")".
    public static func sessionAndResidentPages(stat bytes: [UInt8]) -> (session: Int32, pages: UInt64)? {
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After "PID (COMM)": state ppid pgrp session … rss is the 22nd field after it.
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 21, let session = Int32(String(decoding: fields[3], as: UTF8.self)),
              let pages = UInt64(String(decoding: fields[21], as: UTF8.self)) else { return nil }
        return (session, pages)
    }

    /// The pieces of `range` of the text between one `separator` and the next (lines, a
    /// line's fields, a list's items), as ranges of its indices without the separators. One
    /// separator at the very end makes no empty last piece.
    struct Pieces: Sequence, IteratorProtocol {
        let text: UnsafeBufferPointer<UInt8>
        let separator: UInt8
        /// Where the next piece starts: past the last piece taken and its separator.
        private(set) var cursor: Int
        let end: Int

        init(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>? = nil, by separator: Unicode.Scalar) {
            self.text = text
            self.separator = UInt8(ascii: separator)
            cursor = range?.lowerBound ?? 0
            end = range?.upperBound ?? text.count
        }

        mutating func next() -> Range<Int>? {
            guard cursor < end else { return nil }
            let start = cursor
            while cursor < end, text[cursor] != separator { cursor += 1 }
            defer { cursor += 1 }
            return start..<cursor
        }
    }

    static func equal(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ literal: StaticString) -> Bool {
        guard range.count == literal.utf8CodeUnitCount else { return false }
        let bytes = literal.utf8Start
        for i in 0..<range.count where text[range.lowerBound + i] != bytes[i] { return false }
        return true
    }

    /// Whether the comma-separated list in `range` has `word` as one of its items.
    static func list(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, contains word: StaticString) -> Bool {
        Pieces(text, range, by: ",").contains { equal(text, $0, word) }
    }
}
