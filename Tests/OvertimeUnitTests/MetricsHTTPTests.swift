import Testing
@testable import Overtime

/// The little HTTP the metrics server speaks (docs/metrics.md), without a socket: request
/// heads read whole or refused, and the responses.
@Suite struct MetricsHTTPTests {
    @Test func requestHeads() {
        func head(_ text: String) -> MetricsHTTP.Head { MetricsHTTP.head(Array(text.utf8)) }
        #expect(head("GET /metrics HTTP/1.1\r\nHost: x\r\n") == .incomplete)
        #expect(head("GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n") == .complete(method: "GET", path: "/metrics"))
        #expect(head("HEAD / HTTP/1.0\n\n") == .complete(method: "HEAD", path: "/"))
        #expect(head("\r\n") == .malformed)
        #expect(head("hello\r\n\r\n") == .malformed)
        #expect(head("GET metrics HTTP/1.1\r\n\r\n") == .malformed)
        #expect(head("GET /metrics SPDY/3\r\n\r\n") == .malformed)
        let big = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: MetricsHTTP.maxHeadBytes) + "\r\n"
        #expect(head(big) == .tooLarge)
        #expect(head(big + "\r\n") == .tooLarge)
    }

    @Test func responses() {
        func status(_ method: String, _ path: String) -> (String, String) {
            let text = String(decoding: MetricsHTTP.response(method: method, path: path) { Array("page\n".utf8) }, as: UTF8.self)
            let parts = text.components(separatedBy: "\r\n\r\n")
            return (parts[0].components(separatedBy: "\r\n")[0], parts.count > 1 ? parts[1] : "")
        }
        #expect(status("GET", "/metrics") == ("HTTP/1.1 200 OK", "page\n"))
        #expect(status("HEAD", "/metrics") == ("HTTP/1.1 200 OK", ""))
        #expect(status("GET", "/").0 == "HTTP/1.1 200 OK" && status("GET", "/").1.contains("href=\"/metrics\""))
        #expect(status("GET", "/nope").0 == "HTTP/1.1 404 Not Found")
        #expect(status("POST", "/metrics").0 == "HTTP/1.1 405 Method Not Allowed")
        let metrics = String(decoding: MetricsHTTP.response(method: "GET", path: "/metrics") { [] }, as: UTF8.self)
        #expect(metrics.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") && metrics.contains("Connection: close\r\n"))
        #expect(String(decoding: MetricsHTTP.refusal(.tooLarge), as: UTF8.self).hasPrefix("HTTP/1.1 431 "))
    }
}
