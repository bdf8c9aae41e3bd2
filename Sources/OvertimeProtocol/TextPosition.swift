/// Where a byte of a text file sits, as an editor shows it: the job file's readers (JSON
/// and YAML) name their problems by it.
public struct TextPosition: Sendable, Equatable, CustomStringConvertible {
    /// Both from 1; a column counts characters, not bytes.
    public var line: Int
    public var column: Int

    /// The position of byte `offset` of `bytes` (its end, past the last byte).
    public init<Bytes: Collection>(of offset: Int, in bytes: Bytes) where Bytes.Element == UInt8 {
        var line = 1
        var column = 1
        for b in bytes.prefix(offset) {
            if b == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
        }
        self.line = line
        self.column = column
    }

    /// "line L, column C".
    public var description: String {
        "line \(line), column \(column)"
    }
}
