import Testing
@testable import Overtime
import OvertimeCore

/// The live page's HTTP without a socket (docs/control.md "HTTP API"): requests read with
/// their fields and bodies, who is let in, and what each path asks for.
@Suite struct LivePageHTTPTests {
    private func read(_ text: String, maxBody: Int? = 4096) -> HTTPRequest.Read {
        HTTPRequest.read(Array(text.utf8), maxBody: maxBody)
    }

    private func request(_ text: String) throws -> HTTPRequest {
        guard case let .complete(request) = read(text) else { throw Unread() }
        return request
    }

    private struct Unread: Error {}

    @Test func requestsWithFieldsAndBodies() throws {
        let post = try request("POST /api/tasks/a%5B1%5D/extend?x=1&y=a+b HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: 5\r\nX-A: 1\r\nx-a: 2\r\n\r\nhello")
        #expect(post.method == "POST" && post.path == "/api/tasks/a%5B1%5D/extend" && post.body == Array("hello".utf8))
        #expect(post.query == ["x": "1", "y": "a b"] && post.fields["x-a"] == "1, 2" && post.fields["host"] == "127.0.0.1:9")
        #expect(read("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel") == .incomplete)
        #expect(read("POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n") == .bodyTooLarge(limit: 4096))
        #expect(read("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == .malformed("more than one Host field"))
        #expect(read("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == .malformed("a body must come with a Content-Length, not a Transfer-Encoding"))
        #expect(read("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") == .malformed("Content-Length must be a number of bytes"))
        #expect(read("GET / HTTP/1.1\r\nno colon\r\n\r\n") == .malformed("a header line without a name and a colon"))
        // Metrics read no body: complete at the head's end.
        if case let .complete(head) = read("POST /metrics HTTP/1.1\r\nContent-Length: 9\r\n\r\n", maxBody: nil) {
            #expect(head.body.isEmpty)
        } else {
            Issue.record("a head with a body length was not complete without its body")
        }
        #expect(HTTPRequest.percentDecoded(Array("a%2".utf8)[...]) == nil && HTTPRequest.percentDecoded(Array("%FF".utf8)[...]) == nil)
    }

    @Test("a request read a byte at a time reads as it does whole, complete at its last byte")
    func readAByteAtATime() {
        let fields = (0..<300).map { "X-\($0): \($0)\r\n" }.joined()
        for text in ["POST /api/tasks/a/extend HTTP/1.1\r\nHost: h\r\n\(fields)Content-Length: 13\r\n\r\n{\"seconds\":1}",
                     "GET /metrics HTTP/1.1\nHost: h\n\n", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"] {
            let bytes = Array(text.utf8)
            var reader = HTTPRequest.Reader(maxBody: 4096)
            var reads: [HTTPRequest.Read] = []
            for index in bytes.indices { reads.append(reader.take(bytes[index...index])) }
            #expect(reads.dropLast().allSatisfy { $0 == .incomplete }, "\(text.prefix(40))")
            #expect(reads.last == HTTPRequest.read(bytes, maxBody: 4096), "\(text.prefix(40))")
        }
        var reader = HTTPRequest.Reader(maxBody: nil)
        #expect(reader.take(Array(repeating: UInt8(ascii: "a"), count: HTTPRequest.maxHeadBytes)[...]) == .incomplete)
        #expect(reader.take(Array("b".utf8)[...]) == .tooLarge)
    }

