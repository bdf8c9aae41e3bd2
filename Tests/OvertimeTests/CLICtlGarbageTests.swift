// What a control socket does with requests `overtime ctl` would never send (issue 5:
// "malformed requests get an error reply; a client that disconnects mid-request or floods
// the socket harms nothing"; docs/control.md, "Requests and replies"). Each test sends its
// garbage over a raw connection to a real `overtime run`, then checks that the supervisor
// still answers and that its task, untouched, ends normally with its own exit code.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI ctl: garbage on the control socket")
struct CLICtlGarbageTests {
    /// The task is still running, was never cancelled, and ends with its code once released.
    static func expectUnharmed(_ f: CLICtlRunFixture, code: Int32, _ context: String) async throws {
        let tasks = try await CLICtl.status(f.socket, in: f.scratch)
        #expect(tasks.count == 1 && tasks.first?["state"] as? String == "running", "\(context): \(tasks)")
        #expect(f.seen("cancel").isEmpty, "\(context): the task was cancelled: \(f.seen("cancel"))")
        #expect(f.seen("budget").count == 1, "\(context): only the budget at start; the task read \(f.seen("budget"))")
        try f.release()
        let end = try await f.finish()
        #expect(end.status == code, "\(context): \(end)")
        #expect(!end.diedOfSignal && !end.timedOut, "\(context): \(end)")
        let report = try end.report()
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(context): \(end)")
        #expect(CLIJSON.int(report["protocol_errors"]) == 0, "\(context): \(end)")
    }

