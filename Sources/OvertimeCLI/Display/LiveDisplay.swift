import Overtime
import OvertimeLoop
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `tty` display: live rows on stderr, redrawn by a thread of its own at most ten
/// times a second, with notices and the task's own output printed above them.
///
/// Event handlers (on the supervisor's loop thread) only change the model under a lock;
/// all drawing happens on the draw thread (or in `finish`), and only when something on
/// the screen would change. Each frame moves the cursor back to the first row, blanks the
/// lines the rows took, writes whatever must be kept (notices, complete lines of output),
/// then the rows again, fitted to the terminal's width read afresh (so a resize shows at
/// the next frame). The cursor is hidden while the rows are up and shown again on every
/// way out: `finish` (the task ended, Ctrl-C included), `exit` (atexit), a crash.
final class LiveDisplay: Sendable {
    /// The draw thread's period: at most ten frames a second however fast events come.
    static let tick = Duration.milliseconds(100)
    /// Output held for the next frame beyond this holds `valve` and draws at once (on the
    /// draw thread), so a flooding task is slowed to the terminal's pace, not buffered
    /// without bound, and the loop thread that reads it never waits for the terminal.
    static let outputBacklogLimit = 256 * 1024

    /// Held while the task's output waits here past `outputBacklogLimit`; the supervisor
    /// reads no more of it until the draw thread has written it.
    let valve = OutputValve()

    private enum Chunk: Sendable {
        case notice(Notice)
        case output(fd: Int32, bytes: [UInt8])
    }

    private struct State: Sendable {
        var model: DisplayModel
        var pending: [Chunk] = []
        var pendingBytes = 0
        /// `valve` is held: decided with `pendingBytes`, under the same lock, so a frame
        /// that has written the backlog never misses a hold made meanwhile.
        var holding = false
        /// The unfinished last line of each captured stream (by the fd it is shown on).
        var partial: [Int32: [UInt8]] = [:]
        var finished = false
    }

    /// What is on the screen now: the rows last drawn (their widths) and at what width.
    private struct Screen: Sendable {
        var rowTexts: [String] = []
        var rowWidths: [Int] = []
        var columns = 0
        var cursorHidden = false
    }

    let renderer: DisplayRenderer
    private let environment: [String: String]
    /// The display draws on stderr.
    private let fd: Int32 = 2
    private let state: Mutex<State>
    private let screen = Mutex<Screen>(Screen())
    private let ticker = Mutex<Ticker?>(nil)
    /// Runs on the draw thread before each frame (`batch --follow` reads the log here).
    private let beforeFrame: @Sendable () -> Void

    init(model: DisplayModel, capabilities: DisplayCapabilities, environment: [String: String],
         beforeFrame: @escaping @Sendable () -> Void = {}) {
        renderer = DisplayRenderer(capabilities: capabilities)
        self.environment = environment
        self.beforeFrame = beforeFrame
        state = Mutex(State(model: model))
    }

    // MARK: Feeding (any thread; the loop thread in practice)

    /// A task event: the model changes; notices wait for the next frame.
    func handle(_ event: TaskEvent, standalone: Bool = true) {
        state.withLock { state in
            var flushed: [Chunk] = []
            if standalone, case .exited = event.kind {
                // Every byte the task wrote came before its end: its last line is complete.
                flushed = Self.flushPartials(&state)
            }
            let notices = state.model.apply(event, standalone: standalone)
            state.pending += flushed
            state.pending += notices.filter(DisplayRenderer.showsInTTY).map(Chunk.notice)
        }
    }

    /// A batch update.
    func handle(_ update: BatchUpdate) {
        state.withLock { state in
            let notices = state.model.apply(update)
            state.pending += notices.filter(DisplayRenderer.showsInTTY).map(Chunk.notice)
        }
    }

    /// A line of its own above the rows (a signal received, a refused client).
    func note(_ notice: Notice) {
        let done = state.withLock { state in
            if !state.finished { state.pending.append(.notice(notice)) }
            return state.finished
        }
        if done { Terminal.error(renderer.notice(notice).text) }
    }

