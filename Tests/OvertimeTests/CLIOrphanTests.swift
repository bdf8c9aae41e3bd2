// The supervisor as a child subreaper (issue 6, "PID 1 and subreaper", outside a namespace):
// a task's orphans are reaped as they exit, and none is left running when it ends.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("CLI orphans")
struct CLIOrphanTests {
    @Test("a grandchild that called setsid is gone when overtime ends")
    func setsidGrandchildDoesNotOutliveTheRun() async throws {
        let scratch = try CLIScratch()
        let pids = scratch.path("pids")
        let fixture = URL(fileURLWithPath: CLIBinary.path).deletingLastPathComponent()  // .build/<triple>/debug
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("workers/fixtures/grandchildren.py").path
        let r = try await cliRun(["run", "--budget", "2s", "--grace", "1s", "--", "python3", fixture, pids], in: scratch)
        #expect(r.status == 124, "\(r)")
        let text = try String(contentsOfFile: pids, encoding: .utf8)
        let recorded = text.split(separator: "\n").compactMap { line in line.split(separator: " ").last.flatMap { Int32($0) } }
        #expect(recorded.count >= 3, "\(text)")
        for pid in recorded {
            #expect(processIsGone(pid), "grandchild \(pid) outlived overtime")
            if !processIsGone(pid) { kill(pid, SIGKILL) }
        }
    }

    @Test("100 orphans are adopted: those that exit are reaped (no zombie), the rest are killed at the end")
    func orphansAreReaped() async throws {
        let scratch = try CLIScratch()
        let ready = scratch.path("ready")
        // Each `(sleep N &)` subshell exits at once, orphaning its sleep to overtime: 50 that
        // end soon, 50 that would outlive the run.
        let script = "for i in $(seq 50); do (sleep 0.3 &); (sleep 60 &); done; echo up > \(ready); sleep 12"
        let overtime = CLIProcess(["run", "--budget", "30s", "--", "sh", "-c", script], in: scratch)
        try await overtime.start()
        #expect(await scratch.waitForFile("ready") != nil)
        // On a loaded machine the orphans may take a while to be exec'd and reparented.
        var adopted: [Int32] = []
        for _ in 0..<100 {
            adopted = Self.children(of: overtime.pid, command: "sleep")
            if adopted.count >= 50 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(0.5))  // the short sleeps (0.3 s) have ended by now
        #expect(Self.zombieChildren(of: overtime.pid).isEmpty, "zombies under overtime")
        #expect(adopted.count >= 50, "orphaned sleeps adopted by overtime: \(adopted.count)")
        overtime.signal(SIGTERM)  // end the run: the adopted long sleeps must go with it
        let r = await overtime.finish(timeout: .seconds(20))
        #expect(r.status == 143, "the task's own status after a shutdown cancel: \(r)")
        for pid in adopted where !processIsGone(pid) {
            Issue.record("adopted orphan \(pid) outlived overtime")
            kill(pid, SIGKILL)
        }
    }

    /// Live processes named `command` whose parent is `parent`.
    static func children(of parent: Int32, command: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let paren = stat.lastIndex(of: ")"), stat.contains("(\(command))") else { return false }
            let fields = stat[stat.index(after: paren)...].split(separator: " ")
            return fields.count > 1 && fields[0] != "Z" && Int32(fields[1]) == parent
        }
    }

    /// Zombie processes whose parent is `parent`.
    static func zombieChildren(of parent: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let paren = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: paren)...].split(separator: " ")
            return fields.count > 1 && fields[0] == "Z" && Int32(fields[1]) == parent
        }
    }
}
