import OvertimeProtocol

/// Who may use the live page (docs/ui.md, "Security"): the token, and the addresses the
/// page answers to. Pure.
struct LivePageAccess: Sendable {
    /// 64 hexadecimal digits (32 random bytes).
    let token: String
    /// The `Host` values the page answers to, lower-case: the address served with its port,
    /// and `localhost:PORT` for a loopback address. Anything else may be a DNS name rebound
    /// to this machine by another site.
    let hosts: Set<String>
    /// The address the URL names.
    let address: MetricsAddress

    /// The cookie the first load sets, named for the port: a browser keeps one set of
    /// cookies for all the ports of a host, and two runs' pages on one machine must not
    /// overwrite each other's.
    var cookieName: String { "overtime_ui_\(address.port)" }

    /// Served on every address of the machine (`0.0.0.0`, `::`): then a Host that is an IP
    /// address (not a name, which another site's DNS could point here) with the port served
    /// is taken as well, since the browser names the address it reached.
    var servesEveryAddress: Bool { address.host == "0.0.0.0" || address.host == "::" }

    init(token: String, address: MetricsAddress) {
        self.token = token
        self.address = address
        var hosts: Set<String> = [address.description.lowercased()]
        if address.host == MetricsAddress.loopback || address.host == "::1" { hosts.insert("localhost:\(address.port)") }
        self.hosts = hosts
    }

    /// The URL that opens the page, token included (said on stderr, written to `ui-url`).
    var url: String { "http://\(address)/?token=\(token)" }

    enum Verdict: Equatable {
        case allowed
        /// The first load's `?token=`: set the cookie and send the browser to `/` without it
        /// (the token leaves the address bar and the history).
        case exchangeToken
        case refused(LivePageRefusal)
    }

    /// Whether `request` may be served: its Host first (403), then its Origin, when it
    /// carries one (403: a browser says it for a script's request from another page, of any
    /// method), then the token (401).
    func verdict(_ request: HTTPRequest) -> Verdict {
        guard let host = request.fields["host"], answers(to: host) else {
            return .refused(.init(403, "the Host must be the address served (\(address)); a page reached by another name is refused"))
        }
        if let origin = request.fields["origin"], !(origin.lowercased().hasPrefix("http://") && answers(to: String(origin.dropFirst(7)))) {
            return .refused(.init(403, "a request from another site (Origin \(origin)) is refused"))
        }
        if let authorization = request.fields["authorization"] {
            let scheme = "bearer "
            guard authorization.lowercased().hasPrefix(scheme), Self.sameToken(String(authorization.dropFirst(scheme.count)), token) else {
                return .refused(.unauthorized)
            }
            return .allowed
        }
        if request.method == "GET", request.path == "/", let given = request.query["token"] {
            return Self.sameToken(given, token) ? .exchangeToken : .refused(.unauthorized)
        }
        if let cookie = request.fields["cookie"].flatMap(cookieValue), Self.sameToken(cookie, token) {
            return .allowed
        }
        return .refused(.unauthorized)
    }

    /// Whether `host` (a Host field, or an Origin's `HOST:PORT`) names the page.
    func answers(to host: String) -> Bool {
        let host = host.lowercased()
        if hosts.contains(host) { return true }
        guard servesEveryAddress else { return false }
        return Self.isAddressLiteral(host, port: address.port)
    }

    /// `A.B.C.D:PORT` or `[IPv6]:PORT`, with `port`.
    static func isAddressLiteral(_ host: String, port: Int) -> Bool {
        guard host.hasSuffix(":\(port)") else { return false }
        let name = host.dropLast(":\(port)".count)
        if name.hasPrefix("["), name.hasSuffix("]") {
            let inner = name.dropFirst().dropLast()
            return !inner.isEmpty && inner.contains(":") && inner.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            (1...3).contains(part.count) && part.allSatisfy { ("0"..."9").contains($0) } && Int(part)! <= 255
        }
    }

    /// The page's cookie's value in a Cookie field.
    private func cookieValue(_ field: String) -> String? {
        for pair in field.split(separator: ";") {
            let trimmed = pair.drop { $0 == " " }
            if trimmed.hasPrefix(cookieName + "=") { return String(trimmed.dropFirst(cookieName.count + 1)) }
        }
        return nil
    }

