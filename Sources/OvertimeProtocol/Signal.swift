/// A POSIX signal: its number as Linux has it, and its name (`SIGTERM`). The one way
/// Overtime's pure code, engine, CLI and reports speak of signals; only the loop module,
/// which hands them to the kernel, deals in bare numbers (`rawValue`). The numbers are
/// Linux's (the same on x86-64 and arm64); a test holds each to the C library's constant.
public struct Signal: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    public static let hangup = Signal(rawValue: 1)
    public static let interrupt = Signal(rawValue: 2)
    public static let quit = Signal(rawValue: 3)
    public static let kill = Signal(rawValue: 9)
    public static let user1 = Signal(rawValue: 10)
    public static let segmentationFault = Signal(rawValue: 11)
    public static let user2 = Signal(rawValue: 12)
    public static let terminate = Signal(rawValue: 15)
    public static let `continue` = Signal(rawValue: 18)
    public static let windowChange = Signal(rawValue: 28)
    public static let child = Signal(rawValue: 17)
    public static let stop = Signal(rawValue: 19)

    /// The signals that cannot be an engine's warning (`--warn-signal`): INT and TERM are
    /// Overtime's own, KILL and STOP cannot be caught, CHLD is for reaping.
    public static let refusedAsEngineWarning: Set<Signal> = [.interrupt, .terminate, .kill, .stop, .child]

    /// The Linux names, by number (1 to 31; real-time signals are `SIGRTMIN+n`).
    static let names: [String] = [
        "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1",
        "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP",
        "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH",
        "SIGIO", "SIGPWR", "SIGSYS",
    ]
    /// SIGRTMIN as glibc reports it to programs (two below the kernel's are its own).
    static let realTimeMinimum: Int32 = 34
    static let realTimeMaximum: Int32 = 64

    /// `SIGTERM`; `SIGRTMIN+3`; `SIG99` for a number Linux does not have.
    public var name: String {
        if rawValue >= 1, Int(rawValue) <= Self.names.count { return Self.names[Int(rawValue) - 1] }
        if (Self.realTimeMinimum...Self.realTimeMaximum).contains(rawValue) {
            return rawValue == Self.realTimeMinimum ? "SIGRTMIN" : "SIGRTMIN+\(rawValue - Self.realTimeMinimum)"
        }
        return "SIG\(rawValue)"
    }

    public var description: String { name }

    /// A signal as people write it: `TERM`, `SIGTERM`, `sigterm`, `15`, `RTMIN+2`; nil for
    /// anything else.
    public init?(name text: String) {
        let upper = text.uppercased()
        if let number = Int32(upper) {
            guard (1...Self.realTimeMaximum).contains(number) else { return nil }
            self.init(rawValue: number)
            return
        }
        let name = upper.hasPrefix("SIG") ? upper : "SIG" + upper
        if let index = Self.names.firstIndex(of: name) {
            self.init(rawValue: Int32(index + 1))
        } else if name == "SIGRTMIN" {
            self.init(rawValue: Self.realTimeMinimum)
        } else if name.hasPrefix("SIGRTMIN+"), let offset = Int32(name.dropFirst("SIGRTMIN+".count)),
                  offset >= 0, Self.realTimeMinimum + offset <= Self.realTimeMaximum {
            self.init(rawValue: Self.realTimeMinimum + offset)
        } else {
            return nil
        }
    }
}
