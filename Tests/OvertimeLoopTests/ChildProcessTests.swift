import Foundation
import OvertimeLoop
import Testing

// Spawns real children and waits for real SIGCHLDs: serial, so no other test's children
// share the process while these are reaped.
@Suite(.serialized) struct ChildProcessTests {
    /// Spawns `arguments` on the loop and waits for the exit the reaper reports.
    static func run(_ arguments: [String]) async throws -> ChildExit {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let exit = Shared<ChildExit?>(nil)
        let spawned = await onLoop(loop) { () -> Result<Int32, SpawnError> in
            do throws(SpawnError) {
                let child = try Self.spawn(loop, arguments) { how in
                    exit.update { $0 = how }
                }
                return .success(child.pid)
            } catch {
                return .failure(error)
            }
        }
        #expect(try spawned.get() > 0)
        #expect(await eventually { exit.value != nil })
        return try #require(exit.value)
    }

    /// Spawns `arguments` with /dev/null as the child's stdin, stdout and stderr (nothing
    /// else is open in it). Call on the loop thread.
    static func spawn(_ loop: EventLoop, _ arguments: [String],
                      onExit: @escaping (ChildExit) -> Void) throws(SpawnError) -> ChildProcess {
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        precondition(null >= 0)
        // Open until the spawn returns: the child has its own copies by then.
        defer { close(null) }
        let request = SpawnRequest(arguments: arguments, baseEnvironment: nil, environment: [],
                                   workingDirectory: nil, descriptors: [null, null, null])
        return try ChildProcess(loop: loop, request: request, onExit: onExit)
    }

    @Test func anExitStatusIsReported() async throws {
        #expect(try await Self.run(["/bin/sh", "-c", "exit 7"]) == .exited(7))
    }

    @Test func aDeathBySignalIsReported() async throws {
        #expect(try await Self.run(["/bin/sh", "-c", "kill -TERM $$"]) == .signaled(SIGTERM))
    }

    @Test func aMissingCommandIsASpawnErrorWithENOENT() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        for command in ["/nonexistent/overtime-no-such-command", "overtime-no-such-command"] {
            let outcome = await onLoop(loop) { () -> SpawnError? in
                do throws(SpawnError) {
                    _ = try Self.spawn(loop, [command]) { _ in }
                    return nil
                } catch {
                    return error
                }
            }
            #expect(outcome == SpawnError(.exec, errno: ENOENT), "\(command)")
        }
    }

    @Test func aTerminalReaderGetsAChildsWholeOutputAndThenTheEnd() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // The tail of a flood written just before the child exits is what a terminal is
        // apt to lose (TerminalReader's comment): many lines, then exit at once.
        let lines = 5_000
        let (reader, terminal) = try Descriptors.outputTerminal(sizeFrom: -1)
        let output = Shared<[UInt8]>([])
        let ends = Shared<[Int32?]>([])
        let exit = Shared<ChildExit?>(nil)
        let script = "i=0; while [ $i -lt \(lines) ]; do echo \"line $i\"; i=$((i+1)); done"
        let started = await onLoop(loop) { () -> String? in
            do {
                let read = try TerminalReader(loop: loop, fd: reader)
                read.startReading(onData: { chunk in
                    let bytes = Array(chunk)
                    output.update { $0 += bytes }
                }, onEnd: { end in ends.update { $0.append(end) } })
                let request = SpawnRequest(arguments: ["/bin/sh", "-c", script], baseEnvironment: nil, environment: [],
                                           workingDirectory: nil, descriptors: [terminal, terminal, terminal])
                _ = try ChildProcess(loop: loop, request: request) { how in exit.update { $0 = how } }
                // Only the child holds the terminal now, so its exit ends the reader.
                Descriptors.close(terminal)
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(started == nil)
        #expect(await eventually { exit.value != nil && !ends.value.isEmpty })
        try await Task.sleep(for: .milliseconds(100))
        #expect(exit.value == .exited(0))
        #expect(ends.value.count == 1)
        #expect(ends.value.first == .some(nil))
        let expected = (0..<lines).map { "line \($0)\n" }.joined()
        let got = String(decoding: output.value, as: UTF8.self)
        #expect(got.count == expected.count)
        #expect(got == expected, "output ends \(got.suffix(40).debugDescription)")
    }
}
