// What a task runs as and with (issue 6, "Isolation"): --user/--group seen from outside in
// /proc/<pid>/status, a failed drop that never runs the task, each resource limit and the
// nice value seen by the task itself, the same from a job file, and the command looked up
// on the task's own PATH. The tests run as root; a throw-away user comes from useradd.

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

@Suite("CLI privileges and limits")
struct CLIPrivilegeTests {
    /// The `Name:\tvalue` lines of a /proc status file, by name.
    static func statusFields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }

    @Test("--user drops to the user's uid and primary gid with no supplementary groups, seen in /proc/<pid>/status; HOME and USER follow")
    func userDropSeenFromOutside() async throws {
        try await CLICtlUserTests.withUser { user in
            let scratch = try CLIScratch()
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: scratch.url.path)
            let script = "echo \"$HOME $USER\" > \(scratch.path("env")); echo $$ > \(scratch.path("pid.tmp")); mv \(scratch.path("pid.tmp")) \(scratch.path("pid")); exec sleep 30"
            let p = CLIProcess(["run", "--progress", "none", "--user", user.name, "--", "sh", "-c", script], in: scratch)
            try await p.start()
            let pidText = try #require(await scratch.waitForFile("pid"), "the task never started")
            let pid = try #require(Int32(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))
            // exec sleep keeps the pid; read the status the kernel reports for it.
            try await Task.sleep(for: .milliseconds(200))
            let status = Self.statusFields((try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? "")
            p.signal(SIGTERM)
            let r = await p.finish(timeout: .seconds(20))
            #expect(status["Uid"] == "\(user.uid)\t\(user.uid)\t\(user.uid)\t\(user.uid)", "\(status)")
            #expect(status["Gid"] == "\(user.gid)\t\(user.gid)\t\(user.gid)\t\(user.gid)", "\(status)")
            #expect(status["Groups"] == "", "supplementary groups cleared: \(status)")
            let home = try #require(CLICtlUser.passwordEntry(user.name)).home
            #expect(scratch.read("env") == "\(home) \(user.name)\n", "HOME and USER are the user's: \(scratch.read("env") ?? "nothing")")
            #expect(r.status == 143, "cancelled for shutdown, the task died of the SIGTERM: \(r)")
        }
    }

    @Test("--group alone changes the group and clears supplementary groups, keeping the uid")
    func groupOnly() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--progress", "none", "--group", "65534", "--", "grep", "-E", "^(Uid|Gid|Groups):", "/proc/self/status"],
                                 in: scratch)
        #expect(r.status == 0, "\(r)")
        let status = Self.statusFields(r.stdout)
        #expect(status["Uid"]?.hasPrefix("\(geteuid())\t") == true, "\(r.stdout)")
        #expect(status["Gid"] == "65534\t65534\t65534\t65534", "\(r.stdout)")
        #expect(status["Groups"] == "", "\(r.stdout)")
    }

    @Test("a drop that fails (not root, asking for root) is a spawn error, exit 125, and the task never runs")
    func failedDropNeverRunsTheTask() async throws {
        try await CLICtlUserTests.withUser { user in
            let scratch = try CLIScratch()
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: scratch.url.path)
            let marker = scratch.path("ran")
            let p = CLIProcess(user.setprivArguments + [CLIBinary.path, "run", "--progress", "plain", "--user", "root",
                                                        "--", "touch", marker],
                               executable: CLICtlUser.setpriv, environment: user.environment, in: scratch)
            try await p.start()
            let r = await p.finish(timeout: .seconds(20))
            #expect(r.status == 125, "\(r)")
            #expect(r.stderr.contains("cannot run as user root: "), "\(r)")
            #expect(!FileManager.default.fileExists(atPath: marker), "the task ran although the drop failed")
        }
    }

    @Test("an unknown user or group, a bad limit or nice value is a usage error naming the option")
    func badValues() async throws {
        let scratch = try CLIScratch()
        let cases: [([String], String)] = [
            (["--user", "no-such-user-here"], "--user: no such user: no-such-user-here"),
            (["--group", "no-such-group-here"], "--group: no such group: no-such-group-here"),
            (["--limit-as", "12Q"], "--limit-as: '12Q' is not a limit"),
            (["--limit-nofile", "20:10"], "--limit-nofile: '20:10': the soft limit is above the hard limit"),
            (["--limit-cpu", "soon"], "--limit-cpu: 'soon' is not a limit"),
            (["--nice", "40"], "--nice: '40' is not a nice value"),
        ]
        for (options, message) in cases {
            let r = try await cliRun(["run"] + options + ["--", "true"], in: scratch)
            #expect(r.status == 125 && r.stderr.contains(message), "\(options): \(r)")
        }
    }

    @Test("each limit and the nice value are what the task sees in /proc/self/limits and /proc/self/stat")
    func limitsSeenByTheTask() async throws {
        let scratch = try CLIScratch()
        let r = try await cliRun(["run", "--progress", "none",
                                  "--limit-as", "3G", "--limit-nofile", "200:300", "--limit-cpu", "1h", "--limit-nproc", "4000",
                                  "--nice", "7",
                                  "--", "sh", "-c", "cat /proc/self/limits; echo nice $(cut -d' ' -f19 /proc/self/stat)"],
                                 in: scratch)
        #expect(r.status == 0, "\(r)")
        func limit(_ name: String) -> [String] {
            guard let line = r.stdout.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return [] }
            return line.dropFirst(name.count).split(separator: " ").map(String.init)
        }
        #expect(limit("Max address space").prefix(2) == ["3221225472", "3221225472"], "\(r.stdout)")
        #expect(limit("Max open files").prefix(2) == ["200", "300"], "\(r.stdout)")
        #expect(limit("Max cpu time").prefix(2) == ["3600", "3600"], "\(r.stdout)")
        #expect(limit("Max processes").prefix(2) == ["4000", "4000"], "\(r.stdout)")
        #expect(r.stdout.contains("nice 7\n"), "\(r.stdout)")
    }

    @Test("limits bite: over --limit-nofile open fails, --limit-cpu ends a busy loop with SIGXCPU")
    func limitsBite() async throws {
        let scratch = try CLIScratch()
        let files = try await cliRun(["run", "--progress", "none", "--limit-nofile", "8", "--", CLIBatchWorker.python, "-c",
                                      "import os\nfds=[]\ntry:\n    while True: fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError as e: print('opened', len(fds), e.errno)"],
                                     in: scratch)
        #expect(files.status == 0 && files.stdout.hasPrefix("opened ") && files.stdout.hasSuffix(" 24\n"), "EMFILE: \(files)")
        let cpu = try await cliRun(["run", "--progress", "none", "--json", "--limit-cpu", "1:3", "--", "sh", "-c", "while :; do :; done"],
                                   in: scratch, timeout: .seconds(60))
        #expect(cpu.status == 128 + SIGXCPU, "died of SIGXCPU after a second of CPU: \(cpu)")
    }

    @Test("a limit the kernel refuses is a spawn error naming it, exit 125; the task never runs")
    func refusedLimit() async throws {
        let scratch = try CLIScratch()
        let marker = scratch.path("ran")
        // Above fs.nr_open (at most 2^30 on Linux): refused even to root.
        let r = try await cliRun(["run", "--progress", "plain", "--limit-nofile", "2147483647", "--", "touch", marker], in: scratch)
        #expect(r.status == 125 && r.stderr.contains("cannot set the nofile limit"), "\(r)")
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test("the command is looked up on the task's own PATH; with --clean-env and no PATH, on /usr/local/bin:/usr/bin:/bin")
    func searchPath() async throws {
        let scratch = try CLIScratch()
        let bin = scratch.path("bin")
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let tool = bin + "/overtime-test-tool"
        try "#!/bin/sh\necho found-on-task-path\n".write(toFile: tool, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: tool)
        let own = try await cliRun(["run", "--progress", "none", "--env", "PATH=\(bin):/usr/bin:/bin", "--", "overtime-test-tool"], in: scratch)
        #expect(own.status == 0 && own.stdout == "found-on-task-path\n", "\(own)")
        let missing = try await cliRun(["run", "--progress", "none", "--", "overtime-test-tool"], in: scratch)
        #expect(missing.status == 127, "not on the supervisor's PATH: \(missing)")
        let clean = try await cliRun(["run", "--progress", "none", "--clean-env", "--", "env"], in: scratch)
        #expect(clean.status == 0 && !clean.stdout.contains("PATH="), "found on the default path, and given no PATH: \(clean)")
    }

    @Test("job-file user, limits, nice and clean-env reach each task, defaults merged field by field")
    func jobFileFields() async throws {
        try await CLICtlUserTests.withUser { user in
            let scratch = try CLIScratch()
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: scratch.url.path)
            let report = "grep -E '^(Uid|Groups):' /proc/self/status; grep -E '^Max (open files|address space)' /proc/self/limits; echo nice $(cut -d' ' -f19 /proc/self/stat); echo path $(tr '\\\\0' '\\\\n' < /proc/$$/environ | grep -c ^PATH=)"
            let job = """
            {"defaults": {"user": "\(user.name)", "limits": {"nofile": 64, "as": "2G"}, "nice": 3, "clean-env": true},
             "tasks": [
               {"name": "own", "command": ["sh", "-c", "\(report)"], "limits": {"nofile": "32:48"}, "nice": 9},
               {"name": "root", "command": ["sh", "-c", "\(report)"], "user": 0, "clean-env": false}
             ]}
            """
            try job.write(toFile: scratch.path("job.json"), atomically: true, encoding: .utf8)
            let r = try await cliRun(["batch", "--progress", "plain", scratch.path("job.json"), "--run-dir", scratch.path("run")], in: scratch)
            #expect(r.status == 0, "\(r)")
            let own = scratch.read("run/logs/own.log") ?? ""
            let root = scratch.read("run/logs/root.log") ?? ""
            #expect(own.contains("Uid:\t\(user.uid)\t") && own.range(of: #"Groups:\s*\n"#, options: .regularExpression) != nil, "\(own)")
            #expect(own.range(of: #"Max open files\s+32\s+48"#, options: .regularExpression) != nil, "\(own)")
            #expect(own.range(of: #"Max address space\s+2147483648\s+2147483648"#, options: .regularExpression) != nil, "\(own)")
            #expect(own.contains("nice 9\n") && own.contains("path 0\n"), "\(own)")
            #expect(root.contains("Uid:\t0\t") && root.contains("nice 3\n") && root.contains("path 1\n"), "\(root)")
            #expect(root.range(of: #"Max open files\s+64\s+64"#, options: .regularExpression) != nil, "\(root)")
        }
    }
}
