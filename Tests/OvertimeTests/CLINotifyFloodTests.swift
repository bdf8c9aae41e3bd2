// A datagram flood on a task's NOTIFY_SOCKET from another user (docs/protocol.md): the
// abstract name is readable in /proc/net/unix, so anyone may send to it. The supervisor
// must spend next to nothing on it, and the task's own notifications must still be heard.

import Foundation
import Testing
import OvertimeTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The task: writes its NOTIFY_SOCKET to the file `argv[1]`, then sends `WATCHDOG=1` every
/// 0.3 s (its budget is 2 s: only the heartbeats keep it alive) until the file
/// `argv[1].stop` appears (at most 60 s): it outlives the flood however slowly that starts.
private let heartbeating = #"""
import os, socket, sys, time
name = os.environ["NOTIFY_SOCKET"]
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(name)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
end = time.monotonic() + 60
while time.monotonic() < end and not os.path.exists(sys.argv[1] + ".stop"):
    s.sendto(b"WATCHDOG=1", "\0" + name[1:])
    time.sleep(0.3)
"""#

/// The flood: `WATCHDOG=1` to the abstract name `argv[1]` in a tight loop for `argv[2]`
/// seconds, without blocking; prints how many were taken and how many were not.
private let flood = #"""
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setblocking(False)
address = "\0" + sys.argv[1][1:]
taken = refused = 0
errors = set()
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        s.sendto(b"WATCHDOG=1", address)
        taken += 1
    except OSError as e:
        refused += 1
        errors.add(e.strerror)
print("taken", taken, "refused", refused, sorted(errors), file=sys.stderr, flush=True)
"""#

@Suite("CLI sd_notify flood", .serialized)
struct CLINotifyFloodTests {
    static func cpuSeconds(of pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("a 5 s flood from uid 65534 costs the supervisor under 40% of a core and 50 µs a datagram; the task's WATCHDOG=1 keeps its 2 s budget", .timeLimit(.minutes(2)))
    func floodFromAnotherUser() async throws {
        try #require(geteuid() == 0, "the flood is sent as uid 65534 with setpriv, which needs root: run the tests as root, as CI does")
        let scratch = try CLIScratch()
        let task = try scratch.write("heartbeating.py", heartbeating)
        let flooder = try scratch.write("flood.py", flood)
        let socketFile = scratch.path("notify-socket")
        let run = CLIProcess(["run", "--budget", "2s", "--progress", "plain", "--", CLIBatchWorker.python, task, socketFile], in: scratch)
        try await run.start()

        let clock = ContinuousClock()
        let end = clock.now + .seconds(20)
        while !FileManager.default.fileExists(atPath: socketFile), clock.now < end { try await Task.sleep(for: .milliseconds(20)) }
        let name = try #require(scratch.read("notify-socket"), "the task never said its NOTIFY_SOCKET: \(run.stderrSoFar)")
        // /tmp is not for everyone to read here: the flood runs from a copy it can read.
        chmod(scratch.url.path, 0o755)
        chmod(flooder, 0o644)

        let before = try #require(Self.cpuSeconds(of: run.pid))
        let started = clock.now
        let attack = CLIProcess(["--reuid=65534", "--regid=65534", "--clear-groups", CLIBatchWorker.python, flooder, name, "5"],
                                executable: "/usr/bin/setpriv", in: scratch)
        try await attack.start()
        let attackResult = await attack.finish(timeout: .seconds(30))
        let after = try #require(Self.cpuSeconds(of: run.pid))
        let seconds = Double((clock.now - started).components.seconds)
        let share = (after - before) / max(seconds, 1)
        #expect(attackResult.status == 0 && attackResult.stderr.contains("taken "), "the flood did not run: \(attackResult)")
        #expect(share < 0.4, "the supervisor spent \(Int(share * 100))% of a core on the flood (\(attackResult.stderr))")
        // What the kernel took, the supervisor read: each must cost it next to nothing (a
        // few microseconds; a membership check and an event each cost well over a hundred).
        let taken = attackResult.stderr.split(separator: " ").drop { $0 != "taken" }.dropFirst().first.flatMap { Double($0) } ?? 0
        let perDatagram = (after - before) / max(taken, 1)
        #expect(perDatagram < 50e-6, "\(Int(perDatagram * 1e6)) µs of the supervisor's CPU per refused datagram (\(attackResult.stderr))")

        _ = FileManager.default.createFile(atPath: socketFile + ".stop", contents: nil)
        let result = await run.finish(timeout: .seconds(30))
        #expect(result.status == 0, "the task's heartbeats were not heard through the flood: \(result)")
        #expect(result.stderr.contains("from pid ") && result.stderr.contains("uid 65534"), "the refusal was not said: \(result.stderr)")
    }
}
