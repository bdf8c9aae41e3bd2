// The live display as a person sees it: `overtime` runs inside a detached tmux session of a
// fixed size, and the tests read the screen with `capture-pane` (with `-e` for colour) and
// the cursor's visibility with `#{cursor_flag}`, polling until what should appear does.
//
// Each session runs `sh -c 'overtime …; echo "[overtime exited N]"; sleep'`: the shell
// stays, so the pane (and its cursor state) is still there to read once overtime is gone,
// as it would be at a user's prompt.

import Foundation
import OvertimeTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif


/// One tmux session on a tmux server private to this test process.
final class DisplayTmux: @unchecked Sendable {
    static let executable: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") + ["/usr/bin", "/usr/local/bin"] {
            let candidate = "\(directory)/tmux"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }()

    static var available: Bool { executable != nil }

    /// The server's socket: one per test process, so nothing here touches a user's tmux.
    static let socket = "/tmp/overtime-display-tests-\(getpid()).tmux"

    let name: String
    let scratch: CLIScratch
    /// What `waitFor` saw last, for messages when it gives up.
    private(set) var lastScreen: [String] = []

    init(_ label: String, scratch: CLIScratch) {
        name = "\(label)-\(UUID().uuidString.prefix(6))"
        self.scratch = scratch
    }

    /// Runs `tmux ARGS` and returns its stdout. Not through `CLIProcess`: its gate is shared
    /// with every CLI suite, and a screen must be read while the display is up, not when a
    /// permit frees.
    @discardableResult
    func tmux(_ arguments: [String]) async throws -> String {
        let argv = [Self.executable!, "-S", Self.socket, "-f", "/dev/null"] + arguments
        let result = try await offThePool { try Self.run(argv) }
        guard result.status == 0 else {
            throw CLIFailure("tmux \(arguments.joined(separator: " ")): exit \(result.status): \(result.error)")
        }
        return result.output
    }

    /// Spawns `argv` with an empty signal mask and default signal actions (tmux's server,
    /// started by the first command, passes both on to the panes), reads its stdout and
    /// stderr to the end, and waits for it.
    private static func run(_ argv: [String]) throws -> (status: Int32, output: String, error: String) {
        // Close-on-exec from the start (a socket pair, not pipe + fcntl): tests spawn
        // processes concurrently, and none may inherit these.
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &out) == 0 else { throw CLIFailure("socketpair: errno \(errno)") }
        guard socketpair(AF_UNIX, type, 0, &err) == 0 else {
            close(out[0]); close(out[1])
            throw CLIFailure("socketpair: errno \(errno)")
        }
        defer { close(out[0]); close(err[0]) }
        let started = Result { try CLISpawn.start(argv, environment: serverEnvironment, stdout: out[1], stderr: err[1]) }
        close(out[1])
        close(err[1])
        let pid = try started.get()
        func drain(_ fd: Int32) -> String {
            var data = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                data += buffer[0..<n]
            }
            return String(decoding: data, as: UTF8.self)
        }
        let output = drain(out[0])
        let error = drain(err[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        return ((status >> 8) & 0xff, output, error)
    }

    /// The environment the server (and so every pane) starts from: the test's, with the
    /// display's knobs cleared; each test sets what it needs in its command.
    static let serverEnvironment: [String: String] = {
        var env = ProcessInfo.processInfo.environment
        for key in ["NO_COLOR", "LC_ALL", "LC_CTYPE", "TMUX", "TMUX_PANE", "COLUMNS", "LINES"] { env[key] = nil }
        env["LANG"] = "C.UTF-8"
        env["TERM"] = "xterm-256color"
        return env
    }()

    /// Starts `command` (a shell command line) in a new detached session of this size.
    func start(_ command: String, width: Int = 100, height: Int = 30) async throws {
        // The shell catches SIGINT (so Ctrl-C does not end it), which leaves overtime's own
        // SIGINT at its default, as at an interactive prompt.
        let wrapped = "trap : INT; \(command); echo \"[overtime exited $?]\"; sleep 600"
        let arguments = ["new-session", "-d", "-s", name, "-x", String(width), "-y", String(height), "sh", "-c", wrapped]
        // The suites share one tmux server, which exits when its last session ends: a new
        // session that reaches a server on its way out is told "server exited unexpectedly"
        // and, started again, gets a new server. Anything else is a failure at once.
        for attempt in 1...3 {
            do {
                try await tmux(arguments)
                return
            } catch let failure as CLIFailure where failure.description.contains("server exited unexpectedly") && attempt < 3 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// The visible screen (with `history`, the scrollback too), one string per line.
    func screen(escapes: Bool = false, history: Bool = false) async throws -> [String] {
        var arguments = ["capture-pane", "-p", "-t", name]
        if escapes { arguments.append("-e") }
        if history { arguments += ["-S", "-"] }
        var lines = try await tmux(arguments).components(separatedBy: "\n")
        while lines.last?.trimmingCharacters(in: .whitespaces).isEmpty == true { lines.removeLast() }
        return lines
    }

    /// Polls the screen until `condition` holds; returns that screen, or nil after `timeout`.
    func waitFor(_ timeout: Duration = .seconds(20), escapes: Bool = false, history: Bool = false,
                 _ condition: ([String]) -> Bool) async throws -> [String]? {
        let clock = ContinuousClock()
        let end = clock.now + timeout
        while clock.now < end {
            let lines = try await screen(escapes: escapes, history: history)
            lastScreen = lines
            if condition(lines) { return lines }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// Waits for overtime to exit; returns its exit status as the shell saw it.
    func waitForExit(_ timeout: Duration = .seconds(30)) async throws -> Int? {
        guard let lines = try await waitFor(timeout, history: true, { $0.contains { $0.hasPrefix("[overtime exited ") } }) else { return nil }
        let line = lines.first { $0.hasPrefix("[overtime exited ") }!
        return Int(line.dropFirst("[overtime exited ".count).dropLast())
    }

    func cursorVisible() async throws -> Bool {
        try await tmux(["display-message", "-p", "-t", name, "#{cursor_flag}"]).trimmingCharacters(in: .whitespacesAndNewlines) == "1"
    }

    func paneWidth() async throws -> Int {
        Int(try await tmux(["display-message", "-p", "-t", name, "#{pane_width}"]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    func resize(width: Int) async throws {
        try await tmux(["resize-window", "-t", name, "-x", String(width)])
    }

    func keys(_ keys: String...) async throws {
        try await tmux(["send-keys", "-t", name] + keys)
    }

    /// Ends the session; once no session is left the server exits, and its socket goes too.
    func kill() async {
        _ = try? await tmux(["kill-session", "-t", name])
        if (try? await tmux(["list-sessions"])) == nil { unlink(Self.socket) }
    }

    /// Runs `body` with a fresh session, killed afterwards whatever happens.
    static func with(_ label: String, scratch: CLIScratch, _ body: (DisplayTmux) async throws -> Void) async throws {
        let tmux = DisplayTmux(label, scratch: scratch)
        do {
            try await body(tmux)
        } catch {
            await tmux.kill()
            throw error
        }
        await tmux.kill()
    }
}

/// Quotes a word for `sh`.
private func sq(_ word: String) -> String {
    "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// The percentages shown on a screen's rows (`45%`).
private func percents(_ lines: [String]) -> [Int] {
    lines.compactMap { line -> Int? in
        guard let range = line.range(of: #"\d{1,3}%"#, options: .regularExpression) else { return nil }
        return Int(line[range].dropLast())
    }
}

/// Lines that look like a live row of task `name`: its name, a percent, the time left.
private func rows(_ lines: [String], _ name: String) -> [String] {
    lines.filter { $0.hasPrefix(name) && $0.contains("%") }
}

@Suite("Display under tmux", .serialized, .enabled(if: DisplayTmux.available, "tmux is not installed"))
struct DisplayTmuxTests {
    let overtime = sq(CLIBinary.path)
    let progressScript = sq(Checkout.path("workers/shell/progress.sh"))

    @Test("run: the bar advances, the child's output shows above it, a summary ends it, and the cursor comes back")
    func runAdvancesAndEnds() async throws {
        let scratch = try CLIScratch()
        try await DisplayTmux.with("advance", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name resize -- sh \(progressScript) 48")

            let first = try #require(try await tmux.waitFor { lines in rows(lines, "resize").contains { $0.contains("left ") } },
                                     "no live row appeared")
            let firstPercent = try #require(percents(rows(first, "resize")).first, "\(first)")
            #expect(rows(first, "resize").count == 1, "one row for one task: \(first)")
            let row = rows(first, "resize")[0]
            #expect(row.contains("█") || row.contains("░"), "a Unicode bar: \(row)")
            #expect(try await tmux.cursorVisible() == false, "the cursor is hidden while the row is up")

            // Growth still to come: on a loaded machine the first row seen may already be far
            // along (79% of 24 items once, in a full parallel run: hence 48 items, 12 s), and
            // past 80% a rise of 20 may end with the task before a screen shows it.
            let rise = max(1, min(20, (100 - firstPercent) / 2))
            let later = try await tmux.waitFor { lines in
                (percents(rows(lines, "resize")).first ?? 0) >= firstPercent + rise
            }
            #expect(later != nil, "the percent never grew past \(firstPercent)%")
            if let later {
                #expect(rows(later, "resize").count == 1, "still one row, redrawn in place: \(later)")
                #expect(later.contains { $0.contains("Resizing images") }, "the title: \(later)")
            }

            let status = try await tmux.waitForExit()
            #expect(status == 0)
            let end = try await tmux.screen(history: true)
            #expect(end.contains("resized 48 images"), "the child's own stdout, whole: \(end)")
            #expect(end.contains { $0.hasPrefix("✓ resize: succeeded in") }, "\(end)")
            #expect(end.contains { $0.hasPrefix("✓ done: 1 of 1 succeeded") && $0.hasSuffix("; exit 0") }, "\(end)")
            #expect(rows(end, "resize").isEmpty, "the row is gone at the end: \(end)")
            #expect(try await tmux.cursorVisible() == true, "the cursor is shown again after exit")
        }
    }

    @Test("run: a task that stalls under a short budget gets a cancelled line with its reason")
    func cancelledLine() async throws {
        let scratch = try CLIScratch()
        let script = try scratch.write("stall.sh", """
        printf '{"type":"progress","completed":3,"total":10,"title":"Downloading"}\\n' >&3
        echo "stall: waiting on a server that never answers"
        trap 'echo "stall: cancelled, cleaning up" >&2; exit 1' TERM
        while true; do sleep 1 & wait $!; done
        """)
        try await DisplayTmux.with("cancel", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name stall --budget 1s --grace 3s -- sh \(sq(script))")

            let status = try await tmux.waitForExit()
            #expect(status == 124, "cancelled for timeout, exited within grace")
            let end = try await tmux.screen(history: true)
            // The notice says what went quiet; on a narrow screen it wraps.
            #expect(end.contains { $0.hasPrefix("! stall: cancelling (timeout: no progress within its budget: last progress") }, "\(end)")
            #expect(end.contains { $0.hasPrefix("✗ stall: cancelled (timeout") && $0.hasSuffix("exit 124") }, "\(end)")
            #expect(end.contains("stall: waiting on a server that never answers"), "\(end)")
            #expect(end.contains("stall: cancelled, cleaning up"), "stderr after the cancel, above the rows: \(end)")
            #expect(end.contains { $0.contains("done: 0 of 1 succeeded") && $0.contains("cancelled: timeout") }, "\(end)")
            #expect(try await tmux.cursorVisible() == true)
        }
    }

    @Test("run --progress plain on a terminal: a line of ours clears the task's open bar line, as tqdm.write does")
    func plainLineOverOpenBar() async throws {
        let scratch = try CLIScratch()
        let script = try scratch.write("bar.sh", """
        printf '\\rdrawing 10%%' >&2
        printf '{"type":"progress","completed":1,"total":10,"title":"Epoch"}\\n' >&3
        sleep 1.5
        printf '\\rdrawing 20%%\\n' >&2
        sleep 0.2
        """)
        try await DisplayTmux.with("plainbar", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --progress plain --name bar -- sh \(sq(script))")
            let status = try await tmux.waitForExit()
            #expect(status == 0)
            let end = try await tmux.screen(history: true)
            #expect(end.contains { $0.hasSuffix("overtime: bar: 10% (1/10) Epoch") && $0.range(of: #"^\d\d:\d\d:\d\d "#, options: .regularExpression) != nil },
                    "our line at the start of its own line: \(end)")
            #expect(!end.contains { $0.contains("drawing 10%") && $0.contains("overtime:") }, "not glued to the bar: \(end)")
            #expect(end.contains { $0.hasPrefix("drawing 20%") }, "the bar draws again below it: \(end)")
            #expect(!end.contains { $0.contains("drawing 10%") }, "its open line was cleared, not pushed down: \(end)")
        }
    }

    @Test("run: the task's output goes through a terminal the size of ours: Python's unflushed prints show at once, a resize reaches it")
    func taskSeesATerminal() async throws {
        let scratch = try CLIScratch()
        // No flush anywhere: on a pipe, Python would hold every line until it exits.
        let script = try scratch.write("tty.py", """
        import os, signal, time
        signal.signal(signal.SIGWINCH, lambda *a: print("resized to", os.get_terminal_size(1).columns))
        print("early", os.isatty(0), os.isatty(1), os.isatty(2), os.get_terminal_size(2).columns)
        open(\(sq(scratch.path("printed"))), "w").close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not os.path.exists(\(sq(scratch.path("stop")))):
            time.sleep(0.05)
        print("late")
        """)
        try await DisplayTmux.with("tty", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name tty -- python3 \(sq(script))", width: 100, height: 20)
            #expect(await scratch.waitForFile("printed") != nil, "the task never ran")
            let early = try await tmux.waitFor { $0.contains("early True True True 100") }
            #expect(early != nil, "the line printed before the wait is on the screen while the task still runs: \(tmux.lastScreen)")
            try await tmux.resize(width: 70)
            let resized = try await tmux.waitFor { $0.contains("resized to 70") }
            #expect(resized != nil, "the task saw the new width: \(tmux.lastScreen)")
            try scratch.write("stop", "")
            #expect(try await tmux.waitForExit() == 0)
            let end = try await tmux.screen(history: true)
            #expect(end.contains("late") && end.contains { $0.hasPrefix("✓ tty: succeeded") }, "\(end)")
        }
    }

    @Test("run: a task that only sends heartbeats shows its time left past its first budget, renewed by each")
    func heartbeatsOnly() async throws {
        let scratch = try CLIScratch()
        let script = try scratch.write("beats.sh", """
        i=0
        while [ $i -lt 12 ]; do printf '{"type":"heartbeat"}\n' >&3; sleep 0.5; i=$((i+1)); done
        """)
        try await DisplayTmux.with("beats", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name beats --budget 2s -- sh \(sq(script))")
            // Past the first budget (2 s), the row still counts down from the last heartbeat.
            try await Task.sleep(for: .seconds(3))
            let screen = try #require(try await tmux.waitFor { lines in
                lines.contains { $0.hasPrefix("beats") && ($0.contains("left 1s") || $0.contains("left 2s")) }
            }, "no time left on the row past the first budget: \(tmux.lastScreen)")
            #expect(!screen.contains { $0.hasPrefix("beats") && $0.contains("left 0s") }, "\(screen)")
            #expect(try await tmux.waitForExit() == 0)
        }
    }

    @Test("run: lines the child prints while reporting progress arrive whole, in order, never torn by the row")
    func outputAboveRows() async throws {
        let scratch = try CLIScratch()
        let script = try scratch.write("chatty.sh", """
        i=1
        while [ $i -le 60 ]; do
          printf '{"type":"progress","completed":%d,"total":60,"title":"Chatting"}\\n' $i >&3
          if [ $((i % 2)) -eq 0 ]; then
            echo "out line $i: the quick brown fox jumps over the lazy dog"
          else
            echo "err line $i: pack my box with five dozen liquor jugs" >&2
          fi
          sleep 0.03
          i=$((i + 1))
        done
        """)
        try await DisplayTmux.with("chatty", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name chatty -- sh \(sq(script))", height: 20)
            let seenRow = try await tmux.waitFor { rows($0, "chatty").count == 1 }
            #expect(seenRow != nil, "a row while the task prints")
            #expect(try await tmux.waitForExit() == 0)
            let all = try await tmux.screen(history: true)
            var expected: [String] = []
            for i in 1...60 {
                expected.append(i % 2 == 0 ? "out line \(i): the quick brown fox jumps over the lazy dog"
                                           : "err line \(i): pack my box with five dozen liquor jugs")
            }
            let printed = all.filter { $0.contains(" line ") }
            #expect(printed == expected, "every line whole and in order; got \(printed.count) lines: \(printed.prefix(5))…")
            #expect(!all.contains { $0.contains(" line ") && $0.contains("%") }, "no line mixes output with a row")
            #expect(rows(all, "chatty").isEmpty, "no row left behind in the scrollback: \(rows(all, "chatty"))")
        }
    }

    @Test("run: after the terminal is narrowed mid-run, the row re-fits in one line and no stale rows remain")
    func resize() async throws {
        let scratch = try CLIScratch()
        let script = try scratch.write("long.sh", """
        i=0
        while [ $i -le 40 ]; do
          printf '{"type":"progress","completed":%d,"total":40,"title":"A rather long title that cannot fit in a narrow terminal at all","detail":"item-%d.dat"}\\n' $i $i >&3
          sleep 0.1
          i=$((i + 1))
        done
        """)
        try await DisplayTmux.with("resize", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name wide-task -- sh \(sq(script))", width: 100, height: 30)
            let wide = try #require(try await tmux.waitFor { rows($0, "wide-task").contains { $0.contains("A rather long") } },
                                    "no wide row")
            #expect(rows(wide, "wide-task")[0].count > 60, "\(wide)")
            try await tmux.resize(width: 50)
            #expect(try await tmux.paneWidth() == 50)
            // Give it a few frames at the new width.
            try await Task.sleep(for: .milliseconds(600))
            let narrow = try #require(try await tmux.waitFor { lines in
                let r = rows(lines, "wide-task")
                return r.count == 1 && r[0].count < 50
            }, "the row never re-fitted 50 columns: \(tmux.lastScreen)")
            for line in narrow {
                #expect(line.count <= 50, "a line wider than the terminal: \(line)")
            }
            let row = rows(narrow, "wide-task")[0]
            #expect(row.contains("%") && row.contains("left"), "name, percent and time left on one line: \(row)")
            #expect(!narrow.contains { $0.contains("wide-task") && !$0.contains("%") }, "no torn row: \(narrow)")
            #expect(narrow.filter { $0.contains("left ") }.count == 1, "no stale copies of the row: \(narrow)")
            #expect(try await tmux.waitForExit() == 0)
            #expect(try await tmux.cursorVisible() == true)
        }
    }

    @Test("run: a 40-column terminal gets one row that fits, with the name, percent and time left")
    func narrowTerminal() async throws {
        let scratch = try CLIScratch()
        try await DisplayTmux.with("narrow", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name a-task-with-a-long-name -- sh \(progressScript) 12", width: 40, height: 15)
            let screen = try #require(try await tmux.waitFor { lines in
                lines.contains { $0.hasPrefix("a-task") && $0.contains("%") && $0.contains("left") }
            }, "no row at 40 columns: \(tmux.lastScreen)")
            let row = screen.first { $0.hasPrefix("a-task") && $0.contains("%") }!
            #expect(row.count <= 39, "the last column stays free: \(row)")
            #expect(row.contains("…"), "the long name is cut cleanly: \(row)")
            #expect(screen.filter { $0.contains("%") }.count == 1, "\(screen)")
            #expect(try await tmux.waitForExit() == 0)
            let end = try await tmux.screen(history: true)
            #expect(end.contains { $0.hasPrefix("✓ a-task-with-a-long-name: succeeded") }, "\(end)")
        }
    }

    @Test("NO_COLOR: no escape sequence on the screen; without it, colours")
    func noColor() async throws {
        let scratch = try CLIScratch()
        try await DisplayTmux.with("color", scratch: scratch) { coloured in
            try await coloured.start("\(overtime) run --name job -- sh \(progressScript) 8")
            let colourScreen = try await coloured.waitFor(escapes: true) { lines in
                lines.contains { $0.contains("job") && $0.contains("%") && $0.contains("\u{1B}[32m") }
            }
            #expect(colourScreen != nil, "a green bar when colour is allowed: \(coloured.lastScreen)")
        }
        try await DisplayTmux.with("nocolor", scratch: scratch) { plain in
            try await plain.start("env NO_COLOR=1 \(overtime) run --name job -- sh \(progressScript) 8")
            let plainScreen = try #require(try await plain.waitFor(escapes: true) { rows($0, "job").count == 1 }, "no row under NO_COLOR")
            #expect(!plainScreen.joined().contains("\u{1B}["), "escape codes under NO_COLOR: \(plainScreen)")
            #expect(try await plain.waitForExit() == 0)
            let end = try await plain.screen(escapes: true, history: true)
            #expect(!end.joined().contains("\u{1B}["), "\(end)")
            #expect(end.contains { $0.contains("done: 1 of 1 succeeded") })
        }
    }

    @Test("without a UTF-8 locale: an ASCII bar and spinner, nothing but ASCII on the screen")
    func asciiLocale() async throws {
        let scratch = try CLIScratch()
        try await DisplayTmux.with("ascii", scratch: scratch) { tmux in
            try await tmux.start("env LANG=C \(overtime) run --name job -- sh \(progressScript) 12")
            let screen = try #require(try await tmux.waitFor { lines in rows(lines, "job").contains { $0.contains("[#") } },
                                      "no ASCII bar: \(tmux.lastScreen)")
            #expect(screen.joined().allSatisfy { $0.isASCII }, "\(screen)")
            #expect(try await tmux.waitForExit() == 0)
            let end = try await tmux.screen(history: true)
            #expect(end.contains { $0.hasPrefix("+ job: succeeded") }, "\(end)")
        }
    }

    @Test("TERM=dumb: plain timestamped lines, no cursor movement")
    func dumbTerminal() async throws {
        let scratch = try CLIScratch()
        try await DisplayTmux.with("dumb", scratch: scratch) { tmux in
            try await tmux.start("env TERM=dumb \(overtime) run --name job -- sh \(progressScript) 6")
            #expect(try await tmux.waitForExit() == 0)
            let end = try await tmux.screen(escapes: true, history: true)
            #expect(!end.joined().contains("\u{1B}["), "\(end)")
            let stamped = end.filter { $0.range(of: #"^\d\d:\d\d:\d\d overtime: job: "#, options: .regularExpression) != nil }
            #expect(stamped.contains { $0.contains("job: started, pid ") }, "\(end)")
            #expect(stamped.contains { $0.contains("job: succeeded in") }, "\(end)")
            #expect(stamped.contains { $0.contains("% (") }, "a progress line: \(end)")
        }
    }

    @Test("an endless line of output shows whole: the rows are never drawn into it")
    func endlessLineShowsWhole() async throws {
        let scratch = try CLIScratch()
        // 300,000 bytes without a newline: past the display's backlog, so it is shown before
        // its end comes; then a pause with the row up, then the end of the line.
        let child = try scratch.write("endless.py", """
        import sys, time
        sys.stderr.write("x" * 300000); sys.stderr.flush()
        time.sleep(1.5)
        sys.stderr.write("END\\n"); sys.stderr.flush()
        time.sleep(0.5)
        """)
        try await DisplayTmux.with("endless", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name endless -- python3 \(sq(child))", width: 400, height: 20)
            let status = try await tmux.waitForExit()
            #expect(status == 0)
            let end = try await tmux.screen(history: true)
            // The line's own screen lines: x…x, the last one ending in END.
            let lineRows = end.filter { !$0.isEmpty && $0.allSatisfy { $0 == "x" } || ($0.hasSuffix("END") && $0.dropLast(3).allSatisfy { $0 == "x" }) }
            let shown = lineRows.joined().filter { $0 == "x" }.count
            #expect(shown == 300_000, "bytes of the line lost on screen: \(300_000 - shown)")
            #expect(end.contains { $0.hasSuffix("END") || $0 == "END" }, "\(end.suffix(5))")
        }
    }

    @Test("Ctrl-C: the task is cancelled (user), the display ends its lines and shows the cursor")
    func controlC() async throws {
        let scratch = try CLIScratch()
        try await DisplayTmux.with("ctrlc", scratch: scratch) { tmux in
            try await tmux.start("\(overtime) run --name long -- sh \(progressScript) 200")
            _ = try #require(try await tmux.waitFor { rows($0, "long").count == 1 }, "no row")
            #expect(try await tmux.cursorVisible() == false)
            try await tmux.keys("C-c")
            let status = try await tmux.waitForExit()
            #expect(status == 130, "Ctrl-C, and the task died of the cancel's SIGTERM: \(String(describing: status))")
            let end = try await tmux.screen(history: true)
            #expect(end.contains { $0.contains("received SIGINT; cancelling (user)") }, "\(end)")
            #expect(end.contains { $0.hasPrefix("✗ long: cancelled (user: cancelled by user)") }, "\(end)")
            #expect(end.contains { $0.contains("done: 0 of 1 succeeded") }, "\(end)")
            #expect(rows(end, "long").isEmpty, "\(end)")
            #expect(try await tmux.cursorVisible() == true, "the cursor is back after Ctrl-C")
        }
    }

    @Test("batch: several tasks at once show several rows and a status line; ends get lines; the table closes")
    func batchRows() async throws {
        let scratch = try CLIScratch()
        let job = try scratch.write("job.json", """
        {"concurrency": 3, "defaults": {"budget": "10s", "grace": "2s"},
         "tasks": [
          {"name": "alpha", "command": ["sh", \(displayJSON(progressScript)), "14"]},
          {"name": "bravo", "command": ["sh", \(displayJSON(progressScript)), "12"]},
          {"name": "charlie", "command": ["sh", \(displayJSON(progressScript)), "10"]},
          {"name": "delta", "command": ["sh", "-c", "echo delta-output; exit 3"], "after": ["charlie"]}
         ]}
        """)
        try await DisplayTmux.with("batch", scratch: scratch) { tmux in
            try await tmux.start("cd \(sq(scratch.url.path)) && \(overtime) batch \(sq(job)) --run-dir run")
            let three = try #require(try await tmux.waitFor { lines in
                ["alpha", "bravo", "charlie"].allSatisfy { rows(lines, $0).count == 1 }
            }, "three rows never showed together: \(tmux.lastScreen)")
            #expect(three.contains { $0.hasPrefix("3 running · 1 waiting") }, "the status line: \(three)")
            #expect(try await tmux.waitForExit() == 1)
            let end = try await tmux.screen(history: true)
            for name in ["alpha", "bravo", "charlie"] {
                #expect(end.contains { $0.hasPrefix("✓ \(name): succeeded in") }, "\(name): \(end)")
            }
            #expect(end.contains { $0.hasPrefix("✗ delta: failed (exit 3)") }, "\(end)")
            #expect(!end.contains("delta-output"), "task output goes to its log, not the screen")
            #expect(end.contains { $0.hasPrefix("TASK") && $0.contains("OUTCOME") }, "the final table: \(end)")
            #expect(end.contains { $0.hasPrefix("3 of 4 succeeded") }, "\(end)")
            #expect(try await tmux.cursorVisible() == true)
        }
    }

    @Test("batch --follow NAME: that task's output shows above the rows, the others' stays in their logs")
    func batchFollow() async throws {
        let scratch = try CLIScratch()
        let talker = try scratch.write("talker.sh", """
        i=1
        while [ $i -le 12 ]; do
          printf '{"type":"progress","completed":%d,"total":12}\\n' $i >&3
          echo "$1 says line $i"
          sleep 0.1
          i=$((i + 1))
        done
        """)
        let job = try scratch.write("job.json", """
        {"concurrency": 2,
         "tasks": [
          {"name": "loud", "command": ["sh", \(displayJSON(talker)), "loud"]},
          {"name": "quiet", "command": ["sh", \(displayJSON(talker)), "quiet"]}
         ]}
        """)
        try await DisplayTmux.with("follow", scratch: scratch) { tmux in
            try await tmux.start("cd \(sq(scratch.url.path)) && \(overtime) batch \(sq(job)) --run-dir run --follow loud")
            #expect(try await tmux.waitForExit() == 0)
            let end = try await tmux.screen(history: true)
            let followed = end.filter { $0.hasPrefix("loud says line") }
            #expect(followed == (1...12).map { "loud says line \($0)" }, "\(end)")
            #expect(!end.contains { $0.contains("quiet says") }, "\(end)")
            let log = scratch.read("run/logs/quiet.log") ?? ""
            #expect(log.components(separatedBy: "\n").filter { $0.hasPrefix("quiet says") }.count == 12, "the logs stay complete: \(log)")
            let loudLog = scratch.read("run/logs/loud.log") ?? ""
            #expect(loudLog.components(separatedBy: "\n").filter { $0.hasPrefix("loud says") }.count == 12, "\(loudLog)")
        }
    }
}

/// A JSON string literal for a shell-quoted path (the quotes stripped first).
private func displayJSON(_ quoted: String) -> String {
    var path = quoted
    if path.hasPrefix("'"), path.hasSuffix("'") { path = String(path.dropFirst().dropLast()) }
    let data = try! JSONSerialization.data(withJSONObject: [path], options: [.withoutEscapingSlashes])
    let text = String(decoding: data, as: UTF8.self)
    return String(text.dropFirst().dropLast())
}
