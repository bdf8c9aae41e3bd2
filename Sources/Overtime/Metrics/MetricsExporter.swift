import OvertimeLoop
import OvertimeProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a supervisor's metrics are for (docs/metrics.md): where to serve them, where to
/// write them, and what to call the software serving them.
public struct MetricsSettings: Sendable {
    /// `--metrics`: where `/metrics` is served; nil: not served.
    public var address: MetricsAddress?
    /// `--metrics-file`: rewritten whole every `fileInterval` and once at the end.
    public var file: String?
    public var fileInterval: Duration = .seconds(5)
    /// The version `overtime_build_info` names.
    public var version: String

    public init(address: MetricsAddress? = nil, file: String? = nil, version: String) {
        self.address = address
        self.file = file
        self.version = version
    }
}

/// Metrics could not be set up.
public enum MetricsError: Error, Sendable, CustomStringConvertible {
    /// The address cannot be bound: in use (EADDRINUSE), not an address of this machine.
    case cannotListen(MetricsAddress, SystemError)
    /// The `--metrics-file` cannot be written.
    case cannotWriteFile(path: String, OutputFile.Refusal)
    /// The supervisor shut down before the metrics were set up.
    case supervisorShutDown

    public var description: String {
        switch self {
        case let .cannotListen(address, error):
            let advice = error.errno == EADDRINUSE ? " (another program listens there; choose another port, or 0 for any free one)" : ""
            return "cannot serve metrics on \(address): \(error.reason)\(advice)"
        case let .cannotWriteFile(path, refusal):
            return "--metrics-file: cannot write \(path): \(refusal.reason)"
        case .supervisorShutDown:
            return "the supervisor has shut down"
        }
    }
}

/// A supervisor's metrics on its loop thread: the counting sink, the page rendered from
/// live state on each request, the HTTP endpoint and the textfile. Loop-thread only.
final class MetricsExporter {
    /// Connections served at once; a new one pushes out the oldest (`MetricsClientSlots`).
    /// Each holds at most one page in libuv's write queue, so clients that never read cost
    /// never more than this many pages in all.
    static let maxClients = 32
    /// Connections served at once from one host (`MetricsClientSlots.perPeer` says why).
    static let maxClientsPerPeer = 8
    /// How long a client has to send its request, and then to take the answer.
    static let clientTime = Duration.seconds(10)

    let recorder = MetricsRecorder()
    private var info: RunMetrics
    private let target: any ControlTarget
    private let loop: EventLoop
    private var listener: TCPListener?
    private var clients: [ObjectIdentifier: HTTPClient] = [:]
    private var slots = MetricsClientSlots<ObjectIdentifier>(capacity: maxClients, perPeer: maxClientsPerPeer)
    private let file: OutputFile?
    /// The textfile's pages, written off the loop (a stalled filesystem never holds it): only
    /// the newest page waits.
    private let fileWriter: QueuedWriter?
    private let fileInterval: Duration
    private var fileTimer: LoopTimer?
    private let onProblem: @Sendable (String) -> Void
    private var finished = false

    /// - Parameter file: the `--metrics-file`, opened (`MetricsFile.open`) off the loop.
    init(settings: MetricsSettings, file: MetricsFile?, info: RunMetrics, target: any ControlTarget, loop: EventLoop,
         onProblem: @escaping @Sendable (String) -> Void) throws(MetricsError) {
        self.info = info
        self.info.sweepsWithoutSeries = target.sweepsWithoutSeries
        recorder.sweepsWithoutSeries = self.info.sweepsWithoutSeries
        recorder.stragglerGroups = target.stragglerGroups
        self.target = target
        self.loop = loop
        self.onProblem = onProblem
        fileInterval = settings.fileInterval
        self.file = file?.output
        fileWriter = file.map { Self.pageWriter($0.output, onProblem: onProblem) }
        if let earlier = file?.earlierPage, info.lastSuccess == nil {
            // The file is the textfile collector's only memory: a failed run must not make it
            // forget when the job last succeeded.
            self.info.lastSuccess = RunMetrics.lastSuccess(inPage: earlier)
        }
        if let address = settings.address {
            do {
                listener = try TCPListener(loop: loop, host: address.host, port: address.port) { [weak self] connection in
                    self?.accept(connection)
                }
            } catch {
                throw .cannotListen(address, error)
            }
        }
        if file != nil {
            writeFile()
            scheduleFile()
        }
    }

    /// The address bound, as `ADDR:PORT`.
    var boundAddress: MetricsAddress? {
        listener.map { MetricsAddress(host: $0.host, port: $0.port) }
    }

    /// The page now.
    func page() -> [UInt8] {
        info.render(target.controlStatus(now: .now()), recorder)
    }

    /// The run is over (every task has ended): the last page is written, with the run's
    /// success time when it succeeded, and nothing is served any more.
    func finish() {
        guard !finished else { return }
        finished = true
        if info.allSucceeded(target.controlStatus(now: .now()), recorder) {
            info.lastSuccess = info.unixSeconds(.now())
        }
        fileTimer?.close()
        fileTimer = nil
        if file != nil {
            writeFile()
            // The run is over: the last page is written before the supervisor goes, however
            // long the filesystem takes.
            fileWriter?.flush()
        }
        listener?.close()
        listener = nil
        for client in Array(clients.values) { client.drop() }
    }

    private func scheduleFile() {
        let timer = fileTimer ?? LoopTimer(loop: loop)
        fileTimer = timer
        timer.schedule(inNanoseconds: fileInterval.nanoseconds) { [weak self] in
            guard let self, !self.finished else { return }
            self.writeFile()
            self.scheduleFile()
        }
    }

