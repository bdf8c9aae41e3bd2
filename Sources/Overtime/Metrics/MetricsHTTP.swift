/// The little HTTP/1.1 that `/metrics` needs: a request head read whole (or refused), and
/// one response, after which the connection closes. Pure: the loop's side carries the bytes.
enum MetricsHTTP {
    /// The longest request head taken; a longer one is answered 431.
    static let maxHeadBytes = HTTPRequest.maxHeadBytes

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

    /// Reads the head at the start of `received` (`HTTPRequest.read`; a body is not read).
    static func head(_ received: [UInt8]) -> Head {
        head(HTTPRequest.read(received, maxBody: nil))
    }

    static func head(_ read: HTTPRequest.Read) -> Head {
        switch read {
        case .incomplete: .incomplete
        case let .complete(request): .complete(method: request.method, path: request.path)
        case .tooLarge: .tooLarge
        case .bodyTooLarge, .malformed: .malformed
        }
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
