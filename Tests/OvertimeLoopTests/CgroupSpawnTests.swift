import Foundation
import OvertimeLoop
import Testing

// A task's process starts inside its cgroup: created there (clone3's CLONE_INTO_CGROUP)
// where the kernel allows, else moved in by its own write to cgroup.procs before exec.
// Needs a v2 hierarchy this process may write: CI's machine has one, and a machine without
// it fails here, saying so, rather than passing a test that did not run (as the
// containment suite does when this machine's cgroups are not what it expects).
@Suite(.serialized) struct CgroupSpawnTests {
    static let probe = CgroupProbe.probe()

    /// Spawns `sh -c 'cat /proc/self/cgroup > FILE'` with `request`'s cgroup fields set by
    /// `place`, and returns the v2 line (`0::/…`) the child saw.
    static func cgroupSeen(by name: String, place: (inout SpawnRequest, TaskCgroup) -> Void) async throws -> (seen: String, expected: String) {
        let (madeTree, notes) = CgroupTree.make(probe: probe, runID: "spawn-test-\(getpid())-\(name)")
        let tree = try #require(madeTree, "no cgroup tree: \(notes)")
        defer { CgroupTree.remove(tree.directories) }
        let cgroup = try TaskCgroup(tree: tree, name: "slot-1", memoryLimit: nil)
        defer { _ = cgroup.remove() }
        let file = NSTemporaryDirectory() + "cgroup-seen-\(getpid())-\(name)"
        defer { unlink(file) }
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { close(null) }
        var request = SpawnRequest(arguments: ["/bin/sh", "-c", "cat /proc/self/cgroup > \(file)"], baseEnvironment: nil,
                                   environment: [], workingDirectory: nil, descriptors: [null, null, null])
        place(&request, cgroup)
        let exited = Shared<ChildExit?>(nil)
        // Handed to the loop thread, and used only there until the spawn returns.
        struct Handover: @unchecked Sendable { let request: SpawnRequest; let cgroup: TaskCgroup }
        let handover = Handover(request: request, cgroup: cgroup)
        let spawned = await onLoop(loop) { () -> Result<Int32, SpawnError> in
            defer { handover.cgroup.spawned() }
            do throws(SpawnError) {
                return .success(try ChildProcess(loop: loop, request: handover.request) { how in exited.update { $0 = how } }.pid)
            } catch {
                return .failure(error)
            }
        }
        #expect(try spawned.get() > 0)
        #expect(await eventually { exited.value != nil })
        #expect(exited.value == .exited(0))
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        let v2Line = text.split(separator: "\n").first { $0.hasPrefix("0::") }.map(String.init) ?? "no 0:: line in \(text)"
        // This process's own v2 path is the end of the probe's directory; what is before it is
        // the mount, which the child's /proc/self/cgroup leaves out.
        let own = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) } ?? ""
        let mount = try #require(probe.v2Directory).dropLast(own == "/" ? 0 : own.count)
        return (v2Line, "0::" + String(try #require(cgroup.v2Directory).dropFirst(mount.count)))
    }

    @Test func theChildStartsInsideItsCgroupCreatedThereOrMovedIn() async throws {
        try #require(Self.probe.v2Directory != nil, "no writable cgroup v2 directory here: \(Self.probe.unavailable)")
        // Created inside (the directory given) on this kernel.
        let born = try await Self.cgroupSeen(by: "born") { request, cgroup in
            request.cgroupProcs = cgroup.procsDescriptors
            request.cgroupDirectory = cgroup.v2DirectoryDescriptor
        }
        #expect(born.seen == born.expected)
        // A directory the kernel refuses for CLONE_INTO_CGROUP (not a cgroup): the spawn
        // falls back to the child writing cgroup.procs, and still lands inside. (From here
        // on this process spawns that way: clone3 counts as refused.)
        let notACgroup = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(notACgroup) }
        let moved = try await Self.cgroupSeen(by: "moved") { request, cgroup in
            request.cgroupProcs = cgroup.procsDescriptors
            request.cgroupDirectory = notACgroup
        }
        #expect(moved.seen == moved.expected)
    }
}
