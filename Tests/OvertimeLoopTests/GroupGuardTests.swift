import Foundation
@testable import OvertimeLoop
import Testing

// The group guard for real: a forked process that SIGKILLs every task group still listed
// when its socket closes (the supervisor died, or closed it). Each task here is a shell
// with a `sleep` of its own in its group: the parent-death signal reaches only the shell,
// so only the guard can kill the `sleep`.
@Suite struct GroupGuardTests {
    /// A spawned task and the `sleep` in its group.
    struct Spawned: Sendable {
        var pid: Int32
        var member: Int32
        var exit: Shared<ChildExit?>
    }

    /// Spawns a shell that starts a `sleep` in its group, writes its pid to `directory/name`
    /// and waits. Returns once the pid is known.
    static func spawnTask(_ loop: EventLoop, directory: String, name: String) async throws -> Spawned {
        let exit = Shared<ChildExit?>(nil)
        let path = "\(directory)/\(name)"
        let spawned = await onLoop(loop) { () -> Result<Int32, SpawnError> in
            Result { () throws(SpawnError) in
                try ChildProcessTests.spawn(loop, ["/bin/sh", "-c", "sleep 30 & echo $! > \(path); wait"]) { how in
                    exit.update { $0 = how }
                }.pid
            }
        }
        let pid = try spawned.get()
        let member = try #require(await pidWritten(to: path))
        return Spawned(pid: pid, member: member, exit: exit)
    }

    /// The shutdown closes the guard's channel before the loop's other handles and reaps the
    /// guard after them: once `shutdown()` has returned, the guard has exited and is reaped,
    /// no zombie left to a program that lives on after its supervisor.
    @Test func shutdownLeavesTheGuardExitedAndReaped() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop()
        let task = try await Self.spawnTask(loop, directory: directory, name: "task")
        defer { kill(task.member, SIGKILL) }
        let guardPID = await onLoop(loop) { loop.groupGuard.pid }
        #expect(guardPID > 0)
        loop.shutdown()
        var status: Int32 = 0
        // A guard still running would give 0 here, and a zombie its pid (reaped only now).
        let waited = waitpid(guardPID, &status, WNOHANG)
        let error = errno   // before anything else can set it
        #expect(waited == -1 && error == ECHILD, "waitpid gave \(waited): the guard was not reaped by the shutdown")
        // Its groups went with it: the task's sleep was killed.
        #expect(await eventually { !isAlive(task.member) }, "the task's sleep")
    }

    @Test func closingTheGuardKillsTheWatchedGroupsAndSparesTheForgottenOnes() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let watched = try await Self.spawnTask(loop, directory: directory, name: "watched")
        defer { kill(watched.member, SIGKILL) }
        let forgotten = try await Self.spawnTask(loop, directory: directory, name: "forgotten")
        defer { kill(forgotten.member, SIGKILL) }

        await onLoop(loop) {
            loop.groupGuard.forget(forgotten.pid)
            loop.groupGuard.close()
        }
        #expect(await eventually { watched.exit.value != nil })
        #expect(watched.exit.value == .signaled(SIGKILL))
        #expect(await eventually { !isAlive(watched.member) }, "the watched group's sleep")
        // Room for a wrong kill to land.
        try await Task.sleep(for: .milliseconds(300))
        #expect(forgotten.exit.value == nil)
        #expect(isAlive(forgotten.pid))
        #expect(isAlive(forgotten.member), "the forgotten group's sleep")
    }

    @Test func aLostGuardIsReplacedAndTheNewOneWatchesTheLiveGroups() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let lost = Shared<[Bool]>([])
        await onLoop(loop) { loop.onGuardLost { replaced in lost.update { $0.append(replaced) } } }
        let task = try await Self.spawnTask(loop, directory: directory, name: "task")
        defer { kill(task.member, SIGKILL) }

        let old = await onLoop(loop) { loop.groupGuard.pid }
        #expect(old > 0)
        #expect(kill(old, SIGKILL) == 0)
        #expect(await eventually { !lost.value.isEmpty })
        #expect(lost.value == [true])
        let new = await onLoop(loop) { loop.groupGuard.pid }
        #expect(new > 0 && new != old)
        #expect(isAlive(new))
        #expect(await eventually { access("/proc/\(old)", F_OK) != 0 }, "the old guard reaped")
        // A guard killed from outside kills nothing: the task lives on.
        #expect(task.exit.value == nil)
        #expect(isAlive(task.member))

        // The task's group was listed with the new guard: closing it kills the group.
        await onLoop(loop) { loop.groupGuard.close() }
        #expect(await eventually { task.exit.value != nil })
        #expect(task.exit.value == .signaled(SIGKILL))
        #expect(await eventually { !isAlive(task.member) }, "the task's sleep")
        #expect(await eventually { access("/proc/\(new)", F_OK) != 0 }, "the new guard exited and was reaped")
    }

    /// The promise itself: a supervisor killed with SIGKILL (a test process of its own,
    /// `supervisorSide`) takes its tasks' whole groups with it.
    @Test func aSupervisorKilledWithSIGKILLTakesItsTasksGroupsWithIt() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let exit = Shared<ChildExit?>(nil)
        let started = await onLoop(loop) { () -> Result<Int32, Error> in
            Result {
                try ChildTestProcess.start(loop, name: "supervisorSide", directory: directory) { how in
                    exit.update { $0 = how }
                }.pid
            }
        }
        let supervisor = try started.get()
        let member = await pidWritten(to: "\(directory)/task")
        defer { if let member { kill(member, SIGKILL) } }
        let sleep = try #require(member, "\(ChildTestProcess.log(in: directory))")
        #expect(isAlive(sleep))

        #expect(kill(supervisor, SIGKILL) == 0)
        #expect(await eventually { exit.value != nil })
        #expect(exit.value == .signaled(SIGKILL))
        #expect(await eventually { !isAlive(sleep) }, "the task's sleep outlived its supervisor")
    }

    @Test(.enabled(if: ChildTestProcess.runs("supervisorSide")))
    func supervisorSide() async throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        _ = try await Self.spawnTask(loop, directory: ChildTestProcess.directory, name: "task")
        // Killed here by the other side; this is only the bound.
        try await Task.sleep(for: .seconds(30))
    }
}