    /// Compares in time that does not depend on where the first difference is, so that
    /// timing the answers does not spell the token out. The length is no secret.
    static func sameToken(_ given: String, _ token: String) -> Bool {
        let a = Array(given.utf8), b = Array(token.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// A request the live page does not serve: its status and why, in words.
struct LivePageRefusal: Error, Equatable {
    var status: Int
    var message: String
    init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    static let unauthorized = LivePageRefusal(401, "the live page needs its token: open the URL overtime printed (it is also in 'overtime ctl list'), or send Authorization: Bearer TOKEN")

    /// A control target's refusal as the API answers it: 404 for a task that is not
    /// there, 409 for one that cannot take it now, 400 for a request that names the wrong thing.
    init(_ failure: ControlFailure) {
        switch failure {
        case .noRunningTask, .noTaskInBatch, .noLogFile: self.init(404, failure.message)
        case .notRunning, .alreadyCancelling, .finished: self.init(409, failure.message)
        case .wholeSweep, .batchTakesNoExpiring: self.init(400, failure.message)
        }
    }
}

/// What a request to the live page asks for. Pure.
enum LivePageRoute: Equatable {
    case page
    case status
    case events
    case log(task: String, tail: Int)
    case extend(task: String, by: Duration, pastMax: Bool)
    case revoke(task: String, after: Duration)
    case cancel(task: String)

    /// The most lines `log?tail=` gives, and how many it gives when not told.
    static let maxTail = 10_000
    static let defaultTail = 100

    /// Reads what `request` asks for: 404 for a path the page does not have, 405 for a
    /// method the path does not take, 400 for a body or query that is not what it takes.
    static func of(_ request: HTTPRequest) -> Result<LivePageRoute, LivePageRefusal> {
        let reading = request.method == "GET" || request.method == "HEAD"
        func read(_ route: LivePageRoute) -> Result<LivePageRoute, LivePageRefusal> {
            reading ? .success(route) : .failure(.init(405, "\(request.path) takes GET only"))
        }
        switch request.path {
        case "/": return read(.page)
        case "/api/status": return read(.status)
        case "/api/events": return read(.events)
        default: break
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "api", parts[2] == "tasks", !parts[3].isEmpty else {
            return .failure(.init(404, "no such page; the API is /api/status, /api/events and /api/tasks/NAME/{log,extend,revoke,cancel} (docs/control.md)"))
        }
        guard let task = HTTPRequest.percentDecoded(Array(parts[3].utf8)[...]) else {
            return .failure(.init(400, "the task's name must be UTF-8, percent-encoded"))
        }
        switch parts[4] {
        case "log":
            var tail = defaultTail
            if let text = request.query["tail"] {
                guard let given = Int(text), (0...maxTail).contains(given) else {
                    return .failure(.init(400, "tail must be a number of lines from 0 to \(maxTail)"))
                }
                tail = given
            }
            return read(.log(task: task, tail: tail))
        case "extend", "revoke", "cancel":
            guard request.method == "POST" else { return .failure(.init(405, "\(parts[4]) changes the task: POST only")) }
            return body(request.body, of: String(parts[4]), task: task)
        default:
            return .failure(.init(404, "a task has log, extend, revoke and cancel; not '\(parts[4])'"))
        }
    }

    /// `{"seconds": N, "past_max": true}` for extend (seconds needed), `{"seconds": N}` for
    /// revoke (0 when left out), anything or nothing for cancel.
    private static func body(_ bytes: [UInt8], of action: String, task: String) -> Result<LivePageRoute, LivePageRefusal> {
        if action == "cancel" { return .success(.cancel(task: task)) }
        var fields = JSONValue.object([])
        if !bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            guard let parsed = try? JSONValue.parse(bytes), case .object = parsed else {
                return .failure(.init(400, "the body must be a JSON object such as {\"seconds\": 600}"))
            }
            fields = parsed
        }
        var seconds: Duration?
        switch fields["seconds"] {
        case nil: break
        case let .number(n)? where n >= 0 && n.isFinite && n <= DurationText.maximum.seconds:
            seconds = .seconds(fromDouble: n)
        default:
            return .failure(.init(400, "\"seconds\" must be a number of seconds ≥ 0"))
        }
        if action == "revoke" { return .success(.revoke(task: task, after: seconds ?? .zero)) }
        guard let seconds, seconds > .zero else { return .failure(.init(400, "extend needs {\"seconds\": N} with N > 0")) }
        var pastMax = false
        switch fields["past_max"] {
        case nil, .null?: break
        case let .bool(given)?: pastMax = given
        default: return .failure(.init(400, "\"past_max\" must be true or false"))
        }
        return .success(.extend(task: task, by: seconds, pastMax: pastMax))
    }
}

/// The live page's answers: every one with its security headers (docs/ui.md). Pure.
enum LivePageHTTP {
    /// What a response that is no page may do: nothing.
    static let strictPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

    /// The page's: its own inline script and style, by the nonce of this response only; its
    /// requests to its own server; no frames, no forms elsewhere, no plug-ins.
    static func pagePolicy(nonce: String) -> String {
        "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; connect-src 'self'; img-src 'self' data:; "
            + "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    }

    static func headers(policy: String) -> String {
        "Content-Security-Policy: \(policy)\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n"
            + "Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n"
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 303: "See Other"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        default: "Error"
        }
    }

    static func response(_ status: Int, contentType: String, body: [UInt8], withBody: Bool = true,
                         policy: String = strictPolicy, extraHeaders: String = "") -> [UInt8] {
        MetricsHTTP.response(status, reason(status), contentType: contentType, body: body, withBody: withBody,
                             extraHeaders: headers(policy: policy) + extraHeaders)
    }

    static let jsonType = "application/json; charset=utf-8"

    /// A control reply as the API's answer (the socket's words, the HTTP status beside them).
    static func reply(_ status: Int, _ outcome: ControlReply.Outcome, withBody: Bool = true) -> [UInt8] {
        response(status, contentType: jsonType, body: ControlReply(outcome).encoded(), withBody: withBody)
    }

    static func refusal(_ refusal: LivePageRefusal) -> [UInt8] {
        let extra = refusal.status == 401 ? "WWW-Authenticate: Bearer realm=\"overtime\"\r\n" : ""
        return response(refusal.status, contentType: jsonType, body: ControlReply(.failed(refusal.message)).encoded(), extraHeaders: extra)
    }

    /// The request could not be read whole.
    static func refusal(_ read: HTTPRequest.Read) -> [UInt8] {
        switch read {
        case .tooLarge: refusal(.init(431, "the request head is over \(HTTPRequest.maxHeadBytes) bytes"))
        case let .bodyTooLarge(limit): refusal(.init(413, "the body is over \(limit) bytes"))
        case let .malformed(problem): refusal(.init(400, problem))
        case .incomplete, .complete: refusal(.init(408, "the request did not arrive in time"))
        }
    }

    /// The first load: the cookie set, and the browser sent to `/` without the token.
    static func tokenExchange(_ access: LivePageAccess) -> [UInt8] {
        response(303, contentType: "text/plain; charset=utf-8", body: Array("see /\n".utf8),
                 extraHeaders: "Set-Cookie: \(access.cookieName)=\(access.token); HttpOnly; SameSite=Strict; Path=/\r\nLocation: /\r\n")
    }

    /// Server-Sent Events: the head, then one event per line (`event(_:)`).
    static func eventStreamHead() -> [UInt8] {
        Array(("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + headers(policy: strictPolicy) + "Connection: close\r\n\r\n").utf8)
    }

    /// One event line (a JSON object, as `ctl watch` prints it) as one event, appended to
    /// `bytes`.
    static func appendEvent(_ line: [UInt8], to bytes: inout [UInt8]) {
        bytes.append(contentsOf: "data: ".utf8)
        // A JSON line holds no raw newline; its own end is the event's.
        bytes.append(contentsOf: line.last == 0x0A ? line.dropLast() : line[...])
        bytes.append(contentsOf: [0x0A, 0x0A])
    }
}
