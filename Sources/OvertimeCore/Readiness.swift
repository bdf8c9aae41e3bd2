/// Besides its channel, how a task may say it is up and alive (DESIGN §3b).
public struct Readiness: Sendable, Equatable {
    /// Give the task `NOTIFY_SOCKET` (and `WATCHDOG_USEC` when it has a window), so that a
    /// daemon that speaks sd_notify reports without change.
    public var notifySocket: Bool
    /// s6's notification-fd: a newline the task writes on this descriptor marks it ready.
    public var notifyFD: Int32?

    public init(notifySocket: Bool = true, notifyFD: Int32? = nil) {
        self.notifySocket = notifySocket
        self.notifyFD = notifyFD
    }

    /// The descriptors a task may be given for `notifyFD`: above the channel (fd 3), and
    /// within what a spawn places.
    public static let notifyFDRange: ClosedRange<Int32> = 4...15
}
