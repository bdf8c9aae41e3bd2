import OvertimeLoop

/// The task's output where Overtime reads it (`OutputTarget.capture`, `.terminal`): its
/// pipes and pseudo-terminals, drained to their end into their sinks, held back while a
/// consumer's valve is held, the terminals following the real one's size. Owns those
/// readers and closes them in `close`. Loop-thread only.
final class TaskOutput {
    private let loop: EventLoop
    private var readers: [OutputReader] = []
    /// The pseudo-terminals the task writes to, and the terminal whose size each follows.
    private var terminals: [(reader: TerminalReader, sizeFrom: Int32)] = []
    /// A consumer held the output back since `heldBack` was last reset.
    private var heldSinceReset = false
    /// Told each time a reader reaches its end.
    private let onReaderEnded: () -> Void

    init(loop: EventLoop, onReaderEnded: @escaping () -> Void) {
        self.loop = loop
        self.onReaderEnded = onReaderEnded
    }

    /// Every reader has reached its end (or was closed).
    var isDrained: Bool { readers.isEmpty }

    /// Whether a consumer held the output back since the last reset (or holds it now).
    var heldBack: Bool { heldSinceReset || readers.contains(where: \.isPaused) }

    func resetHeldBack() {
        heldSinceReset = false
    }

    /// A pipe drained into `sink`: returns its write end, in `passed`.
    func pipe(into sink: @escaping @Sendable ([UInt8]) -> Void, valve: OutputValve?, passing passed: inout [Int32]) throws(SystemError) -> Int32 {
        let (readEnd, writeEnd) = try Descriptors.pipe()
        passed.append(writeEnd)
        drain(try ByteStream(loop: loop, fd: readEnd), into: sink, valve: valve)
        return writeEnd
    }

    /// A pseudo-terminal drained into `sink`, its size that of the terminal `sizeFrom`:
    /// returns the task's side, in `passed`. Where none can be had (a container without
    /// /dev/pts), a pipe: the output still arrives, only buffered as a pipe makes programs
    /// buffer it.
    func terminal(sizeFrom: Int32, into sink: @escaping @Sendable ([UInt8]) -> Void, valve: OutputValve?,
                  passing passed: inout [Int32]) throws(SystemError) -> Int32 {
        guard let (reader, terminal) = try? Descriptors.outputTerminal(sizeFrom: sizeFrom) else {
            return try pipe(into: sink, valve: valve, passing: &passed)
        }
        passed.append(terminal)
        let terminalReader = try TerminalReader(loop: loop, fd: reader)
        drain(terminalReader, into: sink, valve: valve)
        terminals.append((terminalReader, sizeFrom))
        return terminal
    }

    /// Reads the task's output to its end into `sink`, before its `exited` event; while
    /// `valve` is held, reads nothing (the task then waits on its own output, never the loop).
    private func drain(_ reader: OutputReader, into sink: @escaping @Sendable ([UInt8]) -> Void, valve: OutputValve?) {
        readers.append(reader)
        let loop = loop
        reader.startReading(
            onData: { [unowned self, unowned reader] bytes in
                sink(Array(bytes))
                guard let valve, valve.isHeld else { return }
                self.heldSinceReset = true
                reader.pauseReading()
                let paused = LoopBound(reader, loop: loop)
                let registered = valve.whenReleased { loop.execute { paused.value.resumeReading() } }
                if !registered { reader.resumeReading() }  // released in between
            },
            onEnd: { [unowned self, unowned reader] _ in
                reader.close()
                self.readers.removeAll { $0 === reader }
                self.terminals.removeAll { $0.reader === reader }
                self.onReaderEnded()
            }
        )
    }

    /// The task's terminals take the real one's size (before the task is told it changed).
    func followWindowSize() {
        for terminal in terminals { terminal.reader.copyWindowSize(from: terminal.sizeFrom) }
    }

    /// Stops reading and closes every reader. Idempotent.
    func close() {
        readers.forEach { $0.close() }
        readers.removeAll()
        terminals.removeAll()
    }
}
