import OvertimeLoop
import OvertimeProtocol
import Synchronization

/// How a supervisor stands in its process, given once before its tasks start: what
/// `overtime run` and `overtime batch` both do, as one value carried out in one order by
/// `Supervisor.setUp` and `BatchRunner.setUp`. Call `Supervisor.holdTerminationSignalsUntilWatched()`
/// before making the supervisor, so that a signal in between waits for the watchers set up here.
public struct SupervisorSetup: Sendable {
    /// The time an orchestrator gives the whole shutdown (`--shutdown-grace`): on SIGINT or
    /// SIGTERM each task's grace is clipped to fit in it (`Supervisor.grace(within:)`).
    public var shutdownGrace: Duration?
    /// Told of each SIGINT or SIGTERM before it is acted on, and whether it is the first
    /// (the second kills at once), on the loop thread.
    public var onTerminationSignal: @Sendable (Signal, _ first: Bool) -> Void = { _, _ in }
    /// The engine's warning (`--warn-signal`), turned into `expiring` for every running task;
    /// its notes go to `onNote`.
    public var engineWarning: EngineWarning?
    /// Passed on to every running task's process group.
    public var forwardedSignals: [Signal] = Supervisor.forwardedSignals
    /// Makes the process a child subreaper that reaps the tasks' orphans
    /// (`Supervisor.adoptOrphans`): right for a program whose only children are its tasks.
    public var adoptsOrphans = true
    /// The control socket's path; nil for the per-run default, which the supervisor runs
    /// without, said through `onNotice`, when it cannot be had. A path given must work.
    public var controlPath: String?
    /// What this supervisor runs, for `overtime ctl list`.
    public var controlDescription: SupervisorDescription?
    /// Told of each control connection refused for its user.
    public var onRefusedClient: @Sendable (String) -> Void = { _ in }
    /// `--metrics`, `--metrics-file`; nil for none.
    public var metrics: MetricsSettings?
    /// `--ui`: where the live page is served; nil for none. Its URL goes to `onLivePage`
    /// and to `ctl list` (through the control socket's description).
    public var livePage: MetricsAddress?
    /// Told the live page's URL, token included, once it is served.
    public var onLivePage: @Sendable (String) -> Void = { _ in }
    /// The engine's warnings as they come, and a Slurm query that failed.
    public var onNote: @Sendable (String) -> Void = { _ in }
    /// What befalls the supervisor itself: its task guard's fate, a default control socket
    /// it runs without, a metrics page that cannot be written, where the metrics are served.
    public var onNotice: @Sendable (String) -> Void = { _ in }

    public init() {}

    /// A part of the setup that could not be had: the caller shuts the supervisor down and
    /// stops there (the CLI exits 125).
    public enum Failure: Error, Sendable, CustomStringConvertible {
        case control(ControlSocketError)
        case metrics(MetricsError)
        case livePage(LivePageError)

        public var description: String {
            switch self {
            case let .control(error): "\(error)"
            case let .metrics(error): "\(error)"
            case let .livePage(error): "\(error)"
            }
        }
    }

    /// What differs between a lone supervisor and a batch: what a termination signal does,
    /// and what the control socket and the metrics page show.
    struct Target {
        var watchTermination: (_ shutdownGrace: Duration?, _ onSignal: @escaping @Sendable (Signal) -> Void) -> Void
        var serveControl: (SupervisorSetup, _ onListenFailure: (@Sendable (ControlSocketError) -> Void)?) throws(ControlSocketError) -> String
        var serveMetrics: (MetricsSettings, _ onProblem: @escaping @Sendable (String) -> Void) throws(MetricsError) -> MetricsAddress?
        var serveLivePage: (MetricsAddress) throws(LivePageError) -> String
    }

    /// Carries the setup out on `supervisor`, in order: termination signals, the engine's
    /// warning, forwarded signals, orphans, notices, the live page (whose URL the control
    /// socket's description then holds), the control socket, the metrics.
    func carryOut(on supervisor: Supervisor, _ target: Target) throws(Failure) {
        let count = SignalCount()
        let onTerminationSignal = self.onTerminationSignal
        target.watchTermination(shutdownGrace) { signal in onTerminationSignal(signal, count.first()) }
        if let engineWarning { supervisor.expireOnEngineSignal(engineWarning, onNote) }
        supervisor.forwardSignals(forwardedSignals)
        if adoptsOrphans { supervisor.adoptOrphans() }
        supervisor.onNotice(onNotice)
        let onNotice = self.onNotice
        var setup = self
        if let livePage {
            do throws(LivePageError) {
                let url = try target.serveLivePage(livePage)
                setup.controlDescription?.livePage = url
                onLivePage(url)
            } catch {
                throw .livePage(error)
            }
        }
        let withoutControlSocket: @Sendable (ControlSocketError) -> Void = { error in
            onNotice("no control socket (\(error)); running without one")
        }
        do throws(ControlSocketError) {
            // The default socket's failure to listen is not worth waiting for: the tasks run
            // without it either way, and the notice comes when it happens.
            _ = try target.serveControl(setup, controlPath == nil ? withoutControlSocket : nil)
        } catch where controlPath == nil {
            // The tasks matter more than the default socket (an unwritable /tmp, say).
            withoutControlSocket(error)
        } catch {
            throw .control(error)
        }
        if let metrics {
            do throws(MetricsError) {
                if let address = try target.serveMetrics(metrics, onNotice) { onNotice("metrics at http://\(address)/metrics") }
            } catch {
                throw .metrics(error)
            }
        }
    }
}

/// Counts termination signals: the first is a cancel, the ones after it kill.
private final class SignalCount: Sendable {
    private let count = Atomic<Int>(0)

    /// Records one; true for the first.
    func first() -> Bool {
        count.add(1, ordering: .relaxed).oldValue == 0
    }
}

extension Supervisor {
    /// Carries out `setup` for this supervisor's own tasks: SIGINT cancels every running
    /// task with reason `user`, SIGTERM with `shutdown` (`cancelAllOnTerminationSignals`).
    /// - Throws: `SupervisorSetup.Failure` when the control socket asked for, or the
    ///   metrics, cannot be had.
    public func setUp(_ setup: SupervisorSetup) throws(SupervisorSetup.Failure) {
        try setup.carryOut(on: self, SupervisorSetup.Target(
            watchTermination: { [self] grace, onSignal in cancelAllOnTerminationSignals(shutdownGrace: grace, onSignal) },
            serveControl: { [self] (setup, onListenFailure) throws(ControlSocketError) in
                try serveControl(at: setup.controlPath, describing: setup.controlDescription, onRefused: setup.onRefusedClient,
                                 onListenFailure: onListenFailure)
            },
            serveMetrics: { [self] (settings, onProblem) throws(MetricsError) in try serveMetrics(settings, onProblem: onProblem) },
            serveLivePage: { [self] address throws(LivePageError) in try serveLivePage(on: address) }
        ))
    }
}
