import Foundation
import OvertimeLoop
import Testing

// A task's pseudo-terminal read by TerminalReader: the child sees a terminal of the size
// it was given, and its output arrives whole, in order, with one end after it exits.
@Suite struct TerminalReaderTests {
    /// What a reader has delivered so far, and how the child ended.
    struct Run: Sendable {
        let output = Shared<[UInt8]>([])
        let ends = Shared<[Int32?]>([])
        let exit = Shared<ChildExit?>(nil)
    }

    /// Spawns `script` under `sh -c` with a fresh pseudo-terminal as its stdin, stdout and
    /// stderr, read by a TerminalReader (which its handle keeps alive until the end). `prepare`
    /// runs on the loop thread with the reader, before the spawn.
    static func run(_ loop: EventLoop, _ script: String,
                    prepare: @escaping @Sendable (TerminalReader) -> Void = { _ in }) async throws -> Run {
        let (reader, terminal) = try Descriptors.outputTerminal(sizeFrom: -1)
        let run = Run()
        let started = await onLoop(loop) { () -> Result<Void, Error> in
            // Only the child holds the terminal afterwards, so its exit ends the reader.
            defer { Descriptors.close(terminal) }
            return Result {
                let read = try TerminalReader(loop: loop, fd: reader)
                read.startReading(onData: { chunk in
                    let bytes = Array(chunk)
                    run.output.update { $0 += bytes }
                }, onEnd: { end in run.ends.update { $0.append(end) } })
                prepare(read)
                let request = SpawnRequest(arguments: ["/bin/sh", "-c", script], baseEnvironment: nil, environment: [],
                                           workingDirectory: nil, descriptors: [terminal, terminal, terminal])
                _ = try ChildProcess(loop: loop, request: request) { how in run.exit.update { $0 = how } }
            }
        }
        try started.get()
        return run
    }

    /// Waits for the child's exit and the reader's end, and expects a clean end of both.
    static func expectFinished(_ run: Run) async throws {
        #expect(await eventually { run.exit.value != nil && !run.ends.value.isEmpty })
        // Room for a second, wrong, end report.
        try await Task.sleep(for: .milliseconds(100))
        #expect(run.exit.value == .exited(0))
        #expect(run.ends.value.count == 1)
        #expect(run.ends.value.first == .some(nil), "end of file is nil, not an errno")
    }

    @Test func aBurstOfMoreThanAMebibyteArrivesWholeAndInOrder() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Every byte value, raw: the terminal does no output processing.
        let sent = pattern(count: 1_536 * 1024 + 17, seed: 5)
        try Data(sent).write(to: URL(fileURLWithPath: "\(directory)/burst"))
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // One write of the whole file, then exit at once.
        let run = try await Self.run(loop, "dd if=\(directory)/burst bs=4M count=1 status=none")
        try await Self.expectFinished(run)
        let got = run.output.value
        #expect(got.count == sent.count)
        #expect(got == sent)
    }

    @Test func theEndComesOnlyAfterTheChildExits() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // The child goes on only when told (the file `go`), however slowly the test runs.
        let go = "\(directory)/go"
        let run = try await Self.run(loop, "echo before; while [ ! -e \(go) ]; do sleep 0.05; done; echo after")
        #expect(await eventually { run.output.value == Array("before\n".utf8) },
                "\(String(decoding: run.output.value, as: UTF8.self).debugDescription)")
        // Room for a wrong, early, end.
        try await Task.sleep(for: .milliseconds(200))
        #expect(run.ends.value.isEmpty, "no end while the child still runs")
        #expect(run.exit.value == nil)
        #expect(FileManager.default.createFile(atPath: go, contents: nil))
        try await Self.expectFinished(run)
        #expect(run.output.value == Array("before\nafter\n".utf8),
                "\(String(decoding: run.output.value, as: UTF8.self).debugDescription)")
    }

    @Test func theChildSeesATerminal() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let run = try await Self.run(loop, "if test -t 0 && test -t 1 && test -t 2; then echo tty; else echo no; fi")
        try await Self.expectFinished(run)
        #expect(run.output.value == Array("tty\n".utf8))
    }

    @Test func theChildSeesTheWindowSizeCopiedFromAnotherTerminal() async throws {
        // The supervisor's own terminal, as the user resized it: another pseudo-terminal.
        let (otherReader, other) = try Descriptors.outputTerminal(sizeFrom: -1)
        defer {
            Descriptors.close(other)
            Descriptors.close(otherReader)
        }
        var size = winsize(ws_row: 37, ws_col: 101, ws_xpixel: 0, ws_ypixel: 0)
        #expect(ioctl(other, UInt(TIOCSWINSZ), &size) == 0)
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let run = try await Self.run(loop, "stty size") { reader in reader.copyWindowSize(from: other) }
        try await Self.expectFinished(run)
        #expect(String(decoding: run.output.value, as: UTF8.self) == "37 101\n")
    }
}
