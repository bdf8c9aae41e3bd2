// Hangs judged by phase and pace (docs/hangs.md), as a user meets them: Python children that
// write protocol lines on fd 3 by hand (no worker library), under the built `overtime run`.
// A silent compile phase passes under a short budget; a hang in a step is caught within the
// window learned from the step's pace, where one fixed window takes its whole length;
// `--on-stall warn` lets a pause pass; the checkpoint advice comes when the pace will not
// finish before max-runtime, and only then; OVERTIME_PHASE= over sd_notify names a phase.

import Foundation
import Testing

@Suite("CLI hangs: phases, learned windows, stalls, the checkpoint advice")
struct CLIHangTests {
    /// A training job: the phase `compile` (with `window` when given), silent for 8 s; then
    /// the phase `train`, 15 steps of 0.2 s, each reported. With `hang`, after step 13 it
    /// notes the time in MARKER and sleeps 30 s, reporting nothing.
    /// argv: ok|hang WINDOW|- MARKER
    static let trainingJob = """
    mode, own_window, marker = sys.argv[1], sys.argv[2], sys.argv[3]
    compile = {"type": "phase", "name": "compile"}
    if own_window != "-":
        compile["window"] = float(own_window)
    send(compile)
    time.sleep(8)
    send({"type": "phase", "name": "train"})
    steps = 15
    for step in range(1, steps + 1):
        time.sleep(0.2)
        send({"type": "progress", "completed": step, "total": steps})
        if mode == "hang" and step == 13:
            note(marker, repr(time.time()))
            time.sleep(30)
    """

    /// Reports 5 steps of 0.2 s, pauses PAUSE seconds, reports 5 more. argv: PAUSE
    static let pausingJob = """
    for step in range(1, 11):
        send({"type": "progress", "completed": step, "total": 10})
        time.sleep(0.2)
        if step == 5:
            time.sleep(float(sys.argv[1]))
    """

    /// Reports its share done, STEP more every 0.2 s, until done, reading fd 3 meanwhile; on
    /// `advice` it notes the message in MARKER and exits 0. With `checkpoint` it first
    /// spends 1 s in the phase `checkpoint`. argv: plain|checkpoint STEP MARKER
    static let pacedJob = """
    mode, step, marker = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    send({"type": "progress", "fraction": 0.0})
    if mode == "checkpoint":
        send({"type": "phase", "name": "checkpoint"})
        time.sleep(1)
        send({"type": "phase", "name": "main"})
    fraction = 0.0
    while fraction < 1:
        fraction = min(1.0, fraction + step)
        send({"type": "progress", "fraction": fraction})
        message = recv(timeout=0.2)
        if message is not None and message.get("type") == "advice":
            note(marker, json.dumps(message))
            sys.exit(0)
    """

    /// The events of an `--events` file with the word `event`.
    static func events(_ path: String, _ event: String) -> [[String: Any]] {
        CLICtlRecorder.lines(path).filter { $0["event"] as? String == event }
    }