    /// Output of a task, to be shown on `fd` (1 or 2) above the rows. Complete lines go up
    /// at the next frame; an unfinished line is shown in place until its end comes.
    func output(_ bytes: [UInt8], fd target: Int32) {
        guard !bytes.isEmpty else { return }
        let (backlog, done) = state.withLock { state -> (Int, Bool) in
            if state.finished { return (0, true) }
            var buffer = state.partial[target] ?? []
            buffer += bytes
            if let complete = Self.takeCompleteLines(&buffer) {
                state.pending.append(.output(fd: target, bytes: complete))
                state.pendingBytes += complete.count
            }
            state.partial[target] = buffer.isEmpty ? nil : buffer
            if state.pendingBytes > Self.outputBacklogLimit, !state.holding {
                state.holding = true
                valve.hold()
            }
            return (state.pendingBytes, false)
        }
        if done {
            (target == 1 ? Terminal.stdout : Terminal.stderr).write(bytes)
        } else if backlog > Self.outputBacklogLimit {
            ticker.withLock { $0 }?.wakeNow()
        }
    }

    /// Takes what can be shown of `buffer` out of it: every complete line (newlines kept),
    /// and the unfinished rest too once it passes `outputBacklogLimit` (one endless line is
    /// shown as it is rather than held without bound). Nil when nothing is ready.
    static func takeCompleteLines(_ buffer: inout [UInt8]) -> [UInt8]? {
        var taken: [UInt8] = []
        if let lastNewline = buffer.lastIndex(of: 0x0A) {
            taken = Array(buffer[...lastNewline])
            buffer.removeSubrange(...lastNewline)
        }
        if buffer.count > outputBacklogLimit {
            taken += buffer
            buffer.removeAll()
        }
        return taken.isEmpty ? nil : taken
    }

    private static func flushPartials(_ state: inout State) -> [Chunk] {
        var chunks: [Chunk] = []
        for (target, bytes) in state.partial.sorted(by: { $0.key < $1.key }) where !bytes.isEmpty {
            chunks.append(.output(fd: target, bytes: bytes + [0x0A]))
        }
        state.partial.removeAll()
        return chunks
    }

    // MARK: Drawing

    /// Starts the draw thread (the first frame hides the cursor).
    func start() {
        CursorGuard.install()
        let ticker = Ticker(interval: Self.tick) { [weak self] in
            self?.beforeFrame()
            self?.draw()
        }
        self.ticker.withLock { $0 = ticker }
        ticker.start()
    }

    /// Stops the draw thread, writes what is pending (the task's unfinished lines too),
    /// clears the rows, prints `closing` (the summary) and shows the cursor again.
    func finish(closing: [Notice] = []) {
        ticker.withLock { $0 }?.stop()
        beforeFrame()
        state.withLock { state in
            state.pending += Self.flushPartials(&state)
            state.pending += closing.map(Chunk.notice)
        }
        draw(final: true)
        state.withLock { $0.finished = true }
    }

    /// One frame. Safe from any thread: the screen lock orders frames, and what a frame
    /// takes from the state it writes before the next frame takes more.
    func draw(final: Bool = false) {
        screen.withLock { screen in
            let (columns, lines) = TerminalDevice.size(fd, environment: environment)
            let now = MonotonicInstant.now()
            let (model, pending, partial) = state.withLock { state -> (DisplayModel, [Chunk], [String]) in
                let pending = state.pending
                state.pending.removeAll()
                state.pendingBytes = 0
                let partial = state.partial.sorted(by: { $0.key < $1.key }).map { Self.liveText($0.value) }
                return (state.model, pending, partial)
            }
            let rows = final ? [] : renderer.rows(model, now: now, columns: columns, height: lines, partialOutput: partial)
            let rowTexts = rows.map(\.text)
            // After this frame's writes (or at once, when it writes nothing): the backlog is
            // on the screen, so the task's output may flow again.
            defer { releaseValveIfCaughtUp() }
            if pending.isEmpty, !final, rowTexts == screen.rowTexts, columns == screen.columns { return }

            var segments = SegmentWriter()
            var head = ""
            if !screen.cursorHidden, !final {
                head += "\u{1B}[?25l"
                screen.cursorHidden = true
                CursorGuard.hidden.store(true, ordering: .relaxed)
            }
            head += Self.eraseRows(widths: screen.rowWidths, columns: columns)
            segments.append(fd, Array(head.utf8))
            for chunk in pending {
                switch chunk {
                case let .notice(notice):
                    segments.append(fd, Array((renderer.notice(notice).text + "\n").utf8))
                case let .output(target, bytes):
                    segments.append(target, bytes)
                    // An endless line shown before its end (`takeCompleteLines`): end it on
                    // screen, or the rows would be drawn on its last line and the next frame
                    // would erase what it holds there. (The task's log keeps it whole.)
                    if bytes.last != 0x0A { segments.append(target, [0x0A]) }
                }
            }
            var tail = rowTexts.joined(separator: "\n")
            if final, screen.cursorHidden {
                tail += "\u{1B}[?25h"
                screen.cursorHidden = false
            }
            segments.append(fd, Array(tail.utf8))
            segments.write()
            if final { CursorGuard.hidden.store(false, ordering: .relaxed) }
            screen.rowTexts = rowTexts
            screen.rowWidths = rows.map(\.width)
            screen.columns = columns
        }
    }