    @Test func whoIsLetIn() throws {
        let token = String(repeating: "ab", count: 32)
        let access = LivePageAccess(token: token, address: MetricsAddress(host: "127.0.0.1", port: 8080))
        func verdict(_ lines: String, _ method: String = "GET", _ target: String = "/api/status") throws -> LivePageAccess.Verdict {
            access.verdict(try request("\(method) \(target) HTTP/1.1\r\n\(lines)\r\n"))
        }
        #expect(try verdict("Host: 127.0.0.1:8080\r\nAuthorization: Bearer \(token)\r\n") == .allowed)
        #expect(try verdict("Host: LOCALHOST:8080\r\nCookie: a=b; overtime_ui_8080=\(token)\r\n") == .allowed)
        #expect(try verdict("Host: 127.0.0.1:8080\r\nCookie: overtime_ui_9090=\(token)\r\n") == .refused(.unauthorized), "another port's cookie")
        #expect(try verdict("Host: 127.0.0.1:8080\r\n") == .refused(.unauthorized))
        #expect(try verdict("Host: 127.0.0.1:8080\r\nAuthorization: Basic \(token)\r\n") == .refused(.unauthorized))
        #expect(try verdict("Host: 127.0.0.1:8080\r\nAuthorization: Bearer \(token.dropLast())0\r\n") == .refused(.unauthorized))
        #expect(try verdict("Host: 127.0.0.1:8080\r\n", "GET", "/?token=\(token)") == .exchangeToken)
        #expect(try verdict("Host: 127.0.0.1:8080\r\n", "GET", "/api/status?token=\(token)") == .refused(.unauthorized))
        guard case let .refused(host) = try verdict("Host: attacker.example:8080\r\nAuthorization: Bearer \(token)\r\n") else { throw Unread() }
        #expect(host.status == 403)
        #expect(try verdict("Authorization: Bearer \(token)\r\n") != .allowed, "no Host at all")
        let post = "Host: 127.0.0.1:8080\r\nAuthorization: Bearer \(token)\r\n"
        #expect(try verdict(post + "Origin: http://127.0.0.1:8080\r\n", "POST", "/api/tasks/a/cancel") == .allowed)
        guard case let .refused(origin) = try verdict(post + "Origin: http://attacker.example\r\n", "POST", "/api/tasks/a/cancel") else { throw Unread() }
        #expect(origin.status == 403)
        guard case .refused = try verdict("Host: 192.0.2.7:8080\r\nAuthorization: Bearer \(token)\r\n") else { throw Unread() }

        // On every address: the address the browser reached, never a name.
        let everywhere = LivePageAccess(token: token, address: MetricsAddress(host: "0.0.0.0", port: 8080))
        func everywhereVerdict(_ lines: String) throws -> LivePageAccess.Verdict {
            everywhere.verdict(try request("GET /api/status HTTP/1.1\r\n\(lines)Authorization: Bearer \(token)\r\n\r\n"))
        }
        for host in ["192.0.2.7:8080", "10.1.2.3:8080", "[2001:db8::7]:8080", "0.0.0.0:8080"] {
            #expect(try everywhereVerdict("Host: \(host)\r\n") == .allowed, "\(host)")
        }
        for host in ["attacker.example:8080", "192.0.2.7:9090", "192.0.2.7", "256.1.1.1:8080", "1.2.3:8080", "+1.2.3.4:8080", "[]:8080", "[x]:8080"] {
            #expect(try everywhereVerdict("Host: \(host)\r\n") != .allowed, "\(host)")
        }
        #expect(try everywhereVerdict("Host: 192.0.2.7:8080\r\nOrigin: http://192.0.2.7:8080\r\n") == .allowed)
        #expect(try everywhereVerdict("Host: 192.0.2.7:8080\r\nOrigin: http://attacker.example:8080\r\n") != .allowed)
        #expect(LivePageAccess.sameToken("abc", "abc") && !LivePageAccess.sameToken("abc", "abd") && !LivePageAccess.sameToken("ab", "abc"))
    }

    @Test func routes() throws {
        func route(_ method: String, _ target: String, _ body: String = "") throws -> Result<LivePageRoute, LivePageRefusal> {
            LivePageRoute.of(try request("\(method) \(target) HTTP/1.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"))
        }
        #expect(try route("GET", "/api/status") == .success(.status))
        #expect(try route("GET", "/api/tasks/train%5Blr%3D0.01%5D/log?tail=7") == .success(.log(task: "train[lr=0.01]", tail: 7)))
        #expect(try route("GET", "/api/tasks/a/log") == .success(.log(task: "a", tail: LivePageRoute.defaultTail)))
        #expect(try route("GET", "/api/tasks/a/log?tail=-1").failureStatus == 400)
        #expect(try route("POST", "/api/tasks/a/extend", #"{"seconds": 90, "past_max": true}"#) == .success(.extend(task: "a", by: .seconds(90), pastMax: true)))
        #expect(try route("POST", "/api/tasks/a/extend", #"{"seconds": 0}"#).failureStatus == 400)
        #expect(try route("POST", "/api/tasks/a/extend", "not json").failureStatus == 400)
        #expect(try route("POST", "/api/tasks/a/revoke") == .success(.revoke(task: "a", after: .zero)))
        #expect(try route("POST", "/api/tasks/a/cancel") == .success(.cancel(task: "a")))
        #expect(try route("GET", "/api/tasks/a/cancel").failureStatus == 405)
        #expect(try route("POST", "/api/status").failureStatus == 405)
        #expect(try route("GET", "/api/tasks/a/delete").failureStatus == 404)
        #expect(try route("GET", "/etc/passwd").failureStatus == 404)
    }

    @Test("event lines framed once and sent together: the first asks for the interval, the limit for now")
    func eventsGathered() {
        var gather = EventGather(limit: 40)
        #expect(gather.take() == nil)
        #expect(gather.add(Array("{\"a\":1}\n".utf8)) == .first)
        #expect(gather.add(Array("{\"b\":2}".utf8)) == .more)
        #expect(gather.take() == Array("data: {\"a\":1}\n\ndata: {\"b\":2}\n\n".utf8))
        #expect(gather.take() == nil)
        #expect(gather.add(Array("{\"c\":3}\n".utf8)) == .first)
        #expect(gather.add(Array("{\"d\":\"a line that reaches the limit\"}\n".utf8)) == .full)
        #expect(gather.take()?.count == 60)
        #expect(gather.take() == nil)
    }
}

private extension Result where Failure == LivePageRefusal {
    var failureStatus: Int? {
        if case let .failure(refusal) = self { refusal.status } else { nil }
    }
}
