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

    // Two fields, three words: every reader function on a progress line's way throws this
    // type, and a larger one would be returned through memory rather than in registers,
    // which cost that path several per cent. Where a whole document broke is
    // `JSONDocumentError`'s to say.
    public var kind: Kind
    /// A short phrase naming what was wrong, e.g. "`completed` must be an integer ≥ 0".
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.rawValue): \(message)" }
}

/// A whole JSON document (a job file, a control request) that did not parse: what was
/// wrong, and where, in bytes from its start.
public struct JSONDocumentError: Error, Sendable, Equatable, CustomStringConvertible {
    public var problem: ProtocolError
    public var offset: Int

    public init(_ problem: ProtocolError, offset: Int) {
        self.problem = problem
        self.offset = offset
    }

    /// The message with where it broke: "unexpected character at byte 12".
    public var located: String { "\(problem.message) at byte \(offset)" }

    public var description: String { "\(problem.kind.rawValue): \(located)" }
}
