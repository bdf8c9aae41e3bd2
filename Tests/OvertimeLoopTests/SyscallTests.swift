import Foundation
import OvertimeLoop
import Synchronization
import Testing

// The plain-system-call helpers every module above the loop goes through: Syscall.retrying,
// Descriptors.writeAll, and ChildExit's decoding of a wait status.

/// How often the SIGUSR2 handler ran (a C handler captures nothing, so it is global).
private let interruptions = Atomic<Int>(0)

@Suite(.serialized) struct SyscallTests {
    @Test func aFailureIsASystemErrorWithItsErrnoAndOperation() {
        var byte: UInt8 = 0
        var calls = 0
        #expect(throws: SystemError("read a closed descriptor", errno: EBADF)) {
            try Syscall.retrying("read a closed descriptor") { () -> Int in
                calls += 1
                return read(-1, &byte, 1)
            }
        }
        #expect(calls == 1)  // only EINTR is tried again
        #expect(throws: SystemError("open", errno: ENOENT)) {
            try Syscall.retrying("open") { open("/nonexistent/overtime-no-such-file", O_RDONLY) }
        }
        #expect((try? Syscall.retrying("getpid") { getpid() }) == getpid())
    }

    /// A read blocked on an empty pipe, interrupted again and again by a signal whose
    /// handler was installed without SA_RESTART (so read fails with EINTR each time), still
    /// returns the byte once it comes.
    @Test func aReadInterruptedBySignalsIsRetriedUntilItsByteComes() throws {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in interruptions.add(1, ordering: .relaxed) }
        action.sa_flags = 0  // no SA_RESTART: the kernel does not retry the read itself
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        #expect(sigaction(SIGUSR2, &action, &previous) == 0)
        defer { sigaction(SIGUSR2, &previous, nil) }
        interruptions.store(0, ordering: .relaxed)

        let (readEnd, writeEnd) = try Descriptors.pipe()
        defer { Descriptors.close(readEnd); Descriptors.close(writeEnd) }
        let calls = Atomic<Int>(0)
        let reader = Mutex<pthread_t?>(nil)
        let outcome = Mutex<Result<Int, SystemError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            // The thread may have inherited a mask that holds SIGUSR2 back.
            var usr2 = sigset_t()
            sigemptyset(&usr2)
            sigaddset(&usr2, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &usr2, nil)
            reader.withLock { $0 = pthread_self() }
            var byte: UInt8 = 0
            let result = Result { () throws(SystemError) in
                try Syscall.retrying("read") { () -> Int in
                    calls.add(1, ordering: .relaxed)
                    return read(readEnd, &byte, 1)
                }
            }
            outcome.withLock { $0 = result.map { $0 == 1 && byte == 42 ? $0 : -1 } }
            done.signal()
        }.start()

        // Signal the reader until its read has failed with EINTR and been made again twice.
        let deadline = ContinuousClock.now + .seconds(20)
        while calls.load(ordering: .relaxed) < 3, ContinuousClock.now < deadline {
            if let thread = reader.withLock({ $0 }) { pthread_kill(thread, SIGUSR2) }
            usleep(5_000)
        }
        var byte: UInt8 = 42
        #expect(write(writeEnd, &byte, 1) == 1)
        #expect(done.wait(timeout: .now() + 20) == .success)

        #expect(calls.load(ordering: .relaxed) >= 3)
        #expect(interruptions.load(ordering: .relaxed) >= 2)
        #expect(try outcome.withLock { $0 }?.get() == 1)
    }

    /// 4 MiB through a pipe (64 KiB of buffer): many partial writes, each picked up where
    /// the last stopped, read back whole and in order by a thread of its own.
    @Test(arguments: [false, true])
    func writeAllPutsEveryByteThroughAPipe(nonBlocking: Bool) throws {
        let (readEnd, writeEnd) = try Descriptors.pipe()
        defer { Descriptors.close(readEnd) }
        if nonBlocking {
            // Someone else's non-blocking descriptor: EAGAIN is waited out, not an error.
            #expect(fcntl(writeEnd, F_SETFL, fcntl(writeEnd, F_GETFL) | O_NONBLOCK) == 0)
        }
        let bytes = pattern(count: 4 << 20, seed: nonBlocking ? 1 : 0)
        let received = Mutex<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
        Thread {
            var all: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 << 10)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { break }
                all += chunk[0..<n]
                if all.count % (256 << 10) < n { usleep(1_000) }  // a slow reader now and then
            }
            received.withLock { $0 = all }
            done.signal()
        }.start()

        try Descriptors.writeAll(writeEnd, bytes)
        Descriptors.close(writeEnd)
        #expect(done.wait(timeout: .now() + 30) == .success)
        let got = received.withLock { $0 }
        #expect(got.count == bytes.count)
        #expect(got == bytes)
    }

    @Test func writeAllToASocketWhosePeerIsGoneThrowsEPIPERatherThanRaisingSIGPIPE() throws {
        let (mine, theirs) = try Descriptors.socketPair()
        defer { Descriptors.close(mine) }
        Descriptors.close(theirs)
        #expect(throws: SystemError("send", errno: EPIPE)) {
            try Descriptors.writeAll(mine, Array("hello\n".utf8), suppressingSIGPIPE: true)
        }
    }

    @Test func waitStatusesDecodeAnExitCodeAndASignal() throws {
        #expect(try Self.waitStatus(of: "exit 3") == .exited(3))
        #expect(try Self.waitStatus(of: "exit 0") == .exited(0))
        #expect(try Self.waitStatus(of: "kill -KILL $$") == .signaled(SIGKILL))
    }

    /// Runs `/bin/sh -c script` (posix_spawn, not the loop: the status is decoded here) and
    /// decodes the status waitpid reports for it.
    private static func waitStatus(of script: String) throws -> ChildExit {
        let arguments = ["/bin/sh", "-c", script].map { (argument: String) in strdup(argument) }
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = (arguments + [nil]).withUnsafeBufferPointer { argv in
            posix_spawn(&pid, "/bin/sh", nil, nil, UnsafeMutablePointer(mutating: argv.baseAddress!), environ)
        }
        #expect(spawned == 0)
        var status: Int32 = 0
        let reaped = try Syscall.retrying("waitpid") { waitpid(pid, &status, 0) }
        #expect(reaped == pid)
        return ChildExit(waitStatus: status)
    }
}
