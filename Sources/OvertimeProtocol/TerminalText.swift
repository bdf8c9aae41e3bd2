/// Text a task meant for a terminal, made fit for events, reports and other terminals:
/// colour codes and other escape sequences removed, with every other control character
/// (a tab, a line break or a carriage return becomes a space, so words stay apart).
public enum TerminalText {
    private static let escape: UInt8 = 0x1B
    private static let bell: UInt8 = 0x07

    /// `text` without ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL` or
    /// `… ESC \`, and two-byte `ESC x`) and without C0 control characters or DEL; a tab,
    /// newline or carriage return becomes a space.
    /// Text with none of those bytes (nearly all of it) is returned as it is, uncopied.
    public static func stripped(_ text: String) -> String {
        let clean = text.utf8.withContiguousStorageIfAvailable(isClean) ?? Array(text.utf8).withUnsafeBufferPointer(isClean)
        if clean { return text }
        return Array(text.utf8).withUnsafeBufferPointer { String(decoding: strip($0), as: UTF8.self) }
    }

    private static func isClean(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte < 0x20 || byte == 0x7F { return false }
            i += 1
        }
        return true
    }

    private static func strip(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            if byte == escape, i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "["):
                    i += 1
                    // Parameter and intermediate bytes, then one final byte.
                    while i < bytes.count, (0x20...0x3F).contains(bytes[i]) { i += 1 }
                    if i < bytes.count, (0x40...0x7E).contains(bytes[i]) { i += 1 }
                case UInt8(ascii: "]"):
                    i += 1
                    while i < bytes.count {
                        if bytes[i] == bell { i += 1; break }
                        if bytes[i] == escape, i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "\\") { i += 2; break }
                        i += 1
                    }
                case 0x20...0x7E:
                    i += 1
                default:
                    break
                }
                continue
            }
            if byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") {
                out.append(UInt8(ascii: " "))
                continue
            }
            if byte < 0x20 || byte == 0x7F { continue }
            out.append(byte)
        }
        return out
    }
}
