#if canImport(Glibc)
import Glibc
#endif
import OvertimeProtocol
import Testing

/// `Signal` spells Linux's numbers in pure Swift; here they are held to the C library's.
@Suite struct SignalNumberTests {
    @Test func namedSignalsAreTheCLibrarys() {
        let pairs: [(Signal, Int32)] = [
            (.hangup, SIGHUP), (.interrupt, SIGINT), (.quit, SIGQUIT), (.kill, SIGKILL), (.user1, SIGUSR1),
            (.segmentationFault, SIGSEGV), (.user2, SIGUSR2), (.terminate, SIGTERM), (.continue, SIGCONT),
            (.windowChange, SIGWINCH),
        ]
        for (signal, number) in pairs { #expect(signal.rawValue == number, "\(signal)") }
        // Every name, by the C library's own description of its number.
        for number in Int32(1)...31 {
            let name = Signal(rawValue: number).name
            #expect(Signal(name: name) == Signal(rawValue: number), "\(name)")
        }
        #expect(Signal(rawValue: SIGPIPE).name == "SIGPIPE" && Signal(rawValue: SIGCHLD).name == "SIGCHLD")
        #expect(Signal(rawValue: SIGSYS).name == "SIGSYS" && Signal(rawValue: SIGSTOP).name == "SIGSTOP")
        #expect(Signal(rawValue: __libc_current_sigrtmin()).name == "SIGRTMIN")
        #expect(Signal(rawValue: __libc_current_sigrtmin() + 2).name == "SIGRTMIN+2")
    }

    @Test func namesAsPeopleWriteThem() {
        #expect(Signal(name: "TERM") == .terminate)
        #expect(Signal(name: "sigusr1") == .user1)
        #expect(Signal(name: "15") == .terminate)
        #expect(Signal(name: "RTMIN+3") == Signal(rawValue: __libc_current_sigrtmin() + 3))
        #expect(Signal(name: "TERMINATE") == nil && Signal(name: "0") == nil && Signal(name: "") == nil && Signal(name: "65") == nil)
    }
}
