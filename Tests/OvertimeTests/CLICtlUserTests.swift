// Who may talk to a control socket (issue 5: "Only the same user or root may talk to it
// (check the peer's credentials with SO_PEERCRED and refuse others with an error,
// logged)"; docs/control.md, "Who may talk to it"). Each test creates a throw-away user
// with useradd (the tests run as root), makes the socket reachable to it on purpose (a
// 0777 directory, the socket chmod'ed 0666 after start) so that only the credential check
// stands in the way, connects as that user with setpriv, and deletes the user at the end.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI ctl: who may use the socket")
struct CLICtlUserTests {
    /// Runs `body` with a fresh user, deleted afterwards. When no user can be made, records
    /// an issue saying why (the test cannot be done here), rather than passing silently.
    static func withUser(_ body: (CLICtlUser) async throws -> Void) async throws {
        let user: CLICtlUser
        do {
            user = try await CLICtlUser.create()
        } catch {
            Issue.record("cannot test a second user: \(error)")
            return
        }
        do {
            try await body(user)
        } catch {
            await user.delete()
            throw error
        }
        await user.delete()
    }

    /// A raw client run as `user`: connects to `socket`, sends `request`, reads until the
    /// supervisor hangs up (or 5 s pass), prints `{"data": …, "eof": …}`.
    static let rawClient = #"""
    import socket, sys, json, time
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    try:
        s.sendall(sys.argv[2].encode())
    except OSError:
        pass  # it may have hung up already; its reply is still there to read
    s.settimeout(5)
    data, eof = b"", False
    end = time.monotonic() + 5
    while time.monotonic() < end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            eof = True
            break
        if not chunk:
            eof = True
            break
        data += chunk
    print(json.dumps({"data": data.decode("utf-8", "replace"), "eof": eof}))
    """#

    /// A supervisor under test whose socket a second user can reach: in a 0777 directory,
    /// chmod'ed 0666 once it listens.
    static func openFixture() async throws -> CLICtlRunFixture {
        let f = try CLICtlRunFixture { scratch in
            try CLICtlFS.directory("open", in: scratch, mode: 0o777) + "/ctl.sock"
        }
        return f
    }

    @Test("a second user gets one error reply and is disconnected; the refusal is on the supervisor's stderr; the supervisor and its task carry on")
    func secondUserRefused() async throws {
        try await Self.withUser { user in
            let f = try await Self.openFixture()
            try await f.start(["--budget", "30s", "--json"], code: 4)
            try CLICtlFS.chmod(f.socket, 0o666)
            let client = try f.scratch.write("client.py", Self.rawClient)

            for request in ["{\"op\":\"cancel\",\"task\":\"job\"}\n", "{\"op\":\"status\"}\n"] {
                let p = CLICtlSpawn(user.setprivArguments + [CLIBatchWorker.python, client, f.socket, request],
                                    executable: CLICtlUser.setpriv, environment: user.environment, in: f.scratch)
                try p.start()
                let r = await p.finish()
                #expect(r.status == 0, "the raw client as \(user.name): \(r)")
                let out = try CLIJSON.object(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
                let data = out["data"] as? String ?? ""
                let lines = data.split(separator: "\n").map(String.init)
                #expect(lines.count == 1 && data.hasSuffix("\n"), "exactly one reply line: \(data.debugDescription)")
                let reply = try? CLIJSON.object(lines.first ?? "")
                #expect(CLIJSON.bool(reply?["ok"]) == false, "\(data)")
                let error = (reply?["error"] as? String) ?? ""
                #expect(error.contains("permission denied"), "\(data)")
                #expect(CLIJSON.bool(out["eof"]) == true, "the supervisor hangs up on a refused peer: \(out)")
            }

            // The task was not touched, and the supervisor's own user is still served.
            #expect(f.seen("cancel").isEmpty, "a refused peer's cancel was carried out: \(f.seen("cancel"))")
            let status = try await f.ctl(["status"])
            #expect(status.status == 0 && status.stdout.contains("running"), "\(status)")
            try f.release()
            let end = try await f.finish()
            #expect(end.status == 4, "\(end)")
            #expect(CLIJSON.isNull(try end.report()["cancel_reason"]), "\(end)")
            let refusals = end.stderrLines.filter { $0.contains("refused") && $0.contains("uid \(user.uid)") }
            #expect(refusals.count == 2, "each refusal is reported on the supervisor's stderr, naming the uid: \(end)")
        }
    }

    @Test("a second user connecting again and again: three refusals are said, then no more than one a minute")
    func refusalsAreRateLimited() async throws {
        try await Self.withUser { user in
            let f = try await Self.openFixture()
            try await f.start(["--budget", "30s", "--json"], code: 0)
            try CLICtlFS.chmod(f.socket, 0o666)
            let client = try f.scratch.write("client.py", Self.rawClient)
            for _ in 0..<12 {
                let p = CLICtlSpawn(user.setprivArguments + [CLIBatchWorker.python, client, f.socket, "{\"op\":\"status\"}\n"],
                                    executable: CLICtlUser.setpriv, environment: user.environment, in: f.scratch)
                try p.start()
                #expect(await p.finish().status == 0)
            }
            try f.release()
            let end = try await f.finish()
            let refusals = end.stderrLines.filter { $0.contains("refused") && $0.contains("uid \(user.uid)") }
            #expect(refusals.count == 3, "12 refusals within a minute: \(end)")
            #expect(refusals.last?.contains("at most one a minute") == true, "\(refusals)")
        }
    }

    @Test("overtime ctl run by a second user says permission denied and exits 1, whatever the request")
    func secondUserCtlMessage() async throws {
        try await Self.withUser { user in
            let f = try await Self.openFixture()
            try await f.start(["--budget", "30s"], code: 0)
            try CLICtlFS.chmod(f.socket, 0o666)
            for request in [["status"], ["status", "--json"], ["cancel", "job"], ["extend", "job", "1m"], ["revoke", "job"], ["watch"]] {
                let r = try await CLICtl.ctl(socket: f.socket, request, in: f.scratch, as: user)
                #expect(r.status == 1 && r.stderr.contains("permission denied"),
                        "ctl \(request.joined(separator: " ")) as \(user.name) (uid \(user.uid)): \(r)")
            }
            #expect(f.seen("cancel").isEmpty && f.seen("budget").count == 1, "a refused peer changed the task: \(CLICtlRecorder.lines(f.log))")
            try f.release()
            let end = try await f.finish()
            #expect(end.status == 0, "\(end)")
        }
    }

    @Test("a refusal is reported whatever --progress says", arguments: ["run", "batch"])
    func refusalLoggedInJSONMode(command: String) async throws {
        try await Self.withUser { user in
            let scratch = try CLIScratch()
            let open = try CLICtlFS.directory("open", in: scratch, mode: 0o777)
            let socket = open + "/ctl.sock"
            let go = scratch.path("go")
            let wait = ["/bin/sh", "-c", "while [ ! -e '\(go)' ]; do sleep 0.02; done"]
            let runDirectory = scratch.path("run")
            let arguments: [String]
            if command == "run" {
                arguments = ["run", "--control", socket, "--progress", "json", "--"] + wait
            } else {
                let job = try JSONSerialization.data(withJSONObject: ["tasks": [["name": "t", "command": wait]]])
                let path = try scratch.write("job.json", String(decoding: job, as: UTF8.self))
                arguments = ["batch", path, "--run-dir", runDirectory, "--control", socket, "--progress", "json"]
            }
            let p = CLIProcess(arguments, environment: CLICtl.baseEnvironment, in: scratch)
            try await p.start()
            #expect(await CLICtl.waitForSocket(socket))
            try CLICtlFS.chmod(socket, 0o666)
            _ = try await CLICtl.ctl(socket: socket, ["status"], in: scratch, as: user)
            try Data("go".utf8).write(to: URL(fileURLWithPath: go))
            let r = await p.finish()
            #expect(r.status == 0, "\(r)")
            let journal = (try? String(contentsOfFile: runDirectory + "/events.jsonl", encoding: .utf8)) ?? ""
            let mentioned = [r.stderr, r.stdout, journal].contains { text in
                text.split(separator: "\n").contains { $0.contains("refused") && $0.contains("\(user.uid)") }
            }
            #expect(mentioned, "\(command) --progress json: the refused connection from uid \(user.uid) is reported nowhere (stderr, stdout\(command == "batch" ? ", events.jsonl" : "")): \(r)")
        }
    }

    @Test("the supervisor's own user (not root) and root are both served; events.jsonl records each one's uid; the fallback directory is /tmp/overtime-UID, 0700")
    func ownUserAndRoot() async throws {
        try await Self.withUser { user in
            let f = try CLIBatchFixture()
            try CLICtlFS.chmod(f.records, 0o777)
            let open = try CLICtlFS.directory("open", in: f.scratch, mode: 0o777)
            let go = open + "/go"
            try f.writeJob(["concurrency": 2, "tasks": [
                f.task("hold", ["wait-file=\(go)"], ["budget": "60s"]),
                f.task("stuck", ["wait-cancel=30"], ["budget": "60s", "grace": "5s"]),
            ]])
            let runDirectory = open + "/run"
            // The batch runs as the user, with no XDG_RUNTIME_DIR: its socket goes to /tmp/overtime-UID.
            let fallback = "/tmp/overtime-\(user.uid)"
            try? FileManager.default.removeItem(atPath: fallback)
            let batch = CLIProcess(user.setprivArguments + [CLIBinary.path, "batch", f.jobPath, "--run-dir", runDirectory],
                                   executable: CLICtlUser.setpriv, environment: user.environment, in: f.scratch)
            try await batch.start()
            var socket = ""
            let listed = try await CLICtl.waitUntil {
                let list = try await CLICtl.ctl(["list", "--json"], in: f.scratch, environment: user.environment, as: user)
                socket = list.stdoutLines.first.flatMap { try? CLIJSON.object($0)["socket"] as? String } ?? ""
                return list.status == 0 && list.stdoutLines.count == 1
            }
            #expect(listed, "ctl list as \(user.name) never showed the batch")
            #expect(socket.hasPrefix(fallback + "/"), "\(socket)")
            let dir = CLICtlFS.info(fallback)
            #expect(dir?.mode == 0o700 && dir?.uid == user.uid, "\(fallback): \(String(describing: dir))")
            let sock = CLICtlFS.info(socket)
            #expect(sock?.mode == 0o600 && sock?.uid == user.uid, "\(socket): \(String(describing: sock))")
            #expect(await CLICtl.waitUntil { !f.records(of: "hold").isEmpty && !f.records(of: "stuck").isEmpty }, "the tasks never started")

            // The same user, without --socket: the only supervisor running for them.
            let status = try await CLICtl.ctl(["status"], in: f.scratch, environment: user.environment, as: user)
            #expect(status.status == 0 && status.stdout.contains("hold") && status.stdout.contains("stuck"), "\(status)")
            let theirs = try await CLICtl.ctl(["extend", "hold", "5m"], in: f.scratch, environment: user.environment, as: user)
            #expect(theirs.status == 0, "\(theirs)")
            // Root, through the user's 0700 directory.
            let roots = try await CLICtl.ctl(socket: socket, ["extend", "hold", "1m"], in: f.scratch)
            #expect(roots.status == 0, "\(roots)")
            let revoke = try await CLICtl.ctl(["revoke", "stuck"], in: f.scratch, environment: user.environment, as: user)
            #expect(revoke.status == 0, "\(revoke)")
            #expect(await CLICtl.waitUntil { f.records(of: "stuck").first?.cancel != nil })
            #expect(f.records(of: "stuck").first?.cancel == .some("revoked"), "\(f.records(of: "stuck"))")

            try Data("go".utf8).write(to: URL(fileURLWithPath: go))
            let r = await batch.finish(timeout: .seconds(30))
            #expect(r.status == 1, "stuck was revoked: \(r)")
            #expect(!r.stderr.contains("refused"), "nobody was refused: \(r)")
            #expect(CLICtlFS.info(socket) == nil, "the socket was left behind")

            let text = (try? String(contentsOfFile: runDirectory + "/events.jsonl", encoding: .utf8)) ?? ""
            let operators = text.split(separator: "\n").compactMap { try? CLIJSON.object(String($0)) }.filter { $0["event"] as? String == "operator" }
            let actions = operators.map { "\($0["task"] as? String ?? "?"): \($0["action"] as? String ?? "?") uid \(CLIJSON.int($0["uid"]) ?? -1)" }
            #expect(actions.count == 3, "\(actions)")
            #expect(actions.contains { $0.hasPrefix("hold: extend 5m") && $0.hasSuffix("uid \(user.uid)") }, "\(actions)")
            #expect(actions.contains { $0.hasPrefix("hold: extend 1m") && $0.hasSuffix("uid 0") }, "\(actions)")
            #expect(actions.contains { $0.hasPrefix("stuck: revoke") && $0.hasSuffix("uid \(user.uid)") }, "\(actions)")
        }
    }
}
