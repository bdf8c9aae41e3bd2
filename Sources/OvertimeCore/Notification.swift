import OvertimeProtocol

/// What a daemon says with sd_notify(3) on the task's `NOTIFY_SOCKET` (DESIGN §3b): one
/// datagram of `KEY=VALUE` lines, read in order. Keys this does not know are ignored, as
/// systemd ignores them.
public enum Notification: Sendable, Equatable {
    /// `READY=1`: the task is up.
    case ready
    /// `STATUS=…`: shown as the task's progress detail.
    case status(String)
    /// `EXTEND_TIMEOUT_USEC=N`: asks for N µs more, as an `extend` would.
    case extendTimeout(microseconds: UInt64)
    /// `WATCHDOG=1`: a heartbeat.
    case watchdog
    /// `WATCHDOG=trigger`: the daemon declares itself hung (systemd treats it as a missed
    /// watchdog): the task's budget has run out.
    case watchdogTrigger
    /// `BARRIER=1`: the descriptor sent with it is closed once everything before it is
    /// handled, which tells the sender its messages have been read.
    case barrier
    /// `STOPPING=1`, `ERRNO=…`, `MAINPID=…`, `RELOADING=1`: recorded as events.
    case recorded(key: String, value: String)
    /// `OVERTIME_PHASE=name`: the task entered a phase, as a `phase` message says.
    case phase(String)

    /// The keys recorded as events rather than acted on.
    static let recordedKeys: Set<String> = ["STOPPING", "ERRNO", "MAINPID", "RELOADING", "BUSERROR", "EXIT_STATUS"]

    /// A datagram's notifications, in order, and the lines that were not valid (each a
    /// protocol error: the rest of the datagram still counts).
    public static func parse(_ bytes: [UInt8]) -> (notifications: [Notification], problems: [ProtocolError]) {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return ([], [ProtocolError(.invalidUTF8, "an sd_notify datagram that is not UTF-8")])
        }
        var notifications: [Notification] = []
        var problems: [ProtocolError] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            guard let equals = line.firstIndex(of: "="), equals != line.startIndex else {
                problems.append(ProtocolError(.badNotification, "expected KEY=VALUE, got \"\(line.prefix(40))\""))
                continue
            }
            let key = String(line[..<equals])
            let value = String(line[line.index(after: equals)...])
            guard key.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }) else {
                problems.append(ProtocolError(.badNotification, "\"\(key.prefix(40))\" is not an sd_notify key (upper-case letters, digits, '_')"))
                continue
            }
            switch key {
            case "READY":
                if value == "1" { notifications.append(.ready) }
            case "STATUS":
                notifications.append(.status(value))
            case "EXTEND_TIMEOUT_USEC":
                guard let microseconds = UInt64(value) else {
                    problems.append(ProtocolError(.wrongType, "EXTEND_TIMEOUT_USEC must be a whole number of microseconds"))
                    continue
                }
                notifications.append(.extendTimeout(microseconds: microseconds))
            case "WATCHDOG":
                if value == "1" { notifications.append(.watchdog) } else if value == "trigger" { notifications.append(.watchdogTrigger) }
            case "BARRIER":
                if value == "1" { notifications.append(.barrier) }
            case "OVERTIME_PHASE":
                guard let name = ChildLine.phaseName(value) else {
                    problems.append(ProtocolError(.badNotification, "OVERTIME_PHASE needs a phase name"))
                    continue
                }
                notifications.append(.phase(name))
            default:
                if recordedKeys.contains(key) { notifications.append(.recorded(key: key, value: value)) }
            }
        }
        return (notifications, problems)
    }
}

extension ReporterID {
    /// The task's sd_notify socket: its messages count as one reporter's (a datagram has no
    /// connection to answer on, so nothing is sent to it).
    public static let notifySocket = ReporterID(-1)
}
