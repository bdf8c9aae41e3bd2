/// Cuts a byte stream into protocol lines.
///
/// Complete lines inside a chunk are handed out in place, without copying; only a partial
/// line at the end of a chunk is kept for the next one. A line longer than the limit is
/// reported once and skipped up to its newline, so one bad writer cannot make the
/// supervisor buffer without bound.
public struct LineFramer {
    public enum Item {
        /// A complete line, without its newline (valid only during the callback).
        case line(UnsafeRawBufferPointer)
        /// A line over the limit was dropped; here are its first bytes.
        case overlong(excerpt: [UInt8])
    }

    public let maxLineLength: Int
    private var pending: [UInt8] = []
    private var discarding = false

    public init(maxLineLength: Int = ProtocolLimits.maxLineLength) {
        self.maxLineLength = maxLineLength
    }

    /// True while part of a line is buffered.
    public var hasPartialLine: Bool { !pending.isEmpty || discarding }

    /// Feeds one chunk read from the stream; calls `body` for each line or overlong report.
    public mutating func feed(_ chunk: UnsafeRawBufferPointer, _ body: (Item) -> Void) {
        var start = 0
        let count = chunk.count
        guard let base = chunk.baseAddress else { return }
        while start < count {
            guard let found = memchrNewline(base + start, count - start) else {
                append(UnsafeRawBufferPointer(start: base + start, count: count - start), body)
                return
            }
            let end = found - base
            if discarding {
                discarding = false
            } else if pending.isEmpty {
                let line = UnsafeRawBufferPointer(start: base + start, count: end - start)
                if line.count > maxLineLength {
                    body(.overlong(excerpt: Array(line.prefix(Self.excerptLength))))
                } else {
                    body(.line(line))
                }
            } else {
                append(UnsafeRawBufferPointer(start: base + start, count: end - start), body)
                if discarding {
                    discarding = false
                } else {
                    pending.withUnsafeBytes { body(.line($0)) }
                }
                pending.removeAll(keepingCapacity: pending.capacity <= 4096)
            }
            start = end + 1
        }
    }

    /// At end of stream: a last line without a newline is still a line.
    public mutating func finish(_ body: (Item) -> Void) {
        if !discarding, !pending.isEmpty {
            pending.withUnsafeBytes { body(.line($0)) }
        }
        pending = []
        discarding = false
    }

    static let excerptLength = 80

    private mutating func append(_ bytes: UnsafeRawBufferPointer, _ body: (Item) -> Void) {
        if discarding { return }
        if pending.count + bytes.count > maxLineLength {
            var excerpt = pending.prefix(Self.excerptLength).map { $0 }
            excerpt.append(contentsOf: bytes.prefix(Self.excerptLength - excerpt.count))
            body(.overlong(excerpt: excerpt))
            pending.removeAll()
            discarding = true
            return
        }
        pending.append(contentsOf: bytes)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@inline(__always)
private func memchrNewline(_ p: UnsafeRawPointer, _ n: Int) -> UnsafeRawPointer? {
    UnsafeRawPointer(memchr(p, 0x0A, n))
}
