import OvertimeLoop
import OvertimeProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The live page could not be served.
public enum LivePageError: Error, Sendable, CustomStringConvertible {
    /// The address cannot be bound: in use (EADDRINUSE), not an address of this machine.
    case cannotListen(MetricsAddress, SystemError)
    /// The kernel gave no random bytes for the token.
    case noToken(SystemError)
    /// The supervisor shut down before the page was set up.
    case supervisorShutDown

    public var description: String {
        switch self {
        case let .cannotListen(address, error):
            let advice = error.errno == EADDRINUSE ? " (another program listens there; choose another port, or 0 for any free one)" : ""
            return "cannot serve the live page on \(address): \(error.reason)\(advice)"
        case let .noToken(error):
            return "no random bytes for the live page's token: \(error.reason)"
        case .supervisorShutDown:
            return "the supervisor has shut down"
        }
    }
}

extension Supervisor {
    /// Serves the live page (`--ui`; docs/ui.md) on `address`, over what `attach` gives on
    /// the loop thread: the control target its API acts on, and where the watcher lines of
    /// the control server made for it come from (`install`).
    /// - Returns: the page's URL, token included (its port the kernel's choice for port 0).
    /// - Throws: `LivePageError` when the address cannot be bound.
    func startLivePage(_ address: MetricsAddress,
                       attach: @escaping @Sendable () -> (target: any ControlTarget, install: (ControlServer) -> Void)) throws(LivePageError) -> String {
        let token: String
        do {
            token = try LivePageToken.make()
        } catch {
            throw .noToken(error)
        }
        let done = Completion<Result<String, LivePageError>>()
        let core = self.core
        let containment = self.containment
        let runID = self.runID
        let accepted = loop.execute { [loop] in
            let (target, install) = attach()
            do throws(SystemError) {
                let control = try ControlServer(loop: loop, path: nil, target: target) { _ in }
                control.containment = containment
                control.runID = runID
                let server = try LivePageServer(loop: loop, address: address, token: token, target: target, control: control)
                install(control)
                core.value.livePage = server
                // Memory and CPU are read off the loop from the first time someone looks.
                server.onFirstLook = { core.value.sampleUsage(loop: loop, share: UsageSampler.pageShare) }
                done.complete(.success(server.access.url))
            } catch {
                done.complete(.failure(.cannotListen(address, error)))
            }
        }
        guard accepted else { throw .supervisorShutDown }
        return try done.waitBlocking().get()
    }

    /// Serves the live page for this supervisor's own tasks (`startLivePage`).
    public func serveLivePage(on address: MetricsAddress) throws(LivePageError) -> String {
        try startLivePage(address) { [self] in (core.value, { server in self.addSink(ControlWatchers(server)) }) }
    }
}
