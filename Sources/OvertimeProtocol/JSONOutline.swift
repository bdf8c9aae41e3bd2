/// A JSON document read whole but kept without its biggest part: the arrays held by one
/// member of the top-level object (a job file's `tasks`) are left out of the tree and read
/// back one element at a time. A file of a million tasks then never becomes a million-task
/// tree beside the model made of it.
///
/// The document is checked whole first, with the same reader and the same errors (and
/// byte offsets) as `JSONValue.parse`, so a syntax error late in the file is found before
/// any element is handed out.
public struct JSONOutline: Sendable {
    /// The document; each left-out array stands in it as an empty array.
    public let root: JSONValue
    /// Where each left-out array starts (its `[`) and how many elements it holds, by the
    /// position of its member in the top-level object.
    private let leftOut: [Int: (offset: Int, count: Int)]

    /// Reads `bytes`, leaving out the arrays held by top-level members named `key`.
    /// - Throws: `JSONDocumentError` as `JSONValue.parse` does (its `offset` from the start
    ///   of `bytes`).
    public static func parse(_ bytes: ArraySlice<UInt8>, leavingOut key: String) throws(JSONDocumentError) -> JSONOutline {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(JSONDocumentError) -> JSONOutline in
                var reader = JSONReader(buffer)
                do throws(ProtocolError) {
                    let outline = try read(&reader, leavingOut: key)
                    reader.skipWhitespace()
                    guard reader.atEnd else { throw ProtocolError(.notJSON, "text after the document") }
                    return outline
                } catch {
                    throw JSONDocumentError(error, offset: reader.index)
                }
            }
        }.get()
    }

    private static func read(_ reader: inout JSONReader, leavingOut key: String) throws(ProtocolError) -> JSONOutline {
        // Anything but an object is small or wrong: read as a tree, as `parse` would.
        guard try reader.peekKind() == .object else { return JSONOutline(root: try reader.readValue(), leftOut: [:]) }
        try reader.beginObject()
        var members: [(key: String, value: JSONValue)] = []
        var leftOut: [Int: (offset: Int, count: Int)] = [:]
        var first = true
        while let token = try reader.nextKey(first: &first) {
            let name = reader.string(token)
            if name == key, try reader.peekKind() == .array {
                let offset = reader.index
                leftOut[members.count] = (offset, try reader.skipArray(depth: 1))
                members.append((name, .array([])))
            } else {
                members.append((name, try reader.readValue(depth: 1)))
            }
        }
        return JSONOutline(root: .object(members), leftOut: leftOut)
    }

    /// How many elements the left-out array of member `member` holds; nil when that member
    /// was not left out.
    public func elementCount(ofMember member: Int) -> Int? {
        leftOut[member]?.count
    }

    /// Calls `body` with each element of the left-out array of member `member`, in order.
    /// - Parameter bytes: the bytes given to `parse`; they were checked there, so reading
    ///   them again cannot fail.
    public func forEachElement(ofMember member: Int, in bytes: ArraySlice<UInt8>, _ body: (JSONValue) -> Void) {
        guard let offset = leftOut[member]?.offset else { return }
        bytes.withUnsafeBytes { buffer in
            var reader = JSONReader(buffer, at: offset)
            // The array sits at depth 1, inside the top-level object.
            try? reader.forEachElement(depth: 1, body)
        }
    }
}

extension JSONReader {
    /// Checks and steps over the array that starts here, counting its elements.
    /// - Parameter depth: the containers around the array.
    mutating func skipArray(depth: Int) throws(ProtocolError) -> Int {
        var count = 0
        try forEachElementSkipping(depth: depth) { count += 1 }
        return count
    }

    /// Reads the array that starts here, handing each element to `body` as a tree of its own.
    /// - Parameter depth: the containers around the array.
    mutating func forEachElement(depth: Int, _ body: (JSONValue) -> Void) throws(ProtocolError) {
        if depth >= Self.maxDepth { throw ProtocolError(.notJSON, "nested too deeply") }
        try expect(UInt8(ascii: "["), "'['")
        if consume(UInt8(ascii: "]")) { return }
        repeat { body(try readValue(depth: depth + 1)) } while consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"), "',' or ']'")
    }

    private mutating func forEachElementSkipping(depth: Int, _ counted: () -> Void) throws(ProtocolError) {
        if depth >= Self.maxDepth { throw ProtocolError(.notJSON, "nested too deeply") }
        try expect(UInt8(ascii: "["), "'['")
        if consume(UInt8(ascii: "]")) { return }
        repeat {
            try skipValue(depth: depth + 1)
            counted()
        } while consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"), "',' or ']'")
    }
}
