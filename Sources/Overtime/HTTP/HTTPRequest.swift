/// An HTTP/1.x request as the supervisor's servers read it (`/metrics`, the live page): a
/// head of at most `maxHeadBytes`, then a body of the length the head gives, bounded by the
/// server. Pure: the loop's side carries the bytes.
struct HTTPRequest: Equatable, Sendable {
    /// The longest request head taken; a longer one is answered 431.
    static let maxHeadBytes = 8 * 1024

    var method: String
    /// The target's path, as sent (percent-encoded).
    var path: String
    /// The target's query, decoded; the first of a repeated name wins.
    var query: [String: String]
    /// Header fields by lower-case name; a repeated field's values are joined by ", "
    /// (RFC 9110 §5.3), but for `Host`, which may come once only.
    var fields: [String: String]
    var body: [UInt8]

    /// What the bytes received so far hold.
    enum Read: Equatable, Sendable {
        /// No blank line yet, or not the whole body: read on.
        case incomplete
        case complete(HTTPRequest)
        /// Past `maxHeadBytes` without its end.
        case tooLarge
        /// A body longer than the server takes.
        case bodyTooLarge(limit: Int)
        /// Not an HTTP/1.x request, or a head that cannot be read (a repeated Host, a field
        /// without a colon, a chunked body), with what was wrong.
        case malformed(String)
    }

    /// Reads the request at the start of `received` (its head ended by an empty line; bare
    /// newlines are taken too, as most servers take them).
    /// - Parameter maxBody: the longest body taken; nil: the body is not read (the request
    ///   is complete at its head's end, with no body).
    static func read(_ received: [UInt8], maxBody: Int?) -> Read {
        var reader = Reader(maxBody: maxBody)
        return reader.take(received[...])
    }

    /// The most bytes `read` may need to see: the head and a body of `maxBody`.
    static func maxBytes(maxBody: Int?) -> Int { maxHeadBytes + (maxBody ?? 0) }

    /// A request read as its bytes arrive: the head's end looked for in the new bytes
    /// only, the head parsed once, then only the body's bytes counted. A client that sends
    /// a byte at a time costs the loop a byte's work each time, not the whole head's.
    struct Reader {
        let maxBody: Int?
        private var received: [UInt8] = []
        /// How far the search for the head's end has gone, and where its line began.
        private var scanned = 0
        private var lineStart = 0
        /// The head once read, where it ends and the body's length.
        private var head: (request: HTTPRequest, end: Int, bodyLength: Int)?

        init(maxBody: Int?) {
            self.maxBody = maxBody
        }

        /// Takes the next bytes (a caller bounds them to `maxBytes`, plus one to see more).
        mutating func take(_ bytes: ArraySlice<UInt8>) -> Read {
            received.append(contentsOf: bytes)
            if head == nil {
                guard let end = headEnd() else { return received.count > maxHeadBytes ? .tooLarge : .incomplete }
                guard end <= maxHeadBytes else { return .tooLarge }
                switch HTTPRequest.head(received[..<end], maxBody: maxBody) {
                case let .success(read): head = (read.request, end, read.bodyLength)
                case let .failure(refusal): return refusal.read
                }
            }
            guard let (request, end, length) = head else { return .incomplete }
            guard received.count - end >= length else { return .incomplete }
            var whole = request
            whole.body = Array(received[end..<(end + length)])
            return .complete(whole)
        }

        /// Where the head's empty line ends, if it has arrived, looking at the bytes not
        /// looked at before.
        private mutating func headEnd() -> Int? {
            while scanned < received.count {
                let index = scanned
                scanned += 1
                guard received[index] == UInt8(ascii: "\n") else { continue }
                let line = index - lineStart
                // An empty line first is no request line: the head's reader finds it malformed.
                if line == 0 || (line == 1 && received[lineStart] == UInt8(ascii: "\r")) { return index + 1 }
                lineStart = index + 1
            }
            return nil
        }
    }

    /// A head that cannot be taken, as what `read` says of it.
    private struct Refusal: Error {
        var read: Read
    }

    /// The request line and fields of `bytes` (a whole head, its empty line included), and
    /// the length of the body it announces (0 when `maxBody` is nil: no body is read).
    private static func head(_ bytes: ArraySlice<UInt8>, maxBody: Int?) -> Result<(request: HTTPRequest, bodyLength: Int), Refusal> {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let requestLine = lines.first else { return .failure(Refusal(read: .malformed("not an HTTP/1.x request"))) }
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[1].first == UInt8(ascii: "/") || parts[1].elementsEqual("*".utf8),
              parts[2].starts(with: "HTTP/1.".utf8) else { return .failure(Refusal(read: .malformed("not an HTTP/1.x request"))) }
        let target = parts[1]
        let question = target.firstIndex(of: UInt8(ascii: "?"))
        var request = HTTPRequest(method: String(decoding: parts[0], as: UTF8.self),
                                  path: String(decoding: question.map { target[..<$0] } ?? target, as: UTF8.self),
                                  query: question.map { queryItems(target[target.index(after: $0)...]) } ?? [:],
                                  fields: [:], body: [])
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
                return .failure(Refusal(read: .malformed("a header line without a name and a colon")))
            }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = String(decoding: line[line.index(after: colon)...], as: UTF8.self).trimmingSpaces
            if let earlier = request.fields[name] {
                // Two Hosts could each pass a different check: one only is taken.
                guard name != "host" else { return .failure(Refusal(read: .malformed("more than one Host field"))) }
                request.fields[name] = earlier + ", " + value
            } else {
                request.fields[name] = value
            }
        }
        guard let maxBody else { return .success((request, 0)) }
        guard request.fields["transfer-encoding"] == nil else {
            return .failure(Refusal(read: .malformed("a body must come with a Content-Length, not a Transfer-Encoding")))
        }
        var length = 0
        if let text = request.fields["content-length"] {
            guard let given = Int(text), given >= 0, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                return .failure(Refusal(read: .malformed("Content-Length must be a number of bytes")))
            }
            length = given
        }
        guard length <= maxBody else { return .failure(Refusal(read: .bodyTooLarge(limit: maxBody))) }
        return .success((request, length))
    }

    /// `a=1&b=x%20y` as names and values, `+` read as a space (as forms send it).
    private static func queryItems(_ query: ArraySlice<UInt8>) -> [String: String] {
        var items: [String: String] = [:]
        for pair in query.split(separator: UInt8(ascii: "&")) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            let plus = { (part: ArraySlice<UInt8>) in part.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 } }
            guard let name = percentDecoded(plus(parts[0])[...]) else { continue }
            let value = parts.count > 1 ? percentDecoded(plus(parts[1])[...]) : ""
            if items[name] == nil, let value { items[name] = value }
        }
        return items
    }

    /// `%2F` and the like decoded; nil for a broken escape or bytes that are not UTF-8.
    static func percentDecoded(_ text: ArraySlice<UInt8>) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count)
        var index = text.startIndex
        while index < text.endIndex {
            let byte = text[index]
            if byte == UInt8(ascii: "%") {
                guard text.distance(from: index, to: text.endIndex) >= 3,
                      let high = hexValue(text[index + 1]), let low = hexValue(text[index + 2]) else { return nil }
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(byte)
                index += 1
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

private extension String {
    /// Without the spaces and tabs around it (a header field's optional white space).
    var trimmingSpaces: String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else { return "" }
        return String(self[first...last])
    }
}
