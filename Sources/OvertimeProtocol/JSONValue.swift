/// A JSON value as it arrived on the wire: what a task returns as its `result`.
///
/// Objects keep their members in order, so a result is reported as the task wrote it.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// The member named `key`, when this is an object that has one.
    public subscript(key: String) -> JSONValue? {
        guard case let .object(members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    /// This value as compact JSON text.
    public var jsonText: String {
        var writer = JSONWriter()
        writer.value(self)
        return writer.text
    }
}

extension JSONValue {
    /// Parses one JSON document (a job file, a control request), with the same strict
    /// reader the protocol uses, but no line-length limit.
    /// - Throws: `JSONDocumentError` saying what is wrong, and where.
    public static func parse(_ bytes: [UInt8]) throws(JSONDocumentError) -> JSONValue {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(JSONDocumentError) -> JSONValue in
                var reader = JSONReader(buffer)
                do throws(ProtocolError) {
                    let value = try reader.readValue()
                    reader.skipWhitespace()
                    guard reader.atEnd else { throw ProtocolError(.notJSON, "text after the document") }
                    return value
                } catch {
                    throw JSONDocumentError(error, offset: reader.index)
                }
            }
        }.get()
    }
}
