// The readiness protocols daemons already speak (DESIGN §3b), with the real clients:
// Debian's systemd-notify, python3-systemd's systemd.daemon.notify, PyPI's sdnotify.

import Foundation
import OvertimeTestSupport
import Testing


@Suite("CLI sd_notify and s6 readiness")
struct CLINotifyTests {
    @Test("systemd-notify --ready returns at once and the task is ready; --status shows as its detail")
    func systemdNotifyReady() async throws {
        let scratch = try CLIScratch()
        let script = """
        start=$(date +%s%N)
        systemd-notify --ready --status="serving on :8080" || exit 9
        echo "took $(( ($(date +%s%N) - start) / 1000000 )) ms" >&2
        sleep 0.3
        """
        let r = try await cliRun(["run", "--json", "--progress", "json", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(report["ready"] as? Bool == true, "\(r)")
        #expect((report["progress"] as? [String: Any])?["detail"] as? String == "serving on :8080", "\(r)")
        let took = r.stderrLines.first { $0.hasPrefix("took ") }.flatMap { Int($0.dropFirst(5).split(separator: " ")[0]) }
        #expect(try #require(took, "\(r)") < 3000, "systemd-notify did not wait out a timeout: \(r)")
    }

    @Test("READY=1 and STATUS= from python's clients: the task is ready, the status its detail", arguments: ["python3-systemd", "sdnotify"])
    func pythonClientsReady(client: String) async throws {
        let scratch = try CLIScratch()
        let send = client == "python3-systemd"
            ? "/usr/bin/python3 -c 'from systemd import daemon; daemon.notify(\"READY=1\\nSTATUS=serving\")'"
            : "\(Checkout.path(".venv/bin/python")) -c 'import sdnotify; sdnotify.SystemdNotifier().notify(\"READY=1\\nSTATUS=serving\")'"
        let r = try await cliRun(["run", "--json", "--", "sh", "-c", "\(send) || exit 9; sleep 0.5"], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(report["ready"] as? Bool == true, "\(r)")
        #expect((report["progress"] as? [String: Any])?["detail"] as? String == "serving", "\(r)")
    }

    @Test("EXTEND_TIMEOUT_USEC keeps a silent task alive past its budget")
    func extendTimeout() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--json", "--budget", "1s", "--", "sh", "-c",
                                  "systemd-notify EXTEND_TIMEOUT_USEC=4000000 && sleep 2.5"], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(CLIJSON.isNull(try r.report()["cancel_reason"]), "\(r)")
    }

    @Test("WATCHDOG=1 pings keep a task alive; when they stop it is cancelled for timeout", arguments: ["systemd-notify", "python3-systemd", "sdnotify"])
    func watchdog(client: String) async throws {
        let scratch = try CLIScratch()
        let ping: String
        switch client {
        case "systemd-notify": ping = "systemd-notify WATCHDOG=1"
        case "python3-systemd": ping = "/usr/bin/python3 -c 'from systemd import daemon; daemon.notify(\"WATCHDOG=1\")'"
        default: ping = "\(Checkout.path(".venv/bin/python")) -c 'import sdnotify; sdnotify.SystemdNotifier().notify(\"WATCHDOG=1\")'"
        }
        // WATCHDOG_USEC is the window (1.5 s): ping at well under it for 4 s, then stop.
        let script = """
        test "$WATCHDOG_USEC" = 1500000 || { echo "WATCHDOG_USEC=$WATCHDOG_USEC" >&2; exit 9; }
        end=$(( $(date +%s) + 4 ))
        while [ "$(date +%s)" -lt "$end" ]; do \(ping) || exit 8; sleep 0.4; done
        echo stopped-pinging >&2
        sleep 30
        """
        let r = try await cliRun(["run", "--json", "--budget", "1.5s", "--grace", "1s", "--", "sh", "-c", script], in: scratch,
                                 timeout: .seconds(40))
        #expect(r.status == 124, "\(r)")
        #expect(r.stderr.contains("stopped-pinging"), "it lived on the pings until they stopped: \(r)")
        #expect(try r.report()["cancel_reason"] as? String == "timeout", "\(r)")
        #expect(r.wall < .seconds(20), "\(r)")
    }

    @Test("BARRIER=1: the descriptor sent with it is closed once the messages before it are handled")
    func barrier() async throws {
        let scratch = try CLIScratch()
        let client = try scratch.write("barrier.py", """
        import os, socket, time
        address = os.environ["NOTIFY_SOCKET"]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.connect("\\0" + address[1:] if address.startswith("@") else address)
        r, w = os.pipe()
        s.sendmsg([b"READY=1\\nSTATUS=before the barrier\\nBARRIER=1"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(bytearray(w.to_bytes(4, "little")))))])
        os.close(w)
        start = time.monotonic()
        os.set_blocking(r, True)
        import select
        ready, _, _ = select.select([r], [], [], 5)
        print("barrier-ok" if ready and os.read(r, 1) == b"" else "barrier-timeout", round(time.monotonic() - start, 3))
        """)
        let r = try await cliRun(["run", "--json", "--", "python3", client], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("barrier-ok"), "\(r)")
        #expect(try r.report()["ready"] as? Bool == true, "\(r)")
    }

    @Test("a datagram from outside the task is refused and changes nothing; --notify-socket off gives none")
    func outsiderAndOff() async throws {
        let scratch = try CLIScratch()
        let address = scratch.path("address")
        // Room for the outsider to start on a loaded machine; its WATCHDOG=1, were it heard,
        // would move the deadline 6 s on, its EXTEND a minute.
        let task = CLIProcess(["run", "--json", "--budget", "6s", "--", "sh", "-c",
                               "printf %s \"$NOTIFY_SOCKET\" > '\(address)'; sleep 10"], in: scratch)
        try await task.start()
        let clock = ContinuousClock()
        let end = clock.now + .seconds(10)
        while scratch.read("address")?.isEmpty ?? true, clock.now < end { try await Task.sleep(for: .milliseconds(20)) }
        var environment = ProcessInfo.processInfo.environment
        let socketAddress: String = try #require(scratch.read("address"))
        environment["NOTIFY_SOCKET"] = socketAddress
        for _ in 0..<3 {
            _ = try await outsiderRun("/usr/bin/systemd-notify", ["--ready", "WATCHDOG=1", "EXTEND_TIMEOUT_USEC=60000000"],
                                      environment: environment)
            try await Task.sleep(for: .milliseconds(300))
        }
        let r = await task.finish(timeout: .seconds(90))
        #expect(r.status == 124, "an outsider's WATCHDOG and EXTEND moved nothing: \(r)")
        #expect(CLIJSON.double(try r.report()["elapsed"]).map { $0 < 20 } == true, "it ended at its budget, not the outsider's: \(r)")
        let report = try r.report()
        #expect(report["ready"] as? Bool == false, "\(r)")
        #expect(r.stderr.contains("refused"), "\(r)")

        let off = try await cliRun(["run", "--notify-socket", "off", "--", "sh", "-c", "test -z \"$NOTIFY_SOCKET\" && test -z \"$WATCHDOG_USEC\""],
                                   in: scratch)
        #expect(off.status == 0, "\(off)")
    }

    @Test("s6 notification-fd: a newline on fd N marks the task ready; nothing else of the task's descriptors changes")
    func s6NotificationFD() async throws {
        let scratch = try CLIScratch()
        let script = """
        for fd in 4 6; do if { true >&$fd; } 2>/dev/null; then echo "fd $fd open" >&2; fi; done
        sleep 0.3; echo >&5; sleep 0.3
        """
        let r = try await cliRun(["run", "--json", "--progress", "json", "--notify-fd", "5", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(try r.report()["ready"] as? Bool == true, "\(r)")
        #expect(!r.stderr.contains("open"), "only 0 to 3 and the notification fd are open: \(r)")
        let silent = try await cliRun(["run", "--json", "--notify-fd", "5", "--", "sh", "-c", "echo -n partial >&5; sleep 0.2"], in: scratch)
        #expect(try silent.report()["ready"] as? Bool == false, "no newline, not ready: \(silent)")
        let bad = try await cliRun(["run", "--notify-fd", "3", "--", "true"], in: scratch)
        #expect(bad.status == 125 && bad.stderr.contains("--notify-fd"), "\(bad)")
    }

    @Test("in a batch, readiness by sd_notify or by s6's fd starts an `after … ready` dependent while the server still runs; notify-socket false gives none")
    func batchReadiness() async throws {
        let f = try CLIBatchFixture()
        let started = f.path("client-started")
        let waitForClient = "for i in $(seq 200); do [ -e '\(started)' ] && exit 0; sleep 0.1; done; exit 7"
        try f.writeJob(["tasks": [
            ["name": "notify-server", "command": ["sh", "-c", "sleep 0.2; systemd-notify --ready; \(waitForClient)"]],
            ["name": "s6-server", "command": ["sh", "-c", "sleep 0.2; echo >&6; \(waitForClient)"], "notify-fd": 6],
            ["name": "client", "command": ["sh", "-c", "touch '\(started)'"],
             "after": [["task": "notify-server", "when": "ready"], ["task": "s6-server", "when": "ready"]]],
            ["name": "quiet", "command": ["sh", "-c", "test -z \"$NOTIFY_SOCKET\""], "notify-socket": false],
        ]])
        let r = try await f.run()
        #expect(r.status == 0, "both servers saw the client start while they ran: \(r)")
        let summary = try f.summaryTasks()
        for name in ["notify-server", "s6-server", "client", "quiet"] {
            #expect(summary[name]?["outcome"] as? String == "succeeded", "\(name): \(summary[name] ?? [:])")
        }
        #expect(try f.events(of: "notify-server", "ready").count == 1 && f.events(of: "s6-server", "ready").count == 1)

        try f.writeJobText(#"{"tasks": [{"name": "a", "command": ["true"], "notify-fd": 3, "notify-socket": "yes"}]}"#)
        let bad = try await cliRun(["batch", f.path("job.json"), "--run-dir", f.path("run-bad")], in: f.scratch)
        #expect(bad.status == 125 && bad.stderr.contains("'notify-fd': 3 is not a descriptor from 4 to 15")
                && bad.stderr.contains("'notify-socket': expected true or false"), "\(bad)")
    }

    @Test("systemd-notify --status shows in ctl status while the daemon runs")
    func statusInCtlStatus() async throws {
        let scratch = try CLIScratch()
        let control = scratch.path("control.sock")
        let task = CLIProcess(["run", "--control", control, "--budget", "30s", "--", "sh", "-c",
                               "systemd-notify --ready --status='warming cache 3/10'; sleep 30"], in: scratch)
        try await task.start()
        #expect(await CLICtl.waitForSocket(control))
        var table = ""
        let shown = try await CLICtl.waitUntil(timeout: .seconds(10)) {
            table = try await CLICtl.ctl(socket: control, ["status"], in: scratch).stdout
            return table.contains("warming cache 3/10")
        }
        #expect(shown, "\(table)")
        _ = try await CLICtl.ctl(socket: control, ["cancel", "sh"], in: scratch)
        _ = await task.finish(timeout: .seconds(20))
    }
}
