import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// `--window auto` over the recorded and synthesized pace traces (Tests/Fixtures/pace-traces):
/// a task whose silent parts are marked (a phase, a closed bar) is never cancelled, and a
/// hang put into it is caught within the window in force when it hung.
@Suite struct PaceTraceTests {
    /// The traces where the learned window trips with no hang: a silence nothing marks (an
    /// evaluation, a checkpoint, a rare slow step) or a pace that jumps past the margin at
    /// once. A silence that trips is not learned from, so the same one trips again.
    static let trippingTraces: Set<String> = ["epochs-eval-bare", "checkpoint-bare", "steady-hiccups", "pace-change-6x"]

    static func traces() throws -> [PaceTrace] {
        try PaceTrace.all()
    }

    static func learned(_ trace: PaceTrace, onStall: StallAction = .cancel) -> BudgetPolicy {
        HangOption.learned.policy(for: trace, onStall: onStall)
    }

    @Test func everyTraceReadsAndSaysWhereItCameFrom() throws {
        let traces = try Self.traces()
        #expect(traces.count >= 12)
        #expect(traces.contains { $0.origin == "recorded" })
        for trace in traces {
            #expect(["recorded", "synthesized"].contains(trace.origin), "\(trace.name)")
            #expect(trace.messages.count > 50, "\(trace.name)")
            #expect(zip(trace.messages, trace.messages.dropFirst()).allSatisfy { $0.at <= $1.at }, "\(trace.name)")
            #expect(trace.hangs.count >= 3, "\(trace.name)")
            #expect(trace.messages.first!.at < trace.budget, "\(trace.name): the budget covers the first report")
        }
    }

    @Test func aTaskWhoseSilencesAreMarkedIsNeverCancelled() throws {
        for trace in try Self.traces() where !Self.trippingTraces.contains(trace.name) {
            let replay = PaceReplay.run(trace.messages, policy: Self.learned(trace))
            #expect(replay.cancelled == nil, "\(trace.name): \(replay.trips.map(Self.describe))")
            #expect(!replay.learned.isEmpty, "\(trace.name): a window was learned")
        }
    }

    @Test func anUnmarkedSilenceOrASuddenlySlowerPaceTrips() throws {
        for name in Self.trippingTraces.sorted() {
            let trace = try PaceTrace.load(name)
            let replay = PaceReplay.run(trace.messages, policy: Self.learned(trace, onStall: .warn))
            #expect(!replay.trips.isEmpty, "\(name)")
            for trip in replay.trips {
                #expect(trip.learned && trip.interval.map { $0 > trip.window! } != false, "\(name): \(Self.describe(trip))")
            }
        }
    }

    /// The rule: a report moves the deadline to max(start + budget, now + the window in
    /// force), so a task that hangs right after one is caught at the later of those. Past
    /// the warm-up and not right after a boundary, that window is learned and at most
    /// max(1 s, 5 × the median of the last 64 intervals): for steps of a steady pace with
    /// ±20% jitter, 3 × their 95th percentile is at most 3.6 × their median. Right after a
    /// boundary it is the phase's own window; else, once two silences after that phase's
    /// boundaries were seen, 2 × the longest of them (at least 1 s); else the budget.
    @Test func aHangIsCaughtWhenTheWindowInForceRunsOut() throws {
        let learnedAt: Set<String> = ["mid-run", "mid-epoch", "late", "after-evaluation", "after-checkpoint",
                                      "before-change", "after-change"]
        for trace in try Self.traces() where !Self.trippingTraces.contains(trace.name) {
            for hang in trace.hangs {
                let before = trace.hung(after: hang.after)
                let replay = PaceReplay.run(before, policy: Self.learned(trace), thenSilenceFor: .seconds(7 * 3600))
                let label = "\(trace.name) hung \(hang.name) at \(hang.after)"
                guard let trip = replay.trips.first, let window = trip.window else {
                    Issue.record("\(label): not cancelled")
                    continue
                }
                #expect(replay.cancelled?.reason == .timeout, "\(label)")
                #expect(replay.trips.count == 1 && trip.lastReport == before.last!.at, "\(label): \(replay.trips.map(Self.describe))")
                #expect(trip.at == max(trace.budget, trip.lastReport + window), "\(label): \(Self.describe(trip))")
                guard trip.lastReport + window > trace.budget else { continue }
                if learnedAt.contains(hang.name) {
                    let bound = max(LearnedWindows.default.minimum, Self.medianInterval(before.suffix(65)) * 5)
                    #expect(trip.learned && window <= bound, "\(label): \(Self.describe(trip)), bound \(bound)")
                } else if trip.learned {
                    let silences = Self.boundarySilences(before)
                    #expect(silences.count >= PhaseWatch.boundariesNeeded, "\(label): \(Self.describe(trip))")
                    let bound = max(LearnedWindows.default.minimum, (silences.max() ?? .zero) * 2)
                    #expect(window <= bound, "\(label): \(Self.describe(trip)), bound \(bound)")
                }
            }
        }
    }

    @Test func aSteadyPaceIsCaughtWithinASecondAndAHalf() throws {
        let trace = try PaceTrace.load("steady")
        let mid = try #require(trace.hangs.first { $0.name == "mid-run" })
        let replay = PaceReplay.run(trace.hung(after: mid.after), policy: Self.learned(trace), thenSilenceFor: .seconds(60))
        let detection = try #require(replay.detection)
        #expect(detection <= .milliseconds(1500))
        #expect(replay.learned.map(\.phase) == ["main"])
    }

    /// The silences that follow a phase entered or a bar closed, before the hang.
    static func boundarySilences(_ messages: [PaceTrace.Message]) -> [Duration] {
        zip(messages, messages.dropFirst()).compactMap { message, next in
            switch message.message {
            case .phase: next.at - message.at
            case let .progress(p) where p.closed: next.at - message.at
            default: nil
            }
        }
    }

    static func medianInterval(_ messages: ArraySlice<PaceTrace.Message>) -> Duration {
        let intervals = zip(messages, messages.dropFirst()).map { $1.at - $0.at }.sorted()
        return intervals[intervals.count / 2]
    }

    static func describe(_ trip: PaceReplay.Trip) -> String {
        let window = trip.window.map { "\(PaceTrace.seconds($0)) s" } ?? "none"
        let interval = trip.interval.map { "\(PaceTrace.seconds($0)) s" } ?? "no report after"
        return "tripped at \(PaceTrace.seconds(trip.at)) s in \(trip.phase ?? PhaseNames.initial): window \(window)"
            + "\(trip.learned ? " (learned)" : ""), silence \(interval) from \(PaceTrace.seconds(trip.lastReport)) s"
    }
}
