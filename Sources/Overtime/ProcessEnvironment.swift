#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The supervisor's own environment.
public enum ProcessEnvironment {
    /// As a dictionary: what a task without `clean-env` inherits, and what the CLI's
    /// display reads its terminal's settings from. Each entry is split at its first "=" in
    /// the C string's bytes: a String's Character search costs far more, on every start.
    public static func current() -> [String: String] {
        // Sized once: grown an entry at a time, the dictionary rehashed itself six times on
        // the way to a shell's forty variables.
        var count = 0
        while environ[count] != nil { count += 1 }
        var result: [String: String] = [:]
        result.reserveCapacity(count)
        var cursor = environ
        while let entry = cursor.pointee {
            if let equals = strchr(entry, Int32(UInt8(ascii: "="))) {
                let name = UnsafeRawBufferPointer(start: entry, count: entry.distance(to: equals))
                result[String(decoding: name, as: UTF8.self)] = String(cString: equals + 1)
            }
            cursor += 1
        }
        return result
    }

    /// Only the variables `names`, those set: for a reader of a handful of them (the CLI's
    /// display), which need not copy the whole environment into a dictionary first.
    public static func values(of names: [String]) -> [String: String] {
        var result: [String: String] = [:]
        for name in names {
            if let value = getenv(name) { result[name] = String(cString: value) }
        }
        return result
    }

    /// The running program's own file, every symbolic link on the way resolved
    /// (`/proc/self/exe`); nil when it cannot be read.
    public static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return buffer.withUnsafeBytes { String(decoding: $0.prefix(n), as: UTF8.self) }
    }
}
