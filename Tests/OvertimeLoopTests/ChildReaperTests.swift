import Foundation
import OvertimeLoop
import Testing

// The reaper on its own: every child's exit reported once with its real status, however
// many end together, and orphans taken in by a subreaper reaped rather than left as zombies.
@Suite struct ChildReaperTests {
    @Test func manyChildrenEndingAtOnceAreEachReportedOnceWithTheirOwnStatus() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        // Exit codes 0…39, and ten killed by signals: 50 children started in one loop turn,
        // so their SIGCHLDs arrive together and merge.
        let signals: [Int32] = [SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGUSR1]
        var expected: [ChildExit] = (0..<40).map { .exited(Int32($0)) }
        expected += (0..<10).map { .signaled(signals[$0 % signals.count]) }
        let wanted = expected
        let reports = Shared<[Int32: [ChildExit]]>([:])
        let spawned = await onLoop(loop) { () -> Result<[Int32: ChildExit], SpawnError> in
            var byPID: [Int32: ChildExit] = [:]
            do throws(SpawnError) {
                for outcome in wanted {
                    let script = switch outcome {
                    case let .exited(code): "exit \(code)"
                    case let .signaled(signal): "kill -\(signal) $$"
                    }
                    var pid: Int32 = 0
                    let child = try ChildProcessTests.spawn(loop, ["/bin/sh", "-c", script]) { how in
                        reports.update { $0[pid, default: []].append(how) }
                    }
                    pid = child.pid
                    byPID[pid] = outcome
                }
            } catch {
                return .failure(error)
            }
            return .success(byPID)
        }
        let byPID = try spawned.get()
        #expect(byPID.count == wanted.count)
        #expect(await eventually { reports.value.count == byPID.count })
        // Room for a second, wrong, report of any of them.
        try await Task.sleep(for: .milliseconds(200))
        let seen = reports.value
        for (pid, outcome) in byPID {
            #expect(seen[pid] == [outcome], "child \(pid)")
        }
        #expect(Set(seen.keys) == Set(byPID.keys))
    }

    /// Subreaping changes the whole process: this runs in a test process of its own
    /// (`orphanSide`), which is checked here.
    @Test func anAdoptedOrphanIsReapedAndLeftNoZombie() async throws {
        try await ChildTestProcess.expectPasses("orphanSide")
    }

    @Test(.enabled(if: ChildTestProcess.runs("orphanSide")))
    func orphanSide() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        #expect(await onLoop(loop) { loop.adoptOrphans() })
        let path = "\(ChildTestProcess.directory)/orphan"
        // The shell exits at once; its `sleep`, still running, is reparented to us.
        let exit = Shared<ChildExit?>(nil)
        let spawned = await onLoop(loop) { () -> SpawnError? in
            do throws(SpawnError) {
                _ = try ChildProcessTests.spawn(loop, ["/bin/sh", "-c", "sleep 1 & echo $! > \(path)"]) { how in
                    exit.update { $0 = how }
                }
                return nil
            } catch {
                return error
            }
        }
        #expect(spawned == nil)
        #expect(await eventually { exit.value != nil })
        #expect(exit.value == .exited(0))
        let orphan = try #require(await pidWritten(to: path))
        // Adopted (it may have ended already: then it must not linger either).
        if isAlive(orphan) { #expect(parentPID(of: orphan) == getpid()) }
        // Gone entirely once it ends: no zombie left in /proc.
        #expect(await eventually { access("/proc/\(orphan)", F_OK) != 0 }, "orphan \(orphan) stayed")
        try ChildTestProcess.finish()
    }
}