    /// Queues the page for the file (node_exporter may read it at any moment: it is replaced
    /// whole where it is a file of ours); only the newest page waits.
    private func writeFile() {
        fileWriter?.write(page(), .latest(key: 0))
    }

    /// A writer of whole pages to `file`: a page waiting is replaced by a newer one (the soft
    /// limit is 0), so each write is one page. A failure is said once, and the run goes on.
    private static func pageWriter(_ file: OutputFile, onProblem: @escaping @Sendable (String) -> Void) -> QueuedWriter {
        let failed = Atomic<Bool>(false)
        return QueuedWriter(limits: .init(soft: 0, hard: .max), output: { page in
            if let failure = file.write(page) {
                if !failed.exchange(true, ordering: .relaxed) {
                    onProblem("--metrics-file: cannot write \(file.path): \(failure.reason); the run goes on")
                }
            } else if failed.exchange(false, ordering: .relaxed) {
                onProblem("--metrics-file: \(file.path) is written again")
            }
            return true
        }, dropNote: { _, _ in })
    }

    /// Serves `connection`, pushing out the clients it takes the place of.
    private func accept(_ connection: TCPConnection) {
        guard !finished else {
            connection.close()
            return
        }
        let client = HTTPClient(connection: connection, loop: loop, time: Self.clientTime, maxBody: nil, respond: { [weak self] read in
            let head = MetricsHTTP.head(read)
            guard let self, case let .complete(method, path) = head else { return .whole(MetricsHTTP.refusal(head)) }
            return .whole(MetricsHTTP.response(method: method, path: path, page: self.page))
        }, onGone: { [weak self] client in
            self?.clients[ObjectIdentifier(client)] = nil
            self?.slots.remove(ObjectIdentifier(client))
        })
        for pushedOut in slots.admit(ObjectIdentifier(client), peer: connection.peerAddress()) {
            if let older = clients[pushedOut] { older.pushOut() }
        }
        clients[ObjectIdentifier(client)] = client
        client.begin()
    }
}

/// The `--metrics-file` as the run starts: where its pages go, and the page an earlier run
/// left there (read only from a regular file of the user's own: a FIFO or a device may never
/// answer).
struct MetricsFile: Sendable {
    let output: OutputFile
    let earlierPage: [UInt8]?

    /// - Throws: `MetricsError` when `path` cannot be written.
    static func open(_ path: String) throws(MetricsError) -> MetricsFile {
        let output: OutputFile
        do {
            output = try OutputFile(path: path)
        } catch {
            throw .cannotWriteFile(path: path, error)
        }
        return MetricsFile(output: output, earlierPage: output.isReplaced ? Descriptors.readWholeFile(path) : nil)
    }
}

extension Supervisor {
    /// Serves and/or writes the run's metrics (docs/metrics.md), counted from now on.
    /// - Parameters:
    ///   - command: `run` or `batch`, for `overtime_run_info`.
    ///   - attach: run on the loop thread: what the metrics show (a control target) and
    ///     the batch deadline, if any.
    ///   - onProblem: told, on the loop thread, of a metrics file that cannot be written.
    /// - Returns: the address bound, when one was asked for.
    /// - Throws: `MetricsError` when the address cannot be bound.
    func startMetrics(_ settings: MetricsSettings, command: String, onProblem: @escaping @Sendable (String) -> Void,
                      attach: @escaping @Sendable () -> (target: any ControlTarget, deadline: MonotonicInstant?)) throws(MetricsError) -> MetricsAddress? {
        // Opened here, not on the loop: a FIFO's open waits for its reader, and a page on a
        // stalled filesystem may be slow to read.
        let file = try settings.file.map { path throws(MetricsError) in try MetricsFile.open(path) }
        let done = Completion<Result<MetricsAddress?, MetricsError>>()
        let core = self.core
        let runID = self.runID
        let accepted = loop.execute { [loop] in
            let (target, deadline) = attach()
            let info = RunMetrics(version: settings.version, runID: runID, command: command, startedAt: .now(),
                                  deadline: deadline, wallOffsetNanoseconds: core.value.encoder.wallOffsetNanoseconds)
            do throws(MetricsError) {
                let exporter = try MetricsExporter(settings: settings, file: file, info: info, target: target, loop: loop, onProblem: onProblem)
                core.value.metrics = exporter
                core.value.sampleUsage(loop: loop, share: UsageSampler.metricsShare)
                core.value.sinks.append(exporter.recorder)
                done.complete(.success(exporter.boundAddress))
            } catch {
                done.complete(.failure(error))
            }
        }
        guard accepted else { throw .supervisorShutDown }
        return try done.waitBlocking().get()
    }

    /// Serves and/or writes the run's metrics (`--metrics`, `--metrics-file`;
    /// docs/metrics.md). Call before the task is spawned, so that it counts from the start.
    /// The file gets its last page when the supervisor shuts down. A program that serves
    /// them ignores SIGPIPE (a scraper that resets its connection would raise it).
    /// - Returns: the address bound, when one was asked for (its port the kernel's choice
    ///   for port 0).
    /// - Throws: `MetricsError` when the address cannot be bound.
    public func serveMetrics(_ settings: MetricsSettings, onProblem: @escaping @Sendable (String) -> Void = { _ in }) throws(MetricsError) -> MetricsAddress? {
        let core = self.core
        return try startMetrics(settings, command: "run", onProblem: onProblem) { (core.value, nil) }
    }
}
