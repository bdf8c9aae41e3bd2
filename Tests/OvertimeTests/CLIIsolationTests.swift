// What a task inherits (issue 6, "Isolation"): a clean signal state even when Overtime
// itself was started with signals blocked and ignored, and no descriptor beyond 0-3.

import Foundation
import Testing

@Suite("CLI isolation")
struct CLIIsolationTests {
    @Test("the task starts with nothing blocked or ignored, whatever overtime inherited")
    func cleanSignalState() async throws {
        let scratch = try CLIScratch()
        let status = scratch.path("status")
        // The shell ignores HUP, USR1 and PIPE and blocks nothing; CLIProcess blocks USR2 and
        // TERM. Overtime inherits all of that; its task must inherit none of it.
        let inner = "grep -E '^Sig(Blk|Ign)' /proc/self/status > \(status)"
        let script = "trap '' HUP USR1 PIPE; exec \(CLIBinary.path) run -- sh -c \"\(inner)\""
        let process = CLIProcess(["-c", script], executable: "/bin/sh", blockedSignals: [SIGUSR2, SIGTERM], in: scratch)
        try await process.start()
        let r = await process.finish(timeout: .seconds(20))
        #expect(r.status == 0, "\(r)")
        let lines = (scratch.read("status") ?? "").split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(lines)")
        for line in lines {
            let mask = line.split(whereSeparator: { $0 == ":" || $0 == "\t" || $0 == " " }).last.map(String.init) ?? "?"
            #expect(UInt64(mask, radix: 16) == 0, "the task's \(line)")
        }
    }
}
