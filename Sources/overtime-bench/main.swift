// overtime-bench: drives the Overtime library for scripts/bench.
//
//   overtime-bench spawn --count 2000 --concurrency 8 --command /bin/true [ARG...]
//   overtime-bench protocol --command PATH [--expect 1000000] [ARG...]
//
// Each subcommand prints one line of key=value pairs on stdout for the script to read,
// and exits 1 (with the reason on stderr) when the run was not what it should have been,
// so a broken library can never pass for a fast one.
//
// No Foundation: the timings must not include the cost of loading it, and the library
// itself does without.
import Overtime
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

let usage = """
usage: overtime-bench spawn --count N --concurrency K --command PATH [ARG...]
       overtime-bench protocol --command PATH [--expect N] [ARG...]
"""

/// Fails the run: the script treats any non-zero exit as a failed measurement.
func fail(_ message: String) -> Never {
    var line = "overtime-bench: \(message)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(1)
}

/// The options shared by both subcommands; anything after the command's path is its argv.
struct Options {
    var count = 2000
    var concurrency = 8
    var expect = 1_000_000
    var argv: [String] = []

    init(_ args: ArraySlice<String>) {
        var rest = args
        func number(_ option: String) -> Int {
            guard let text = rest.popFirst(), let n = Int(text), n > 0 else { fail("\(option) needs a number > 0") }
            return n
        }
        while let arg = rest.popFirst() {
            switch arg {
            case "--count": count = number(arg)
            case "--concurrency": concurrency = number(arg)
            case "--expect": expect = number(arg)
            case "--command":
                guard let command = rest.popFirst() else { fail("--command needs a path") }
                argv = [command] + rest  // the rest belongs to the child
                rest = []
            default: fail("unknown argument '\(arg)'\n\(usage)")
            }
        }
        if argv.isEmpty { fail("no --command given\n\(usage)") }
    }
}

/// Spawn+reap throughput: `count` tasks, never more than `concurrency` alive at once, each
/// awaited through `TaskHandle.outcome` the way an embedding program would.
func benchSpawn(_ options: Options) async {
    let supervisor: Supervisor
    do { supervisor = try Supervisor() } catch { fail("cannot start the supervisor: \(error)") }
    // Output to /dev/null, as the C loop and xargs get it; the default budget policy, so
    // the per-task timer and budget message are part of what is measured.
    let spec = TaskSpec(arguments: options.argv, stdin: .null, stdout: .discard, stderr: .discard)
    let clock = ContinuousClock()
    let start = clock.now
    let failures = await withTaskGroup(of: Bool.self) { group in
        var launched = 0
        var failures = 0
        // A sliding window rather than batches of K: a new task starts the moment any one
        // ends, which is what keeps a C loop on waitpid(-1) busy too.
        while launched < min(options.concurrency, options.count) {
            let handle = supervisor.spawn(spec)
            group.addTask { await handle.outcome.succeeded }
            launched += 1
        }
        while let succeeded = await group.next() {
            if !succeeded { failures += 1 }
            if launched < options.count {
                let handle = supervisor.spawn(spec)
                group.addTask { await handle.outcome.succeeded }
                launched += 1
            }
        }
        return failures
    }
    let elapsed = start.duration(to: clock.now).seconds
    supervisor.shutdown()
    print("count=\(options.count) concurrency=\(options.concurrency) failures=\(failures)"
        + " seconds=\(elapsed) tasks_per_sec=\(Double(options.count) / elapsed)")
    if failures > 0 { fail("\(failures) of \(options.count) tasks did not exit 0") }
}

/// Counters bumped on the loop thread: the event handler sits on the hot path of every
/// message, so it does one relaxed atomic add and nothing else (no lock, no allocation).
final class EventCounts: Sendable {
    let progress = Atomic<Int>(0)
    let protocolErrors = Atomic<Int>(0)
}

/// Protocol throughput: one child floods fd 3 with progress lines; every line must come
/// out as a `.progress` event, none as a protocol error.
func benchProtocol(_ options: Options) async {
    let counts = EventCounts()
    let supervisor: Supervisor
    do {
        supervisor = try Supervisor { event in
            switch event.kind {
            case .progress: counts.progress.wrappingAdd(1, ordering: .relaxed)
            case .protocolError: counts.protocolErrors.wrappingAdd(1, ordering: .relaxed)
            default: break
            }
        }
    } catch { fail("cannot start the supervisor: \(error)") }
    let spec = TaskSpec(arguments: options.argv, stdin: .null, stdout: .discard, stderr: .inherit)
    let clock = ContinuousClock()
    let start = clock.now
    let outcome = await supervisor.spawn(spec).outcome
    let elapsed = start.duration(to: clock.now).seconds
    supervisor.shutdown()
    // The outcome is completed after the `exited` event, the last one, so every count is in.
    let messages = counts.progress.load(ordering: .relaxed)
    let errors = counts.protocolErrors.load(ordering: .relaxed)
    print("messages=\(messages) protocol_errors=\(errors) outcome_protocol_errors=\(outcome.protocolErrors)"
        + " exit=\(outcome.exitCode) seconds=\(elapsed) messages_per_sec=\(Double(messages) / elapsed)")
    if !outcome.succeeded { fail("the writer did not exit 0 (exit code \(outcome.exitCode))") }
    if messages != options.expect { fail("counted \(messages) progress events, expected \(options.expect)") }
    if errors != 0 || outcome.protocolErrors != 0 { fail("\(max(errors, outcome.protocolErrors)) protocol errors") }
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "spawn": await benchSpawn(Options(arguments.dropFirst()))
case "protocol": await benchProtocol(Options(arguments.dropFirst()))
default: fail("expected a subcommand\n\(usage)")
}
