// If the supervisor dies, even by SIGKILL, its tasks die too (issue 6, "Isolation"): the
// leader by its parent-death signal, the rest of its process group by the group guard.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI supervisor death")
struct CLISupervisorDeathTests {
    /// A task that writes its own pid and a same-group child's pid, then waits.
    static func family(_ scratch: CLIScratch, _ name: String) -> [String] {
        let file = scratch.path(name)
        return ["sh", "-c", "sleep 300 & echo \"$$ $!\" > \(file).tmp; mv \(file).tmp \(file); wait"]
    }

    /// What /proc says of `pid`, for a failure message.
    static func describe(_ pid: Int32) -> String {
        ((try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? "gone").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func pids(_ text: String?) -> [Int32] {
        (text ?? "").split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }
    }

    @Test("SIGKILL of overtime run: the task and its group's other processes are gone within 2 s")
    func runKilled() async throws {
        let scratch = try CLIScratch()
        let p = CLIProcess(["run", "--progress", "none", "--budget", "10m", "--"] + Self.family(scratch, "pids"), in: scratch)
        try await p.start()
        let pids = Self.pids(await scratch.waitForFile("pids"))
        #expect(pids.count == 2, "the task never reported its pids")
        p.signal(SIGKILL)
        let r = await p.finish(timeout: .seconds(10))
        #expect(r.diedOfSignal && r.status == 128 + SIGKILL, "\(r)")
        for pid in pids {
            #expect(await CLIProcessTable.waitDead(pid, timeout: .seconds(2)),
                    "pid \(pid) outlived its supervisor by 2 s: \(Self.describe(pid)); overtime's stderr: \(r.stderr)")
        }
    }

    @Test("the guard answers to neither the supervisor's name nor its command line: it is called task-guard")
    func guardHasItsOwnName() async throws {
        let scratch = try CLIScratch()
        let p = CLIProcess(["run", "--progress", "none", "--budget", "10m", "--"] + Self.family(scratch, "pids"), in: scratch)
        try await p.start()
        #expect(Self.pids(await scratch.waitForFile("pids")).count == 2, "the task never reported its pids")
        // The children of overtime, from each of its threads' lists, with their names and
        // command lines, read while it runs: from its exec the guard's command line is its
        // own, and each look must find nothing named like the supervisor; its name is
        // task-guard once it has set itself up (the CLI's guard is the binary run again, not
        // waited for), which the looks wait for, 2 s at most.
        var found: [(pid: Int32, comm: String, words: [String])] = []
        for _ in 0..<100 {
            found = []
            for thread in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(p.pid)/task")) ?? [] {
                let list = (try? String(contentsOfFile: "/proc/\(p.pid)/task/\(thread)/children", encoding: .utf8)) ?? ""
                for pid in list.split(separator: " ").compactMap({ Int32($0) }) {
                    let comm = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
                    let line = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
                    found.append((pid, comm, String(decoding: line, as: UTF8.self).split(separator: "\0").map(String.init)))
                }
            }
            #expect(!found.contains { $0.comm.hasPrefix("overtime") || $0.words.first?.contains("overtime") == true },
                    "nothing else of overtime's is named like it: \(found)")
            if found.contains(where: { $0.comm == "task-guard\n" }) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        p.signal(SIGTERM)
        _ = await p.finish(timeout: .seconds(20))
        let guards = found.filter { $0.comm == "task-guard\n" }
        #expect(guards.count == 1, "overtime's children: \(found)")
        #expect(guards.first?.words == ["task-guard \(p.pid)"], "the guard's command line: \(guards)")
    }

    /// The pid of `supervisor`'s child named task-guard, if it has one within 2 s (a guard
    /// takes that name as it sets itself up).
    static func guardPID(of supervisor: Int32) async -> Int32? {
        for _ in 0..<100 {
            for thread in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(supervisor)/task")) ?? [] {
                let list = (try? String(contentsOfFile: "/proc/\(supervisor)/task/\(thread)/children", encoding: .utf8)) ?? ""
                for pid in list.split(separator: " ").compactMap({ Int32($0) })
                where (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "task-guard\n" && !CLIProcessTable.isDead(pid) {
                    return pid
                }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    @Test("a guard killed from outside is replaced and the supervisor says so; a SIGKILL after that still takes the task's group")
    func guardReplaced() async throws {
        let scratch = try CLIScratch()
        let p = CLIProcess(["run", "--progress", "plain", "--budget", "10m", "--"] + Self.family(scratch, "pids"), in: scratch)
        try await p.start()
        let pids = Self.pids(await scratch.waitForFile("pids"))
        #expect(pids.count == 2, "the task never reported its pids")
        let first = try #require(await Self.guardPID(of: p.pid), "no guard")
        kill(first, SIGKILL)
        // A new one, with another pid.
        var second: Int32?
        for _ in 0..<100 {
            if let pid = await Self.guardPID(of: p.pid), pid != first { second = pid; break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(second != nil, "no new guard after the first was killed")
        p.signal(SIGKILL)
        let r = await p.finish(timeout: .seconds(10))
        #expect(r.stderr.contains("the task guard died; a new one guards every running task"), "\(r)")
        for pid in pids {
            #expect(await CLIProcessTable.waitDead(pid, timeout: .seconds(2)),
                    "pid \(pid) outlived its supervisor, whose first guard was killed: \(Self.describe(pid))")
        }
    }

    @Test("SIGKILL of overtime batch: every running task's group is gone within 2 s")
    func batchKilled() async throws {
        let scratch = try CLIScratch()
        let tasks: [[String: Any]] = (1...3).map { i in
            ["name": "t\(i)", "command": Self.family(scratch, "pids\(i)"), "budget": "10m"]
        }
        let job = try JSONSerialization.data(withJSONObject: ["concurrency": 3, "tasks": tasks])
        try scratch.write("job.json", String(decoding: job, as: UTF8.self))
        let p = CLIProcess(["batch", "--progress", "none", scratch.path("job.json"), "--run-dir", scratch.path("run")], in: scratch)
        try await p.start()
        var pids: [Int32] = []
        for i in 1...3 { pids += Self.pids(await scratch.waitForFile("pids\(i)")) }
        #expect(pids.count == 6, "not every task reported its pids: \(pids)")
        p.signal(SIGKILL)
        _ = await p.finish(timeout: .seconds(10))
        for pid in pids {
            #expect(await CLIProcessTable.waitDead(pid, timeout: .seconds(2)), "pid \(pid) outlived its supervisor by 2 s")
        }
    }

    @Test("the guard is a process of its own while tasks run, and goes when the supervisor exits normally")
    func guardGoesWithANormalExit() async throws {
        let scratch = try CLIScratch()
        // The task lists its supervisor's children (each thread's list: the loop thread
        // spawned both), and their names.
        // (Looked at again for up to 2 s, until the guard has named itself.)
        let script = "for i in $(seq 100); do grep -qx task-guard $(for c in $(cat /proc/$PPID/task/*/children); do echo /proc/$c/comm; done) && break; sleep 0.02; done; "
            + "for c in $(cat /proc/$PPID/task/*/children); do echo \"$c $(cat /proc/$c/comm)\"; done"
        let r = try await cliRun(["run", "--progress", "none", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let guardLine = r.stdout.split(separator: "\n").first { $0.hasSuffix(" task-guard") }
        let guardPID = try #require(guardLine.flatMap { Int32($0.split(separator: " ")[0]) }, "no guard among \(r.stdout)")
        #expect(await CLIProcessTable.waitDead(guardPID, timeout: .seconds(2)), "the guard outlived a normal exit")
    }
}
