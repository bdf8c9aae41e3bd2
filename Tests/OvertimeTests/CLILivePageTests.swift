// The live page's server (`--ui`; docs/ui.md, docs/control.md "HTTP API"): its URL and
// token, who is refused, the JSON API acting on real tasks, the event stream, and a stream
// reader that does not read costing neither the loop nor memory.

import Foundation
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `overtime batch --ui 0` of a job of two tasks that report progress every 0.1 s until the
/// file `stop` appears: `trainer`, and `markup`, whose progress title is markup.
final class CLILivePageBatch: @unchecked Sendable {
    static let markupName = "markup"
    static let markupTitle = "</script><img src=x onerror=alert(1)>"
    let scratch: CLIScratch
    let process: CLIProcess
    let url: String
    let port: Int
    let token: String
    let socket: String

    init(scratch: CLIScratch = try! CLIScratch()) async throws {
        self.scratch = scratch
        let stop = scratch.path("stop")
        let reporter = #"i=0; while [ ! -e "$0" ]; do i=$((i+1)); printf '{"type":"progress","completed":%d,"total":100000}\n' $i >&3; sleep 0.1; done"#
        let titled = reporter.replacingOccurrences(of: #""total":100000"#, with: #""total":100000,"title":"\#(Self.markupTitle)""#)
        let job: [String: Any] = ["tasks": [
            ["name": "trainer", "command": ["sh", "-c", reporter, stop], "budget": "5m"],
            ["name": Self.markupName, "command": ["sh", "-c", titled, stop], "budget": "5m"],
        ]]
        let data = try JSONSerialization.data(withJSONObject: job, options: [.sortedKeys])
        let file = try scratch.write("job.json", String(decoding: data, as: UTF8.self))
        socket = scratch.path("control.sock")
        process = CLIProcess(["batch", file, "--run-dir", scratch.path("run"), "--progress", "none", "--control", socket, "--ui", "0"],
                             environment: CLIBatchFixture.environment, in: scratch)
        try await process.start()
        do {
            (url, port, token) = try await CLILivePageStream.address(of: process)
        } catch {
            _ = FileManager.default.createFile(atPath: stop, contents: nil)
            throw error
        }
    }

    /// `METHOD PATH` with the given header lines (Host is the page's unless one is given).
    func request(_ path: String, method: String = "GET", headers: [String] = [], body: String = "") -> CLIMetrics.Response? {
        var lines = ["\(method) \(path) HTTP/1.1"]
        if !headers.contains(where: { $0.lowercased().hasPrefix("host:") }) { lines.append("Host: 127.0.0.1:\(port)") }
        lines += headers + ["Content-Length: \(body.utf8.count)", "Connection: close"]
        return CLIMetrics.exchange(port: port, Array((lines.joined(separator: "\r\n") + "\r\n\r\n" + body).utf8)).flatMap(CLIMetrics.parse)
    }

    var bearer: String { "Authorization: Bearer \(token)" }

    func journal() -> [[String: Any]] { CLICtlRecorder.lines(scratch.path("run/events.jsonl")) }

    func finish() async -> CLIResult {
        _ = FileManager.default.createFile(atPath: scratch.path("stop"), contents: nil)
        return await process.finish(timeout: .seconds(40))
    }

    deinit { _ = FileManager.default.createFile(atPath: scratch.path("stop"), contents: nil) }
}

@Suite("CLI live page")
struct CLILivePageTests {
    @Test("the URL on stderr, in ui-url (0600) and in ctl list; 401 without the token, 403 for a foreign Host or Origin, nothing cancelled")
    func urlTokenAndRefusals() async throws {
        let batch = try await CLILivePageBatch()
        var info = stat()
        #expect(stat(batch.scratch.path("run/ui-url"), &info) == 0 && info.st_mode & 0o777 == 0o600, "ui-url mode \(String(info.st_mode & 0o777, radix: 8))")
        #expect(batch.scratch.read("run/ui-url") == batch.url + "\n")
        let list = try await CLICtl.ctl(socket: batch.socket, ["list", "--json"], in: batch.scratch)
        #expect(list.stdout.contains("\"live_page\":\"\(batch.url)\""), "\(list)")
        #expect(batch.token.count == 64 && batch.token.allSatisfy(\.isHexDigit))

        let name = CLILivePageBatch.markupName.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        for path in ["/", "/api/status", "/api/events", "/api/tasks/trainer/log"] {
            #expect(batch.request(path)?.status == 401, "\(path) without the token")
            #expect(batch.request(path, headers: ["Authorization: Bearer " + String(repeating: "0", count: 64)])?.status == 401)
            #expect(batch.request(path, headers: ["Cookie: overtime_ui_\(batch.port)=nope"])?.status == 401)
        }
        for action in ["cancel", "extend", "revoke"] {
            #expect(batch.request("/api/tasks/trainer/\(action)", method: "POST", body: #"{"seconds":5}"#)?.status == 401)
            let rebound = batch.request("/api/tasks/trainer/\(action)", method: "POST", headers: [batch.bearer, "Host: evil.example:\(batch.port)"], body: #"{"seconds":5}"#)
            #expect(rebound?.status == 403, "\(String(describing: rebound))")
            let foreign = batch.request("/api/tasks/\(name)/\(action)", method: "POST", headers: [batch.bearer, "Origin: http://evil.example"], body: #"{"seconds":5}"#)
            #expect(foreign?.status == 403, "\(String(describing: foreign))")
        }
        #expect(batch.request("/api/status", headers: [batch.bearer, "Host: evil.example"])?.status == 403)
        for path in ["/", "/api/status", "/api/events", "/api/tasks/trainer/log"] {
            #expect(batch.request(path, headers: [batch.bearer, "Origin: http://evil.example"])?.status == 403, "GET \(path) from another site")
        }
        #expect(batch.request("/api/status", headers: [batch.bearer, "Origin: http://127.0.0.1:\(batch.port)"])?.status == 200)
        #expect(batch.request("/api/status", headers: [batch.bearer, "Host: localhost:\(batch.port)"])?.status == 200)
        #expect(batch.request("/api/tasks/trainer/cancel", headers: [batch.bearer])?.status == 405, "a GET changes nothing")
        let operators = batch.journal().filter { $0["event"] as? String == "operator" }
        #expect(operators.isEmpty, "a refused request acted: \(operators)")

        let result = await batch.finish()
        #expect(result.status == 0, "\(result)")
    }

    @Test("connections that never show the token cannot push a page's event stream out")
    func streamsHaveAPoolOfTheirOwn() async throws {
        let batch = try await CLILivePageBatch()
        let stream = try #require(CLILivePageStream.open(port: batch.port, token: batch.token))
        defer { close(stream) }
        try await Task.sleep(for: .milliseconds(300))
        // More silent connections from this host than the 8 its pool holds.
        let silent = (0..<20).compactMap { _ in CLILivePageStream.connected(port: batch.port) }
        defer { silent.forEach { close($0) } }
        #expect(silent.count == 20)
        try await Task.sleep(for: .milliseconds(300))
        // Still open: it reads on (its tasks report every 0.1 s) until the reader's time is up.
        let clock = ContinuousClock()
        let start = clock.now
        let received = String(decoding: CLIMetrics.receiveAll(stream, timeout: 1.5), as: UTF8.self)
        #expect(clock.now - start > .seconds(1), "the stream ended after \(clock.now - start): \(received.suffix(200))")
        #expect(received.contains("data: {"), "\(received.suffix(300))")
        let head = batch.request("/api/events", method: "HEAD", headers: [batch.bearer])
        #expect(head?.status == 200 && head?.head.contains("text/event-stream") == true && head?.body.isEmpty == true, "\(String(describing: head))")
        #expect(await batch.finish().status == 0)
    }

    @Test("the run's last events reach an open event stream before the supervisor goes")
    func lastEventsAreSent() async throws {
        let scratch = try CLIScratch()
        let process = CLIProcess(["run", "--ui", "0", "--progress", "none", "--", "sh", "-c", "sleep 1"],
                                 environment: CLIBatchFixture.environment, in: scratch)
        try await process.start()
        let (_, port, token) = try await CLILivePageStream.address(of: process)
        let stream = try #require(CLILivePageStream.open(port: port, token: token))
        defer { close(stream) }
        let received = String(decoding: CLIMetrics.receiveAll(stream, timeout: 15), as: UTF8.self)
        #expect(await process.finish(timeout: .seconds(20)).status == 0)
        #expect(received.contains(#""event":"exited""#), "\(received.suffix(400))")
    }

    @Test("OVERTIME_UI serves the page and is not handed on: a task (or an overtime in it) does not see it")
    func environmentIsNotInherited() async throws {
        let scratch = try CLIScratch()
        var environment = CLIBatchFixture.environment
        environment["OVERTIME_UI"] = "0"
        let result = try await cliRun(["run", "--progress", "none", "--", "sh", "-c", #"echo "OVERTIME_UI=[${OVERTIME_UI-unset}]""#],
                                      in: scratch, environment: environment)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.contains("overtime: live page: http://127.0.0.1:"), "\(result.stderr)")
        #expect(result.stdout.contains("OVERTIME_UI=[unset]"), "\(result.stdout)")
    }

    @Test("the token exchanged for an HttpOnly SameSite=Strict cookie; the page under a nonce CSP, a task's </script> title only as JSON")
    func cookieExchangeAndEscaping() async throws {
        let batch = try await CLILivePageBatch()
        let first = try #require(batch.request("/?token=\(batch.token)"))
        #expect(first.status == 303 && first.head.contains("\r\nLocation: /\r\n"), "\(first)")
        let cookie = "overtime_ui_\(batch.port)=\(batch.token)"
        #expect(first.head.contains("Set-Cookie: \(cookie); HttpOnly; SameSite=Strict; Path=/"), "\(first.head)")
        #expect(batch.request("/?token=" + String(repeating: "f", count: 64))?.status == 401)

        let page = try #require(batch.request("/", headers: ["Cookie: other=1; \(cookie)"]))
        #expect(page.status == 200 && page.body.contains("<title>Overtime live</title>"), "\(page)")
        for header in ["X-Content-Type-Options: nosniff", "Cache-Control: no-store", "Referrer-Policy: no-referrer", "script-src 'nonce-"] {
            #expect(page.head.contains(header), "\(header) in \(page.head)")
        }
        #expect(!page.head.contains("unsafe-inline"))
        #expect(page.body.components(separatedBy: "</script>").count == 2, "the page's own script end only: \(page.body)")
        #expect(!page.body.contains("<img"))

        let status = try #require(batch.request("/api/status", headers: [batch.bearer]))
        #expect(status.status == 200 && status.head.contains("Content-Type: application/json"), "\(status)")
        let tasks = try #require(try CLIJSON.object(status.body)["tasks"] as? [[String: Any]])
        // Its first progress may not have come yet.
        #expect(tasks.contains { $0["name"] as? String == CLILivePageBatch.markupName }, "\(status.body)")
        let clock = ContinuousClock()
        let end = clock.now + .seconds(10)
        var titled = false
        while clock.now < end, !titled {
            titled = batch.request("/api/status", headers: [batch.bearer])?.body.contains(#""title":"<\/script><img src=x onerror=alert(1)>""#) == true
                || batch.request("/api/status", headers: [batch.bearer])?.body.contains(#""title":"</script><img src=x onerror=alert(1)>""#) == true
            if !titled { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(titled, "the title in /api/status")
        let again = try #require(batch.request("/", headers: ["Cookie: \(cookie)"]))
        #expect(again.body.components(separatedBy: "</script>").count == 2 && !again.body.contains("<img"), "\(again.body)")

        let result = await batch.finish()
        #expect(result.status == 0, "\(result)")
    }

    @Test("POST cancel ends the task with reason user; POST extend moves its deadline in ctl status; the event stream brings progress")
    func actionsAndEvents() async throws {
        let batch = try await CLILivePageBatch()
        // The stream, opened first, hears the actions' events too.
        let fd = try #require(CLILivePageStream.open(port: batch.port, token: batch.token))
        defer { close(fd) }
        let streamed = Task.detached { CLIMetrics.receiveAll(fd, timeout: 6) }

        let before = try await CLICtl.status(batch.socket, in: batch.scratch).first { $0["name"] as? String == "trainer" }
        let remainingBefore = try #require(before?["remaining"] as? Double)
        let extend = try #require(batch.request("/api/tasks/trainer/extend", method: "POST", headers: [batch.bearer], body: #"{"seconds": 3600}"#))
        #expect(extend.status == 200 && extend.body.contains(#""ok":true"#), "\(extend)")
        let after = try await CLICtl.status(batch.socket, in: batch.scratch).first { $0["name"] as? String == "trainer" }
        let remainingAfter = try #require(after?["remaining"] as? Double)
        #expect(remainingAfter > remainingBefore + 3000, "extend by an hour: \(remainingBefore) → \(remainingAfter)")
        #expect(batch.request("/api/tasks/trainer/extend", method: "POST", headers: [batch.bearer], body: #"{"seconds": -1}"#)?.status == 400)
        #expect(batch.request("/api/tasks/nobody/cancel", method: "POST", headers: [batch.bearer])?.status == 404)

        let name = CLILivePageBatch.markupName.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let cancel = try #require(batch.request("/api/tasks/\(name)/cancel", method: "POST", headers: [batch.bearer, "Origin: http://127.0.0.1:\(batch.port)"]))
        #expect(cancel.status == 200 && cancel.body.contains("cancelling"), "\(cancel)")
        let clock = ContinuousClock()
        let end = clock.now + .seconds(20)
        var exited: [String: Any]?
        while clock.now < end, exited == nil {
            exited = batch.journal().first { $0["task"] as? String == CLILivePageBatch.markupName && $0["event"] as? String == "exited" }
            if exited == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(exited?["cancel_reason"] as? String == "user", "\(String(describing: exited))")
        #expect(batch.request("/api/tasks/\(name)/cancel", method: "POST", headers: [batch.bearer])?.body.contains("already") == true)

        let log = try #require(batch.request("/api/tasks/trainer/log?tail=5", headers: [batch.bearer]))
        #expect(log.status == 200, "\(log)")

        let events = String(decoding: await streamed.value, as: UTF8.self)
        #expect(events.hasPrefix("HTTP/1.1 200 OK\r\n") && events.contains("Content-Type: text/event-stream"), "\(events.prefix(300))")
        #expect(events.contains(#"data: {"#) && events.contains(#""task":"trainer","event":"progress""#), "\(events.prefix(2000))")
        #expect(events.contains(#""event":"operator""#), "the page's own actions come back as events")

        let result = await batch.finish()
        #expect(result.status == 1, "a batch with a cancelled task fails: \(result)")
    }

    @Test("events from many tasks reach a stream gathered, a send every 100 ms at most, not one an event")
    func eventsGathered() async throws {
        let scratch = try CLIScratch()
        let stop = scratch.path("stop")
        // 40 tasks whose starts are 25 ms apart, each reporting twice a second: the journal's
        // thinning lets about one progress event a second through for each, 40 a second at
        // 40 different moments.
        let reporter = #"sleep "$1"; i=0; while [ ! -e "$0" ]; do i=$((i+1)); printf '{"type":"progress","completed":%d,"total":100000}\n' $i >&3; sleep 0.5; done"#
        let tasks: [[String: Any]] = (0..<40).map { i in
            ["name": "t\(i)", "command": ["sh", "-c", reporter, stop, String(format: "%.3f", Double(i) * 0.025)], "budget": "5m"]
        }
        let data = try JSONSerialization.data(withJSONObject: ["concurrency": 40, "tasks": tasks], options: [.sortedKeys])
        let file = try scratch.write("job.json", String(decoding: data, as: UTF8.self))
        let process = CLIProcess(["batch", file, "--run-dir", scratch.path("run"), "--progress", "none", "--ui", "0"],
                                 environment: CLIBatchFixture.environment, in: scratch)
        try await process.start()
        defer { _ = FileManager.default.createFile(atPath: stop, contents: nil) }
        let (_, port, token) = try await CLILivePageStream.address(of: process)
        let clock = ContinuousClock()
        try await Task.sleep(for: .seconds(2))  // every task started and reporting

        let fd = try #require(CLILivePageStream.open(port: port, token: token))
        defer { close(fd) }
        // Each read taken as soon as it can be: a send per event would come as a read per event.
        var reads = 0
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let readEnd = clock.now + .seconds(3)
        while clock.now < readEnd {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) >= 0 else { break }
            if entry.revents == 0 { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            reads += 1
            received.append(contentsOf: buffer[0..<n])
        }
        let events = String(decoding: received, as: UTF8.self).components(separatedBy: "\ndata: ").count - 1
        #expect(events >= 60, "40 tasks' progress over 3 s: \(events) events")
        // 30 intervals of 100 ms in 3 s, the head, and room for a send cut in two.
        #expect(reads <= 45, "\(events) events came in \(reads) reads")

        _ = FileManager.default.createFile(atPath: stop, contents: nil)
        let result = await process.finish(timeout: .seconds(40))
        #expect(result.status == 0, "\(result)")
    }

    @Test("a stream reader that stops reading is dropped at its bound, and the run's deadline cancel is not delayed by it")
    func stalledStreamReaders() async throws {
        let scratch = try CLIScratch()
        // Progress with a 30 KB detail as fast as the pipe takes it: ctl watch's thinning
        // lets 10 a second through to the streams, 300 KB/s for each.
        let detail = String(repeating: "x", count: 30_000)
        let flood = "while :; do printf '{\"type\":\"progress\",\"fraction\":0.5,\"detail\":\"\(detail)\"}\\n' >&3 || exit; done"
        let process = CLIProcess(["run", "--ui", "0", "--max-runtime", "6s", "--json", "--progress", "none", "--", "sh", "-c", flood],
                                 environment: CLIBatchFixture.environment, in: scratch)
        try await process.start()
        let (_, port, token) = try await CLILivePageStream.address(of: process)
        let clock = ContinuousClock()
        // Readers that never read, their receive buffers small.
        let stalled = (0..<6).compactMap { _ in CLILivePageStream.open(port: port, token: token, receiveBuffer: 4096) }
        defer { stalled.forEach { close($0) } }
        #expect(stalled.count == 6)

        // While the run goes on (its deadline is 6s off), each stalled reader reads what it
        // was sent: dropped at the server's bound, it comes to the stream's end at once; one
        // the server still fed would read on at 300 KB/s until the run ended.
        try await Task.sleep(for: .seconds(2))
        for fd in stalled {
            let start = clock.now
            let received = CLIMetrics.receiveAll(fd, timeout: 3)
            let took = clock.now - start
            #expect(took < .milliseconds(2500), "a stalled reader was still fed \(took) later (\(received.count) bytes)")
        }

        let result = await process.finish(timeout: .seconds(40))
        let report = try CLIJSON.object(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let elapsed = try #require(report["elapsed"] as? Double, "\(result)")
        #expect(report["cancel_reason"] as? String == "deadline", "\(result.stdout)")
        // The loop held by a write would hold the cancel with it.
        #expect(elapsed < 6 + 3, "the deadline of 6s cancelled after \(elapsed)s")
    }
}

/// Tests/Fixtures/hanging-fs.py mounted at `path`: `path/hangs.log` never gives its bytes
/// until `close` unmounts it. Needs root and Debian's python3-fusepy (scripts/setup).
final class CLIHangingFilesystem {
    let path: String
    private let process = Process()

    init(at path: String) async throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Checkout.path("Tests/Fixtures/hanging-fs.py"), path]
        try process.run()
        let end = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < end, !FileManager.default.fileExists(atPath: path + "/hangs.log") {
            guard process.isRunning else { throw CLIFailure("hanging-fs.py exited \(process.terminationStatus) (is python3-fusepy installed?)") }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard FileManager.default.fileExists(atPath: path + "/hangs.log") else { close(); throw CLIFailure("hanging-fs.py did not mount at \(path)") }
    }

    /// Unmounts and kills the filesystem's process: its death aborts the FUSE connection,
    /// which ends every read still waiting on it with an error (a lazy unmount alone leaves
    /// them waiting, and the process waiting for them). Idempotent.
    func close() {
        guard process.isRunning else { return }
        let umount = Process()
        umount.executableURL = URL(fileURLWithPath: "/bin/umount")
        umount.arguments = ["-l", path]
        try? umount.run()
        umount.waitUntilExit()
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

@Suite("CLI live page, a task's log on a filesystem that does not answer")
struct CLILivePageLogTests {
    @Test("log tails that never come back: four held, the next refused at once (503) while the status still answers; answered again once back")
    func logReadsThatHang() async throws {
        let batch = try await CLILivePageBatch()
        let hanging = try await CLIHangingFilesystem(at: batch.scratch.path("hanging"))
        defer { hanging.close() }
        let log = batch.scratch.path("run/logs/trainer.log")
        let clock = ContinuousClock()
        let opened = clock.now + .seconds(15)
        while clock.now < opened, !FileManager.default.fileExists(atPath: log) { try await Task.sleep(for: .milliseconds(50)) }
        try #require(FileManager.default.fileExists(atPath: log), "the task's log was never made")
        // The task keeps writing to the file it has open; the page's reads now go where
        // nothing answers.
        unlink(log)
        #expect(symlink(hanging.path + "/hangs.log", log) == 0)

        let held = (0..<LivePageLimits.logReads).compactMap { _ in
            CLILivePageStream.open(port: batch.port, token: batch.token, path: "/api/tasks/trainer/log?tail=5")
        }
        defer { held.forEach { Glibc.close($0) } }
        #expect(held.count == LivePageLimits.logReads)
        try await Task.sleep(for: .milliseconds(500))

        let start = clock.now
        let refused = batch.request("/api/tasks/trainer/log?tail=5", headers: [batch.bearer])
        #expect(refused?.status == 503, "\(String(describing: refused))")
        #expect(clock.now - start < .seconds(3), "refused after \(clock.now - start)")
        #expect(batch.request("/api/status", headers: [batch.bearer])?.status == 200)

        // Back: the held reads end (in an error), and a log read is answered again.
        hanging.close()
        unlink(log)
        _ = FileManager.default.createFile(atPath: log, contents: Data("back\n".utf8))
        var answered: CLIMetrics.Response?
        let end = clock.now + .seconds(15)
        while clock.now < end {
            answered = batch.request("/api/tasks/trainer/log?tail=5", headers: [batch.bearer])
            if answered?.status == 200 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(answered?.status == 200 && answered?.body == "back\n", "\(String(describing: answered))")

        let result = await batch.finish()
        #expect(result.status == 0, "\(result)")
    }
}

/// The server's limits the tests lean on (LivePageServer's own are internal).
enum LivePageLimits {
    static let logReads = 4
}

enum CLILivePageStream {
    /// The URL, port and token of the live page that `process` says on stderr (within 20 s).
    static func address(of process: CLIProcess) async throws -> (url: String, port: Int, token: String) {
        let prefix = "overtime: live page: "
        var said: String?
        let clock = ContinuousClock()
        let end = clock.now + .seconds(20)
        while clock.now < end, said == nil {
            said = process.stderrSoFar.split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
            if said == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        guard let url = said, let address = url.range(of: #"127\.0\.0\.1:[0-9]+"#, options: .regularExpression),
              let port = Int(url[address].split(separator: ":")[1]), let token = url.range(of: "?token=")?.upperBound else {
            throw CLIFailure("no live page URL on stderr: \(process.stderrSoFar)")
        }
        return (url, port, String(url[token...]))
    }

    /// A connection to `path` (the event stream by default) with its GET sent; nil when it
    /// cannot connect.
    static func open(port: Int, token: String, path: String = "/api/events", receiveBuffer: Int32? = nil) -> Int32? {
        guard let fd = connected(port: port, receiveBuffer: receiveBuffer) else { return nil }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\r\n".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            close(fd)
            return nil
        }
        return fd
    }

    /// A connection to the page's port that has sent nothing yet; nil when it cannot connect.
    static func connected(port: Int, receiveBuffer: Int32? = nil) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = CLIMetrics.loopback(port)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}
