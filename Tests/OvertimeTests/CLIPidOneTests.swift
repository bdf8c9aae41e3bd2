// Overtime as PID 1 of a new PID namespace (issue 6; `unshare --pid --fork --mount-proc`),
// as a container entrypoint runs it: orphans reaped, `kill -TERM 1` a shutdown cancel the
// task hears, the child's exit status passed through.

import Foundation
import Testing

/// Whether this machine lets us make a PID namespace (root, or a kernel allowing it).
private let namespacesWork: Bool = {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
    process.arguments = ["--pid", "--fork", "--mount-proc", "true"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}()

@Suite("CLI as PID 1", .serialized,
       .enabled(if: namespacesWork, "needs `unshare --pid --fork --mount-proc` (root or user namespaces); not available here"))
struct CLIPidOneTests {
    /// `overtime run ARGS` as PID 1 of a fresh PID namespace.
    func runAsPidOne(_ arguments: [String], in scratch: CLIScratch) async throws -> CLIResult {
        let process = CLIProcess(["--pid", "--fork", "--mount-proc", CLIBinary.path, "run", "--progress", "none"] + arguments,
                                 executable: "/usr/bin/unshare", in: scratch)
        try await process.start()
        return await process.finish(timeout: .seconds(30))
    }

    @Test("orphans are reaped: no zombie while the task runs")
    func reapsOrphans() async throws {
        let scratch = try CLIScratch()
        let count = scratch.path("zombies")
        let script = "for i in $(seq 30); do (sleep 0.2 &); done; sleep 1.5; ps -eo stat= | grep -c '^Z' > \(count); exit 0"
        let r = try await runAsPidOne(["--budget", "10s", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(scratch.read("zombies")?.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "zombies: \(scratch.read("zombies") ?? "?")")
    }

    @Test("kill -TERM 1 is a shutdown cancel the task hears on fd 3")
    func termToPidOne() async throws {
        let scratch = try CLIScratch()
        let seen = scratch.path("seen")
        let script = """
        trap 'while read -r line <&3; do case $line in *cancel*) echo "$line" > \(seen); exit 0;; esac; done; exit 9' TERM
        kill -TERM 1
        while :; do sleep 0.1 & wait $!; done
        """
        let r = try await runAsPidOne(["--budget", "10s", "--grace", "5s", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "a shutdown cancel the task survives cleanly: its own status. \(r)")
        #expect(scratch.read("seen")?.contains("\"reason\":\"shutdown\"") == true, "seen: \(scratch.read("seen") ?? "nothing")")
    }

    @Test("the child's exit status passes through", arguments: [0, 1, 3, 124, 137, 255])
    func exitStatus(code: Int) async throws {
        let scratch = try CLIScratch()
        let r = try await runAsPidOne(["--", "sh", "-c", "exit \(code)"], in: scratch)
        #expect(r.status == Int32(code), "\(r)")
    }

    @Test("a death by a signal Overtime did not send is 128+N")
    func deathBySignal() async throws {
        let scratch = try CLIScratch()
        let r = try await runAsPidOne(["--", "sh", "-c", "kill -SEGV $$"], in: scratch)
        #expect(r.status == 139, "\(r)")
    }

    @Test("settled, it hands back its program's code: what stays mapped is what it touches since")
    func releasesProgramCodeOnceSettled() async throws {
        let scratch = try CLIScratch()
        // The task reads PID 1's mappings of its own executable (the namespace's /proc): the
        // code resident as the task starts, when start-up's pages are still mapped (the
        // release comes a second after the loop starts, and the loop starts before the
        // task), and again 2.5 s later, past that second with PID 1 idle since.
        let script = #"""
        exe=$(readlink /proc/1/exe)
        code() { awk -v exe="$exe" '/^[0-9a-f]+-[0-9a-f]+ / { m = ($2 ~ /x/ && $6 == exe) } m && /^Rss:/ { s += $2 } END { print s + 0 }' /proc/1/smaps; }
        code > \#(scratch.path("early"))
        sleep 2.5; code > \#(scratch.path("late"))
        """#
        let r = try await runAsPidOne(["--budget", "20s", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let early = Int(scratch.read("early")?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
        let late = Int(scratch.read("late")?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
        #expect((early ?? 0) > 0, "PID 1's code resident as the task started: \(early.map { "\($0) KiB" } ?? "unread")")
        if let early, let late {
            #expect(late * 2 < early, "PID 1's code resident: \(early) KiB as the task started, \(late) KiB 2.5 s later; settled, it should have handed most of it back")
        } else {
            Issue.record("the resident code was not read: early \(String(describing: early)), late \(String(describing: late))")
        }
    }
}