    /// An event's `time` (`2026-12-04T10:52:39.688Z`) in seconds since 1970.
    static func seconds(_ event: [String: Any]?) -> Double? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return (event?["time"] as? String).flatMap(formatter.date(from:))?.timeIntervalSince1970
    }

    /// Runs `overtime run OPTIONS --events FILE -- python3 SCRIPT ARGS`; the result and the
    /// events file's path.
    static func run(_ options: [String], script: String, _ arguments: [String], in scratch: CLIScratch) async throws -> (CLIResult, String) {
        let events = scratch.path("events.jsonl")
        let job = try scratch.python("job.py", script)
        let r = try await cliRun(["run"] + options + ["--events", events, "--", CLIBatchWorker.python, job] + arguments,
                                 in: scratch, timeout: .seconds(60))
        return (r, events)
    }

    // MARK: Phases and learned windows

    @Test("a compile phase silent for 8 s passes under --window auto with a 3 s budget, by --phase-window or its own window",
          arguments: [(["--phase-window", "compile=20s"], "-"), ([], "20")])
    func aSilentCompilePhasePasses(options: [String], ownWindow: String) async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run(["--window", "auto", "--budget", "3s"] + options, script: Self.trainingJob,
                                             ["ok", ownWindow, scratch.path("hang")], in: scratch)
        #expect(r.status == 0, "\(r)")
        let phases = Self.events(events, "phase").map { "\($0["name"] as? String ?? "?") \(CLIJSON.int($0["window"]) ?? -1)" }
        #expect(phases == ["compile 20", "train 3"], "compile under its 20 s window, train under the budget until learned: \(phases)")
        let learned = Self.events(events, "window-learned").first
        #expect(learned?["phase"] as? String == "train", "the steps' pace taught a window: \(CLICtlRecorder.lines(events).suffix(4))")
    }

    /// The seconds from the hang (the time the job noted after its last report) to the
    /// cancel, which must say `timeout`.
    static func hangToCancel(_ r: CLIResult, _ events: String, marker: String, in scratch: CLIScratch) throws -> Double {
        #expect(r.status == 124, "\(r)")
        let hungAt = try #require(scratch.read(marker).flatMap { Double($0) }, "the job reached its hang: \(r)")
        let cancel = try #require(Self.events(events, "cancel").first, "\(r)")
        #expect(cancel["reason"] as? String == "timeout", "\(cancel)")
        return try #require(Self.seconds(cancel)) - hungAt
    }

    @Test("the same job hung in a step is cancelled for timeout within 2 s of the hang under --window auto")
    func aHangInAStepIsCaughtWithinTheLearnedWindow() async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run(["--window", "auto", "--budget", "3s", "--phase-window", "compile=20s", "--grace", "1s"],
                                             script: Self.trainingJob, ["hang", "-", scratch.path("hang")], in: scratch)
        let learned = try #require(Self.events(events, "window-learned").first, "\(r)")
        let took = try Self.hangToCancel(r, events, marker: "hang", in: scratch)
        #expect(took < 2.5, "cancelled \(took) s after the hang, the learned window being \(learned["window"] ?? "?") s")
    }

    @Test("under one fixed --window 3s the same hang takes 3 s or more to be caught")
    func aFixedWindowTakesItsWholeLength() async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run(["--window", "3s", "--budget", "3s", "--phase-window", "compile=20s", "--grace", "1s"],
                                             script: Self.trainingJob, ["hang", "-", scratch.path("hang")], in: scratch)
        let took = try Self.hangToCancel(r, events, marker: "hang", in: scratch)
        // The job notes the time just after its last report went out: the supervisor's
        // clock for it can only be as late, and the events' times are to the millisecond.
        #expect(took >= 2.95, "cancelled \(took) s after the hang")
        #expect(Self.events(events, "window-learned").isEmpty)
    }

    // MARK: --on-stall warn

    @Test("--on-stall warn: a 6 s pause passes, stalled then resumed, and --diagnose runs once")
    func aPausePassesWithWarn() async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run(["--on-stall", "warn", "--budget", "2s", "--window", "2s", "--diagnose", "echo diag {pid}"],
                                             script: Self.pausingJob, ["6"], in: scratch)
        #expect(r.status == 0, "\(r)")
        let marks = CLICtlRecorder.lines(events).compactMap { $0["event"] as? String }.filter { ["stalled", "resumed", "cancel"].contains($0) }
        #expect(marks == ["stalled", "resumed"], "\(marks)\n\(r)")
        let resumed = Self.events(events, "resumed").first
        #expect((CLIJSON.double(resumed?["after"]) ?? 0) > 3, "the stall lasted the rest of the pause: \(resumed ?? [:])")
        let diagnoses = (r.stdoutLines + r.stderrLines).filter { $0.hasPrefix("diag ") }
        #expect(diagnoses.count == 1, "the diagnose command's output, once: \(diagnoses)\n\(r)")
    }

    @Test("--on-stall warn: a stalled task is cancelled at its max-runtime, reason deadline")
    func aStalledTaskEndsAtItsMaxRuntime() async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run(["--on-stall", "warn", "--budget", "2s", "--max-runtime", "4s", "--grace", "1s"],
                                             script: Self.pausingJob, ["30"], in: scratch)
        #expect(r.status == 124, "\(r)")
        #expect(!Self.events(events, "stalled").isEmpty, "\(r)")
        let cancel = Self.events(events, "cancel")
        #expect(cancel.count == 1 && cancel.first?["reason"] as? String == "deadline", "\(cancel)")
        #expect(r.wall < .seconds(15), "\(r)")
    }

    // MARK: The checkpoint advice

    /// The advice the job read on fd 3 (its MARKER), and how long after the task's start
    /// the supervisor sent it.
    static func advice(_ r: CLIResult, _ events: String, in scratch: CLIScratch) throws -> (message: [String: Any], after: Double) {
        #expect(r.status == 0, "it stopped on its own on the advice: \(r)")
        let message = try CLIJSON.object(try #require(scratch.read("advice"), "the job read an advice: \(r)"))
        #expect(message["do"] as? String == "checkpoint" && !(message["why"] as? String ?? "").isEmpty, "\(message)")
        let sent = try #require(Self.events(events, "advice").first, "\(r)")
        let after = try #require(Self.seconds(sent)) - (try #require(Self.seconds(Self.events(events, "started").first)))
        return (message, after)
    }

    @Test("a task whose pace cannot finish reads the advice on fd 3 --checkpoint-lead before its max-runtime")
    func theAdviceComesAtTheLead() async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run(["--max-runtime", "6s", "--checkpoint-lead", "3s"], script: Self.pacedJob,
                                             ["plain", "0.01", scratch.path("advice")], in: scratch)
        let (message, after) = try Self.advice(r, events, in: scratch)
        #expect(after >= 2.95 && after < 4.5, "sent \(after) s after the start, due at 3 s")
        #expect((CLIJSON.double(message["remaining"]) ?? 0) > 2 && (CLIJSON.double(message["remaining"]) ?? 9) <= 3.05, "\(message)")
    }

    @Test("with no --checkpoint-lead, a checkpoint phase of 1 s sets the lead: the advice comes 1.5 s before max-runtime")
    func aCheckpointPhaseSetsTheLead() async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run(["--max-runtime", "6s"], script: Self.pacedJob,
                                             ["checkpoint", "0.01", scratch.path("advice")], in: scratch)
        let (message, after) = try Self.advice(r, events, in: scratch)
        #expect(after >= 4.4 && after < 5.9, "sent \(after) s after the start, due at 6 s - 1.5 × 1 s")
        #expect((CLIJSON.double(message["remaining"]) ?? 9) <= 1.6, "\(message)")
    }

    @Test("a task whose pace will finish before max-runtime gets no advice")
    func noAdviceWhenThePaceFinishes() async throws {
        let scratch = try CLIScratch()
        // Due 3 s after the start, when the job is about three quarters done and 1 s from
        // its end: it must be looked at, and declined.
        let (r, events) = try await Self.run(["--max-runtime", "8s", "--checkpoint-lead", "5s"], script: Self.pacedJob,
                                             ["plain", "0.05", scratch.path("advice")], in: scratch)
        #expect(r.status == 0, "\(r)")
        #expect(scratch.read("advice") == nil && Self.events(events, "advice").isEmpty, "\(r)")
    }

    // MARK: Phases named otherwise

    @Test("OVERTIME_PHASE= sent with Debian's systemd-notify shows as a phase event")
    func systemdNotifyNamesAPhase() async throws {
        let scratch = try CLIScratch()
        let events = scratch.path("events.jsonl")
        let r = try await cliRun(["run", "--events", events, "--", "/bin/sh", "-c",
                                  "systemd-notify OVERTIME_PHASE=compile || exit 9; sleep 0.3"], in: scratch)
        #expect(r.status == 0, "\(r)")
        let phases = Self.events(events, "phase").compactMap { $0["name"] as? String }
        #expect(phases == ["compile"], "\(phases)\n\(r)")
    }

    @Test("a phase with a bad window (-1, \"x\") is a protocol error, and the task goes on")
    func aBadWindowIsAProtocolError() async throws {
        let scratch = try CLIScratch()
        let (r, events) = try await Self.run([], script: """
            send({"type": "phase", "name": "load", "window": -1})
            send({"type": "phase", "name": "load", "window": "x"})
            send({"type": "phase", "name": "train", "window": 5})
            send({"type": "result", "value": "went on"})
            """, [], in: scratch)
        #expect(r.status == 0, "\(r)")
        let errors = Self.events(events, "protocol-error").compactMap { $0["message"] as? String }
        #expect(errors.count == 2 && errors.allSatisfy { $0.contains("`window`") }, "\(errors)")
        let phases = Self.events(events, "phase").map { "\($0["name"] as? String ?? "?") \(CLIJSON.int($0["window"]) ?? -1)" }
        #expect(phases == ["train 5"], "only the good one entered: \(phases)")
        #expect(Self.events(events, "result").first?["value"] as? String == "went on")
    }
}
