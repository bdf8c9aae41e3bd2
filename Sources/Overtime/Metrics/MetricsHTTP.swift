/// The little HTTP/1.1 that `/metrics` needs: a request head read whole (or refused), and
/// one response, after which the connection closes. Pure: the loop's side carries the bytes.
enum MetricsHTTP {
    /// The longest request head taken; a longer one is answered 431.
    static let maxHeadBytes = 8 * 1024

    /// What the bytes received so far hold.
    enum Head: Equatable, Sendable {
        /// No blank line yet: read on.
        case incomplete
        case complete(method: String, path: String)
        /// Past `maxHeadBytes` without its end.
        case tooLarge
        /// Not an HTTP/1.x request line.
        case malformed
    }

    /// Reads the head at the start of `received` (ended by an empty line; bare newlines are
    /// taken too, as most servers take them).
    static func head(_ received: [UInt8]) -> Head {
        guard let end = headEnd(received) else {
            return received.count > maxHeadBytes ? .tooLarge : .incomplete
        }
        guard end <= maxHeadBytes else { return .tooLarge }
        let lineEnd = received.firstIndex(of: UInt8(ascii: "\n"))!
        var line = received[..<lineEnd]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[1].first == UInt8(ascii: "/") || parts[1].elementsEqual("*".utf8),
              parts[2].starts(with: "HTTP/1.".utf8) else { return .malformed }
        let target = parts[1]
        let path = target.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? target
        return .complete(method: String(decoding: parts[0], as: UTF8.self), path: String(decoding: path, as: UTF8.self))
    }

    /// Where the head's empty line ends, if it has arrived.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        var index = 0
        var lineStart = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") {
                let line = index - lineStart
                // An empty line first is no request line: the caller finds it malformed.
                if line == 0 || (line == 1 && bytes[lineStart] == UInt8(ascii: "\r")) { return index + 1 }
                lineStart = index + 1
            }
            index += 1
        }
        return nil
    }

    /// The content type of the text exposition format.
    static let metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The answer to a request: `/metrics` (its page made only then, by `page`), a short page
    /// at `/` that links it, 404 elsewhere, 405 for anything but GET and HEAD.
    static func response(method: String, path: String, page: () -> [UInt8]) -> [UInt8] {
        guard method == "GET" || method == "HEAD" else {
            return response(405, "Method Not Allowed", body: Array("only GET and HEAD\n".utf8), extraHeaders: "Allow: GET, HEAD\r\n")
        }
        let withBody = method == "GET"
        switch path {
        case "/metrics":
            return response(200, "OK", contentType: metricsContentType, body: page(), withBody: withBody)
        case "/":
            let index = "<!DOCTYPE html>\n<html><head><title>Overtime</title></head><body><h1>Overtime</h1>"
                + "<p><a href=\"/metrics\">Metrics</a></p></body></html>\n"
            return response(200, "OK", contentType: "text/html; charset=utf-8", body: Array(index.utf8), withBody: withBody)
        default:
            return response(404, "Not Found", body: Array("not found; the metrics are at /metrics\n".utf8), withBody: withBody)
        }
    }

    /// 400, 408 or 431: a request that cannot be answered.
    static func refusal(_ head: Head) -> [UInt8] {
        switch head {
        case .tooLarge: response(431, "Request Header Fields Too Large", body: Array("the request head is over \(maxHeadBytes) bytes\n".utf8))
        case .malformed: response(400, "Bad Request", body: Array("not an HTTP/1.x request\n".utf8))
        case .incomplete, .complete: response(408, "Request Timeout", body: Array("the request did not arrive in time\n".utf8))
        }
    }

    static func response(_ status: Int, _ reason: String, contentType: String = "text/plain; charset=utf-8",
                         body: [UInt8], withBody: Bool = true, extraHeaders: String = "") -> [UInt8] {
        var bytes = Array("HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n\(extraHeaders)Connection: close\r\n\r\n".utf8)
        if withBody { bytes.append(contentsOf: body) }
        return bytes
    }
}
