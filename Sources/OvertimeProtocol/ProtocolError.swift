/// Why a line on the channel was refused. The line is dropped; the task carries on.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Not a JSON object, or broken JSON.
        case notJSON = "not-json"
        /// Longer than the protocol's line limit (64 KiB).
        case tooLong = "too-long"
        /// Bytes that are not UTF-8 (or a `\u` escape that is not a scalar).
        case invalidUTF8 = "invalid-utf8"
        /// No `type` field.
        case missingType = "missing-type"
        /// A `type` this version does not know.
        case unknownType = "unknown-type"
        /// A known field with a value of the wrong type, or a required field missing.
        case wrongType = "wrong-type"
        /// A number outside what the field allows.
        case outOfRange = "out-of-range"
        /// An sd_notify datagram that is not `KEY=VALUE` lines.
        case badNotification = "bad-notification"
    }

    public var kind: Kind
    /// A short phrase naming what was wrong, e.g. "`completed` must be an integer ≥ 0".
    public var message: String
    /// Where a whole document broke, in bytes from its start (`JSONValue.parse`); nil for a
    /// line of the channel, which is refused whole.
    public var offset: Int?

    public init(_ kind: Kind, _ message: String, offset: Int? = nil) {
        self.kind = kind
        self.message = message
        self.offset = offset
    }

    /// The message with where it broke, if known: "unexpected character at byte 12".
    public var located: String { offset.map { "\(message) at byte \($0)" } ?? message }

    public var description: String { "\(kind.rawValue): \(located)" }
}
