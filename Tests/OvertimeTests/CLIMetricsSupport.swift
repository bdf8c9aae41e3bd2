// Support for the metrics tests (docs/metrics.md): find the address a supervisor bound,
// talk HTTP to it over a plain socket, and run Prometheus's own tools on what it serves.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

enum CLIMetrics {
    /// The port of `metrics at http://127.0.0.1:PORT/metrics`, once the supervisor has said it.
    static func port(of process: CLIProcess, timeout: Duration = .seconds(20)) async -> Int? {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            if let range = process.stderrSoFar.range(of: #"metrics at http://127\.0\.0\.1:[0-9]+/metrics"#, options: .regularExpression) {
                let text = process.stderrSoFar[range]
                return Int(text.split(separator: ":").last!.split(separator: "/").first!)
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// What `fd` receives until the server's end (a reset after it is an end too), or until
    /// `timeout` seconds pass.
    static func receiveAll(_ fd: Int32, timeout: Double) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) >= 0 else { break }
            if entry.revents == 0 { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received.append(contentsOf: buffer[0..<n])
        }
        return received
    }

    /// Sends `request` to 127.0.0.1:`port` and reads until the server closes (or `timeout`
    /// seconds pass); nil when it cannot connect. `halfClose` ends the sending side after
    /// the request, as `printf ... | nc` does.
    static func exchange(port: Int, _ request: [UInt8], halfClose: Bool = false, timeout: Double = 10) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = loopback(port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        var offset = 0
        while offset < request.count {
            let n = request[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            // A server that answered early (431) and closed may refuse the rest.
            if n <= 0 { break }
            offset += n
        }
        if halfClose { shutdown(fd, Int32(SHUT_WR)) }
        return String(decoding: receiveAll(fd, timeout: timeout), as: UTF8.self)
    }

    struct Response {
        var status: Int
        var head: String
        var body: String
    }

    /// `METHOD PATH` as curl would ask it.
    static func request(port: Int, _ path: String, method: String = "GET") -> Response? {
        let text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUser-Agent: overtime-tests\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        return exchange(port: port, Array(text.utf8)).flatMap(parse)
    }

    static func parse(_ text: String) -> Response? {
        guard let split = text.range(of: "\r\n\r\n") else { return nil }
        let head = String(text[..<split.lowerBound])
        let parts = head.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { return nil }
        return Response(status: status, head: head, body: String(text[split.upperBound...]))
    }

    static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// A socket listening on 127.0.0.1 at a port the kernel chose, and that port: a port in
    /// use for as long as the socket stays open (close it).
    static func occupiedPort() -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopback(0)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        listen(fd, 4)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A port free a moment ago (for a server of someone else's that takes no port 0).
    static func freePort() -> Int {
        let (fd, port) = occupiedPort()
        close(fd)
        return port
    }

    /// Runs `arguments` (a tool of Prometheus's) with `input` on stdin; its status and
    /// everything it printed.
    static func tool(_ arguments: [String], input: String = "") throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stdout
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// `promtool check metrics` on `page`: exit 0 and nothing said, or what it found.
    static func promtoolProblems(_ page: String) throws -> String? {
        let result = try tool(["/usr/bin/promtool", "check", "metrics"], input: page)
        return result.status == 0 && result.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
            ? nil : "promtool exit \(result.status): \(result.output)"
    }

    /// A job of two tasks: `trainer` reports 1 of 4 done and waits for the file `stop`;
    /// `after-trainer` waits for it.
    static func job(in scratch: CLIScratch) throws -> String {
        let stop = scratch.path("stop")
        let trainer = #"printf '{"type":"progress","completed":1,"total":4}\n' >&3; while [ ! -e "$0" ]; do sleep 0.1; done"#
        let job: [String: Any] = [
            "deadline": "10m",
            "tasks": [
                ["name": "trainer", "command": ["sh", "-c", trainer, stop], "budget": "5m"],
                ["name": "after-trainer", "command": ["true"], "after": ["trainer"]],
            ],
        ]
        let data = try JSONSerialization.data(withJSONObject: job, options: [.sortedKeys])
        return try scratch.write("job.json", String(decoding: data, as: UTF8.self))
    }
}

/// `overtime batch` of `CLIMetrics.job` with `--metrics ADDRESS`, started, its port known;
/// `trainer` is let go (the file `stop`) by `finish`, or when this goes, so that a failed
/// test leaves nothing running.
final class CLIMetricsBatch: @unchecked Sendable {
    let scratch: CLIScratch
    let process: CLIProcess
    let port: Int

    init(metrics address: String) async throws {
        scratch = try CLIScratch()
        let job = try CLIMetrics.job(in: scratch)
        process = CLIProcess(["batch", job, "--run-dir", scratch.path("run"), "--progress", "none", "--metrics", address],
                             environment: CLIBatchFixture.environment, in: scratch)
        try await process.start()
        guard let port = await CLIMetrics.port(of: process) else {
            _ = FileManager.default.createFile(atPath: scratch.path("stop"), contents: nil)
            throw CLIFailure("no metrics address on stderr: \(process.stderrSoFar)")
        }
        self.port = port
    }

    /// Lets `trainer` end and waits for the batch.
    func finish() async -> CLIResult {
        _ = FileManager.default.createFile(atPath: scratch.path("stop"), contents: nil)
        return await process.finish(timeout: .seconds(40))
    }

    deinit { _ = FileManager.default.createFile(atPath: scratch.path("stop"), contents: nil) }
}

/// A Prometheus server of the test's own on loopback, scraping one target every second;
/// stopped (SIGTERM, then SIGKILL) by `stop`, which a test calls on every path.
final class CLIPrometheus: @unchecked Sendable {
    let port: Int
    private let process = Process()

    init(scraping target: Int, in scratch: CLIScratch) throws {
        port = CLIMetrics.freePort()
        let config = try scratch.write("prometheus.yml", """
        global:
          scrape_interval: 1s
          scrape_timeout: 1s
        scrape_configs:
          - job_name: overtime
            static_configs:
              - targets: ['127.0.0.1:\(target)']
        """)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prometheus")
        process.arguments = ["--config.file=\(config)", "--storage.tsdb.path=\(scratch.path("tsdb"))",
                             "--web.listen-address=127.0.0.1:\(port)"]
        let log = FileManager.default.createFile(atPath: scratch.path("prometheus.log"), contents: nil)
            ? try FileHandle(forWritingTo: URL(fileURLWithPath: scratch.path("prometheus.log"))) : nil
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    /// The value of the first series `query` returns now, as Prometheus's API writes it.
    func instantValue(_ query: String) -> String? {
        let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? query
        guard let response = CLIMetrics.request(port: port, "/api/v1/query?query=\(encoded)"), response.status == 200,
              let object = try? CLIJSON.object(response.body),
              let data = object["data"] as? [String: Any], let result = data["result"] as? [[String: Any]],
              let value = result.first?["value"] as? [Any], value.count == 2 else { return nil }
        return value[1] as? String
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let end = Date().addingTimeInterval(10)
        while process.isRunning, Date() < end { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}