    private func releaseValveIfCaughtUp() {
        state.withLock { state in
            guard state.holding, state.pendingBytes <= Self.outputBacklogLimit else { return }
            state.holding = false
            valve.release()
        }
    }

    /// Moves the cursor from the end of the last row drawn back to the start of the first,
    /// blanking every line the rows took on the way. A terminal narrowed since may have
    /// rewrapped the rows (most do), so each counts for as many lines as it now takes.
    ///
    /// Lines are erased one by one (EL), not with "erase below" (ED): some terminals (tmux's
    /// `scroll-on-clear`) take ED from the top-left corner as clearing the screen and push
    /// the screen into the scrollback, once per frame.
    static func eraseRows(widths: [Int], columns: Int) -> String {
        guard !widths.isEmpty else { return "" }
        let columns = max(1, columns)
        let physical = widths.reduce(0) { $0 + max(1, ($1 + columns - 1) / columns) }
        let up = physical > 1 ? "\u{1B}[\(physical - 1)A" : ""
        var text = "\r" + up
        for line in 0..<physical {
            text += "\u{1B}[2K"
            if line < physical - 1 { text += "\u{1B}[B" }
        }
        return text + up
    }

    /// An unfinished line as it would look now: what follows its last carriage return
    /// (a task redrawing its own progress line), made safe for one row.
    static func liveText(_ bytes: [UInt8]) -> String {
        var slice = bytes[...]
        if let cr = bytes.lastIndex(of: 0x0D) { slice = bytes[(cr + 1)...] }
        return TextWidth.sanitize(String(decoding: slice, as: UTF8.self))
    }
}

/// Consecutive writes to one descriptor merged, written in order.
private struct SegmentWriter {
    private var segments: [(Int32, [UInt8])] = []

    mutating func append(_ fd: Int32, _ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        if let last = segments.last, last.0 == fd {
            segments[segments.count - 1].1 += bytes
        } else {
            segments.append((fd, bytes))
        }
    }

    func write() {
        for (fd, bytes) in segments { TerminalDevice.write(fd, bytes) }
    }
}

/// Shows the cursor again however the process ends while the rows are up: at `exit`
/// (atexit) and on a crash signal (then the signal goes on to whatever handled it before,
/// the Swift runtime's backtracer for one).
enum CursorGuard {
    static let hidden = Atomic<Bool>(false)
    private static let installed = Mutex<Bool>(false)
    /// The actions found at install, by signal number; written once, before any handler.
    nonisolated(unsafe) private static let previous = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
    static let crashSignals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP]

    static func install() {
        let first = installed.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        atexit {
            CursorGuard.restore()
        }
        for signal in crashSignals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signo in
                CursorGuard.restore()
                // Put back the handler found at install and raise again: it runs as soon as
                // this one returns.
                _ = sigaction(signo, CursorGuard.previous + Int(signo), nil)
                _ = raise(signo)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            _ = sigaction(signal, &action, previous + Int(signal))
        }
    }

    /// Async-signal-safe: one atomic load, one write(2).
    static func restore() {
        guard hidden.exchange(false, ordering: .relaxed) else { return }
        let show: StaticString = "\r\n\u{1B}[?25h"
        _ = systemWrite(2, show.utf8Start, show.utf8CodeUnitCount)
    }
}
