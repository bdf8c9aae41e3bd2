import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Turns SIGTERM into a byte on a pipe that the reader thread watches, while a cancellation
/// scope is open — so SIGTERM cancels the Swift task instead of ending the process.
///
/// With no scope open (a job that only reports progress), SIGTERM keeps its default meaning
/// (unless a scope just closed because of the cancel: then the program is already on its way out):
/// the handler restores the default and re-raises it. A program that installed its own
/// SIGTERM handler before its first Overtime call keeps it untouched.
enum SignalRelay {
    nonisolated(unsafe) static var readEnd: Int32 = -1
    nonisolated(unsafe) private static var writeEnd: Int32 = -1
    private static let openScopes = Atomic<Int>(0)
    /// Set when a scope closes after a cancel arrived: the program is unwinding because it was
    /// told to stop, and the SIGTERM that follows the message must not cut that short.
    private static let unwinding = Atomic<Bool>(false)
    nonisolated(unsafe) private static var installed = false

    /// Called once, from the connection's set-up (before its threads start).
    static func install() {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        readEnd = fds[0]
        writeEnd = fds[1]
        var current = sigaction()
        sigaction(SIGTERM, nil, &current)
        guard current.__sigaction_handler.sa_handler == nil else { return }  // the program's own
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            if SignalRelay.openScopes.load(ordering: .relaxed) > 0 || SignalRelay.unwinding.load(ordering: .relaxed) {
                var byte: UInt8 = 1
                _ = write(SignalRelay.writeEnd, &byte, 1)
            } else {
                signal(SIGTERM, SIG_DFL)
                raise(SIGTERM)
            }
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(SIGTERM, &action, nil)
        installed = true
    }

    static func scopeOpened() { openScopes.add(1, ordering: .relaxed) }
    static func scopeClosed(afterCancel: Bool) {
        if afterCancel { unwinding.store(true, ordering: .relaxed) }
        openScopes.subtract(1, ordering: .relaxed)
    }

    static func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &buffer, buffer.count) > 0 {}
    }
}
