// Bad input on fd 3 (DESIGN §3): every bad line is counted and dropped, and never harms the
// task or the supervisor.

import Foundation
import Testing

/// A child that sends something bad on fd 3, then a valid progress report, then exits 0.
struct CLIBadInputCase: Sendable, CustomTestStringConvertible {
    var name: String
    /// A sh script, or a Python body (after the prelude) when `python` is true.
    var script: String
    var python = false
    var expectedErrors: Int
    var testDescription: String { name }
}

@Suite("CLI protocol errors")
struct CLIProtocolTests {
    static let cases: [CLIBadInputCase] = [
        CLIBadInputCase(name: "not JSON", script: """
            echo 'hello world' >&3
            echo '{"type":"progress",' >&3
            echo '{"type":"progress"} trailing' >&3
            printf '{"type":"progress","completed":7,"total":9}\\n' >&3
            exit 0
            """, expectedErrors: 3),
        CLIBadInputCase(name: "a 1 MiB line", script: """
            sendraw(b'{"type":"progress","title":"' + b"x" * (1 << 20) + b'"}\\n')
            send({"type": "progress", "completed": 7, "total": 9})
            sys.exit(0)
            """, python: true, expectedErrors: 1),
        CLIBadInputCase(name: "invalid UTF-8", script: """
            printf '\\377\\n' >&3
            printf '{"type":"progress","title":"\\377\\376"}\\n' >&3
            printf '{"type":"progress","completed":7,"total":9}\\n' >&3
            exit 0
            """, expectedErrors: 2),
        CLIBadInputCase(name: "unknown type", script: """
            echo '{"type":"bogus"}' >&3
            echo '{"type":"PROGRESS","completed":1}' >&3
            echo '{"completed":1}' >&3
            printf '{"type":"progress","completed":7,"total":9}\\n' >&3
            exit 0
            """, expectedErrors: 3),
        CLIBadInputCase(name: "wrong field types", script: """
            echo '{"type":"progress","completed":"five"}' >&3
            echo '{"type":"progress","title":7}' >&3
            echo '{"type":"extend","seconds":"3"}' >&3
            echo '{"type":42}' >&3
            echo '{"type":"progress","total":true}' >&3
            printf '{"type":"progress","completed":7,"total":9}\\n' >&3
            exit 0
            """, expectedErrors: 5),
        CLIBadInputCase(name: "fd 3 closed early", script: """
            printf '{"type":"progress","completed":7,"total":9}\\n' >&3
            exec 3>&-
            sleep 0.3
            echo still running
            exit 0
            """, expectedErrors: 0),
    ]

    @Test("bad input on fd 3 is counted and does not harm the task", arguments: cases)
    func badInput(_ input: CLIBadInputCase) async throws {
        let scratch = try CLIScratch()
        let command: [String]
        if input.python {
            command = ["python3", try scratch.python("child.py", input.script)]
        } else {
            command = ["sh", "-c", input.script]
        }
        let r = try await cliRun(["run", "--json", "--budget", "10s", "--"] + command, in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.int(report["protocol_errors"]) == input.expectedErrors, "\(r)")
        #expect(CLIJSON.isNull(report["cancel_reason"]), "\(r)")
        #expect(report["status"] as? String == "exited", "\(r)")
        let progress = report["progress"] as? [String: Any]
        #expect(CLIJSON.int(progress?["completed"]) == 7, "the valid report still counts: \(r)")
        #expect(CLIJSON.int(progress?["total"]) == 9, "\(r)")
        if input.expectedErrors > 0 {
            #expect(r.stderr.contains("protocol error"), "\(r)")
        }
        #expect(r.wall < .seconds(10), "\(r)")
    }

    @Test("100,000 garbage lines in a burst: all counted, only a few shown")
    func garbageBurst() async throws {
        let scratch = try CLIScratch()
        let child = try scratch.python("burst.py", """
        sendraw(b"garbage!\\n" * 100000)
        send({"type": "result", "value": "survived"})
        sys.exit(0)
        """)
        let r = try await cliRun(["run", "--json", "--budget", "30s", "--", "python3", child], in: scratch, timeout: .seconds(60))
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.int(report["protocol_errors"]) == 100_000, "\(r)")
        #expect(report["result"] as? String == "survived", "\(r)")
        let lines = r.stderrLines
        #expect(lines.count < 20, "stderr must not show every error: \(lines.count) lines")
        #expect(lines.filter { $0.contains("garbage") }.count <= 5, "only the first few shown")
        #expect(r.stderr.contains("100000"), "a summary with the total: \(r)")
        #expect(r.stdoutLines.count == 1, "stdout holds the report only")
        #expect(r.wall < .seconds(30), "\(r)")
    }

    @Test("a valid result after garbage still lands in the report")
    func resultAfterGarbage() async throws {
        let scratch = try CLIScratch()
        let script = """
        echo 'garbage' >&3
        printf '\\377\\n' >&3
        echo '{"type":"result","value":{"answer":42,"labels":["a","b"]}}' >&3
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.int(report["protocol_errors"]) == 2, "\(r)")
        let result = report["result"] as? [String: Any]
        #expect(CLIJSON.int(result?["answer"]) == 42, "\(r)")
        #expect(result?["labels"] as? [String] == ["a", "b"], "\(r)")
    }

    @Test("the last result wins")
    func lastResultWins() async throws {
        let scratch = try CLIScratch()
        let script = """
        echo '{"type":"result","value":1}' >&3
        echo '{"type":"result","value":"two"}' >&3
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(report["result"] as? String == "two", "\(r)")
        #expect(CLIJSON.int(report["protocol_errors"]) == 0, "\(r)")
    }

    @Test("unknown fields are ignored")
    func unknownFieldsIgnored() async throws {
        let scratch = try CLIScratch()
        let script = """
        echo '{"type":"progress","completed":3,"total":4,"eta":12.5,"extra":{"nested":[1,2]}}' >&3
        exit 0
        """
        let r = try await cliRun(["run", "--json", "--", "sh", "-c", script], in: scratch)
        #expect(r.status == 0, "\(r)")
        let report = try r.report()
        #expect(CLIJSON.int(report["protocol_errors"]) == 0, "\(r)")
        #expect(CLIJSON.int((report["progress"] as? [String: Any])?["completed"]) == 3, "\(r)")
    }
}