    @Test("malformed requests each get an error reply (with the id when there is one) on a connection that stays open")
    func malformedRequests() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "30s", "--json"], code: 5)
        let client = try CLICtlClient(path: f.socket)

        // (what is sent, the reply's `ok`, a word its error must contain, the id it must echo)
        let cases: [(String, Bool, String?, String?)] = [
            ("this is not json", false, "JSON", nil),
            ("{\"op\":\"status\"", false, "JSON", nil),
            ("[1,2,3]", false, "object", nil),
            ("\"status\"", false, "object", nil),
            ("{}", false, "op", nil),
            ("{\"id\":1}", false, "op", "1"),
            ("{\"op\":42,\"id\":2}", false, "op", "2"),
            ("{\"op\":\"frobnicate\",\"id\":\"x\"}", false, "frobnicate", "\"x\""),
            ("{\"op\":\"cancel\",\"id\":3}", false, "task", "3"),
            ("{\"op\":\"cancel\",\"task\":42,\"id\":4}", false, "task", "4"),
            ("{\"op\":\"cancel\",\"task\":\"\",\"id\":5}", false, "task", "5"),
            ("{\"op\":\"cancel\",\"task\":null}", false, "task", nil),
            ("{\"op\":\"cancel\",\"task\":\"nope\",\"id\":6}", false, "nope", "6"),
            ("{\"op\":\"extend\",\"task\":\"job\",\"id\":7}", false, "by", "7"),
            ("{\"op\":\"extend\",\"task\":\"job\",\"by\":\"soon\",\"id\":8}", false, "by", "8"),
            ("{\"op\":\"extend\",\"task\":\"job\",\"by\":-5,\"id\":9}", false, "by", "9"),
            ("{\"op\":\"extend\",\"task\":\"job\",\"by\":0,\"id\":10}", false, "by", "10"),
            ("{\"op\":\"extend\",\"task\":\"job\",\"by\":[10],\"id\":11}", false, "by", "11"),
            ("{\"op\":\"extend\",\"task\":\"job\",\"by\":1e308,\"id\":12}", false, "by", "12"),
            ("{\"op\":\"revoke\",\"task\":\"job\",\"after\":\"later\",\"id\":13}", false, "after", "13"),
            ("{\"op\":\"revoke\",\"task\":\"job\",\"after\":{\"s\":1},\"id\":14}", false, "after", "14"),
            ("{\"op\":\"revoke\",\"task\":\"nope\",\"id\":15}", false, "nope", "15"),
            ("{\"op\":\"status\",\"id\":{\"nested\":[1,true,null]}}", true, nil, "{\"nested\":[1,true,null]}"),
        ]
        for (request, ok, word, id) in cases {
            let reply: [String: Any]
            do { reply = try await client.request(request) } catch {
                Issue.record("\(request): \(error)")
                continue
            }
            #expect(CLIJSON.bool(reply["ok"]) == ok, "\(request) → \(reply)")
            if let word {
                let error = reply["error"] as? String ?? ""
                #expect(error.localizedCaseInsensitiveContains(word), "\(request) → \(reply)")
            }
            if let id {
                let expected = try JSONSerialization.jsonObject(with: Data(id.utf8), options: [.fragmentsAllowed])
                let echoed = reply["id"].map { try? JSONSerialization.data(withJSONObject: $0, options: [.fragmentsAllowed, .sortedKeys]) } ?? nil
                let want = try JSONSerialization.data(withJSONObject: expected, options: [.fragmentsAllowed, .sortedKeys])
                #expect(echoed == want, "\(request) must echo id \(id): \(reply)")
            }
        }
        // Raw bytes: not UTF-8, a NUL, a blank line (nothing to answer), CRLF.
        #expect(await client.send([0xFF, 0xFE, 0x7B, 0x0A]), "send")
        let badUTF8 = try await client.readReply()
        #expect(CLIJSON.bool(badUTF8["ok"]) == false, "\(badUTF8)")
        #expect(await client.send([0x7B, 0x00, 0x7D, 0x0A]), "send")
        let nul = try await client.readReply()
        #expect(CLIJSON.bool(nul["ok"]) == false, "\(nul)")
        #expect(await client.send("\n   \n{\"op\":\"status\",\"id\":\"crlf\"}\r\n"))
        let crlf = try await client.readReply()
        #expect(CLIJSON.bool(crlf["ok"]) == true && crlf["id"] as? String == "crlf", "blank lines get no reply; CRLF is fine: \(crlf)")

        // The same connection still serves.
        let status = try await client.request("{\"op\":\"status\",\"id\":99}")
        #expect(CLIJSON.bool(status["ok"]) == true && CLIJSON.int(status["id"]) == 99, "\(status)")
        #expect((status["tasks"] as? [[String: Any]])?.first?["name"] as? String == "job", "\(status)")

        try await Self.expectUnharmed(f, code: 5, "after malformed requests")
    }

    @Test("a 1 MiB line gets one error and the connection goes on; clients that vanish mid-line change nothing")
    func oversizeAndDisconnects() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "30s", "--json"], code: 9)

        // An idle connection held open the whole time blocks nobody.
        let idle = try CLICtlClient(path: f.socket)

        let big = try CLICtlClient(path: f.socket)
        let mib = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        #expect(await big.send(mib + [0x0A]), "could not send the 1 MiB line")
        let tooLong = try await big.readReply()
        #expect(CLIJSON.bool(tooLong["ok"]) == false && (tooLong["error"] as? String ?? "").contains("64 KiB"), "\(tooLong)")
        // A 1 MiB request that is valid JSON is refused all the same, and never carried out.
        let padded = Array("{\"op\":\"cancel\",\"task\":\"job\",\"pad\":\"".utf8) + [UInt8](repeating: 0x61, count: 1 << 20) + Array("\"}\n".utf8)
        #expect(await big.send(padded))
        let tooLong2 = try await big.readReply()
        #expect(CLIJSON.bool(tooLong2["ok"]) == false, "\(tooLong2)")
        let next = try await big.request("{\"op\":\"status\",\"id\":\"after-big\"}")
        #expect(CLIJSON.bool(next["ok"]) == true && next["id"] as? String == "after-big",
                "exactly one error per long line, then the next request is served: \(next)")

        // Clients that send part of a request and vanish: nothing is carried out.
        for partial in ["{\"op\":\"cancel\",\"task\":\"job\"}", "{\"op\":\"revoke\",\"ta", "{\"op\":\"extend\",\"task\":\"job\",\"by\":\"1h\"}"] {
            let c = try CLICtlClient(path: f.socket)
            #expect(await c.send(partial))
            c.shutdownBoth()
        }
        // One that vanishes in the middle of a huge line.
        let c = try CLICtlClient(path: f.socket)
        #expect(await c.send(Array("{\"op\":\"cancel\",\"task\":\"job\",\"pad\":\"".utf8) + [UInt8](repeating: 0x61, count: 300_000)))
        c.shutdownBoth()
        // One that asks to watch and disappears without reading.
        let w = try CLICtlClient(path: f.socket)
        #expect(await w.send("{\"op\":\"watch\"}\n"))
        w.shutdownBoth()

        try await Task.sleep(for: .milliseconds(300))
        let fresh = try CLICtlClient(path: f.socket)
        let status = try await fresh.request("{\"op\":\"status\"}")
        #expect(CLIJSON.bool(status["ok"]) == true, "\(status)")
        let idleStatus = try await idle.request("{\"op\":\"status\",\"id\":\"idle\"}")
        #expect(CLIJSON.bool(idleStatus["ok"]) == true && idleStatus["id"] as? String == "idle", "the idle connection still serves: \(idleStatus)")
        try await Self.expectUnharmed(f, code: 9, "after oversize lines and vanished clients")
    }

    @Test("a flood of 10,000 requests from a client that does not read its replies harms nothing")
    func flood() async throws {
        let f = try CLICtlRunFixture()
        try await f.start(["--budget", "30s", "--json"], code: 4)

        var lines: [UInt8] = []
        for i in 0..<10_000 {
            let line = i % 3 == 2 ? "flood \(i) is not json\n" : "{\"op\":\"status\",\"id\":\(i)}\n"
            lines.append(contentsOf: line.utf8)
        }
        let flooder = try CLICtlClient(path: f.socket)
        let quitter = try CLICtlClient(path: f.socket)
        let clock = ContinuousClock()
        let began = clock.now
        async let sentA = flooder.send(lines, timeout: .seconds(20))
        async let sentB = quitter.send(lines, timeout: .seconds(20))
        // Meanwhile ctl is answered.
        let during = try await f.ctl(["status"])
        #expect(during.status == 0 && during.stdout.contains("job"), "\(during)")
        // A bound a starved loop would miss by far (the flood takes 20 s to send), generous
        // for a shared 2-core machine running the other suites (5.4 s was once seen).
        #expect(during.wall < .seconds(12), "status took \(during.wall) during the flood")
        let (a, b) = await (sentA, sentB)
        #expect(a && b, "the supervisor stopped reading a flooding client (sent: \(a), \(b))")
        #expect(clock.now - began < .seconds(20))
        quitter.shutdownBoth()  // vanishes with its replies unread

        // The flooder's replies, as far as they were kept, are whole JSON lines.
        var replies = 0
        while let line = await flooder.readLine(timeout: .milliseconds(300)) {
            replies += 1
            do {
                let reply = try CLIJSON.object(line)
                #expect(reply["ok"] != nil, "\(line)")
            } catch {
                Issue.record("a torn or invalid reply line: \(line.prefix(200))")
                break
            }
        }
        #expect(replies > 0, "no replies at all")
        // And the connection still serves once the client reads again.
        var served = false
        for attempt in 0..<50 where !served {
            guard await flooder.send("{\"op\":\"status\",\"id\":\"again-\(attempt)\"}\n") else { break }
            while let line = await flooder.readLine(timeout: .milliseconds(200)) {
                if let reply = try? CLIJSON.object(line), (reply["id"] as? String)?.hasPrefix("again-") == true {
                    served = true
                    #expect(CLIJSON.bool(reply["ok"]) == true, "\(reply)")
                    break
                }
            }
        }
        #expect(served, "the flooding client's connection no longer answers")
        try await Self.expectUnharmed(f, code: 4, "after a flood")
    }

    /// CPU time (user + system) `pid` has used, in seconds.
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        // After "pid (comm)": state is field 3, utime 14, stime 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("a client holding more connections than the supervisor has descriptors: no busy loop, and served again once they close")
    func connectionFlood() async throws {
        let f = try CLICtlRunFixture()
        // A supervisor with 64 descriptors (a scaled-down RLIMIT_NOFILE of 1024 and a
        // thousand connections).
        let command = [CLIBatchWorker.python, f.recorder, f.log, f.go, "8"]
        let shell = "ulimit -n 64 && exec \"$0\" \"$@\""
        let p = CLIProcess(["-c", shell, CLIBinary.path, "run", "--control", f.socket, "--name", "job", "--budget", "30s", "--json", "--"] + command,
                           executable: "/bin/sh", environment: CLICtl.baseEnvironment, in: f.scratch)
        try await p.start()
        #expect(await CLICtl.waitForSocket(f.socket))
        #expect(await CLICtl.waitUntil { !f.seen("started").isEmpty }, "the task never started")

        // Connect until the backlog is full: every descriptor of the supervisor's is taken.
        var held: [Int32] = []
        for _ in 0..<200 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            if CLICtlFS.connect(fd, f.socket) != 0 { Glibc.close(fd); break }
            held.append(fd)
        }
        #expect(held.count > 60, "held \(held.count) connections")
        try await Task.sleep(for: .milliseconds(300))
        let before = Self.cpuSeconds(p.pid)
        try await Task.sleep(for: .milliseconds(1500))
        let after = Self.cpuSeconds(p.pid)
        if let before, let after {
            #expect(after - before < 0.15, "the supervisor used \(after - before) s of CPU in 1.5 s while it could not accept: a busy loop")
        } else {
            Issue.record("cannot read the supervisor's CPU time")
        }
        for fd in held { Glibc.close(fd) }

        try await Task.sleep(for: .milliseconds(300))
        let status = try await CLICtl.ctl(["--socket", f.socket, "status"], in: f.scratch, timeout: .seconds(10))
        #expect(status.status == 0 && status.stdout.contains("running"), "served again once the connections closed: \(status)")
        try f.release()
        let end = await p.finish()
        #expect(end.status == 8, "\(end)")
        #expect(CLIJSON.isNull(try end.report()["cancel_reason"]), "\(end)")
    }
}
