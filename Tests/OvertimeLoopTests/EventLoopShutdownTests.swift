import Foundation
import OvertimeLoop
import Testing

// A loop shut down right behind a job it was handed: the loop thread may run both from one
// wake-up and close its wake-up handle while the shutting-down thread is still about to
// signal it. libuv aborts the process on a send to a closed loop, so a failure here is the
// whole test process dying of SIGABRT, not a failed expectation. The window is a few
// instructions wide: more threads than cores, each making and ending loops, give the
// scheduler many chances to preempt a thread inside it. (Before the fix this died in 2 of
// 6 runs.) The threads are its own, at the lowest priority: the suite's other tests, run
// beside it, time real processes and must not be starved by it.
@Suite struct EventLoopShutdownTests {
    @Test("a job handed over just before shutdown, thousands of times, on more threads than cores")
    func shutdownRightAfterAJob() throws {
        let threads = 8
        let rounds = 4000
        let ran = Shared(0)
        let refusedLate = Shared(0)
        let failures = Shared<[String]>([])
        let done = DispatchGroup()
        for _ in 0..<threads {
            done.enter()
            let thread = Thread {
                defer { done.leave() }
                // This thread only: on Linux a thread's nice value is its own, and 0 names
                // the calling thread.
                setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
                for _ in 0..<rounds {
                    let loop: EventLoop
                    do { loop = try EventLoop() } catch {
                        failures.update { $0.append("\(error)") }
                        return
                    }
                    let jobRan = Shared(false)
                    loop.execute { jobRan.update { $0 = true } }
                    loop.shutdown()
                    if jobRan.value { ran.update { $0 += 1 } }
                    // Refused once stopping: the job is dropped, never run.
                    if !loop.execute({}) { refusedLate.update { $0 += 1 } }
                }
            }
            thread.start()
        }
        done.wait()
        #expect(failures.value.isEmpty, "\(failures.value.prefix(3))")
        // A job accepted before shutdown runs before the handles close.
        #expect(ran.value == threads * rounds)
        #expect(refusedLate.value == threads * rounds)
    }
}
