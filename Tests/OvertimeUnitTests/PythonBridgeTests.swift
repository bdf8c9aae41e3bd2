// Where the bundled Python bridge is found, how it joins a task's PYTHONPATH, and the
// job file's `python-bridge`.

@testable import Overtime
import OvertimeCore
import Testing

@Suite("Python bridge")
struct PythonBridgeTests {
    @Test("it goes after the task's own entries, once")
    func searchPath() {
        let bridge = "/opt/ot/share/overtime/python"
        #expect(PythonBridge.searchPath(nil, appending: bridge) == bridge)
        #expect(PythonBridge.searchPath("", appending: bridge) == bridge, "an empty PYTHONPATH is none to Python")
        #expect(PythonBridge.searchPath("/job/src", appending: bridge) == "/job/src:" + bridge)
        #expect(PythonBridge.searchPath("/a:/b", appending: bridge) == "/a:/b:" + bridge)
        #expect(PythonBridge.searchPath("/a:" + bridge + ":/b", appending: bridge) == "/a:" + bridge + ":/b",
                "already there: left where the task put it")
        #expect(PythonBridge.searchPath(bridge + "/lib", appending: bridge) == bridge + "/lib:" + bridge,
                "a longer path that starts like it is another entry")
    }

    @Test("found as share/overtime/python beside the binary's bin/, only when it holds its start-up hook")
    func besideTheBinary() {
        var asked: [String] = []
        let found = PythonBridge.bundled(forExecutable: "/home/u/.local/share/uv/tools/overtime-supervisor/bin/overtime") {
            asked.append($0)
            return true
        }
        #expect(found == "/home/u/.local/share/uv/tools/overtime-supervisor/share/overtime/python")
        #expect(asked == ["/home/u/.local/share/uv/tools/overtime-supervisor/share/overtime/python/sitecustomize.py"])
        #expect(PythonBridge.bundled(forExecutable: "/usr/local/bin/overtime") { _ in true } == "/usr/local/share/overtime/python")
        #expect(PythonBridge.bundled(forExecutable: "/work/.build/debug/overtime") { _ in false } == nil,
                "a build from a checkout has none")
        #expect(PythonBridge.bundled(forExecutable: "overtime") { _ in true } == nil)
    }

    @Test("the job file's python-bridge: on unless a task or the defaults turn it off; a non-boolean is refused")
    func jobFileKey() throws {
        let json = """
        {"defaults": {"python-bridge": false},
         "tasks": [{"name": "a", "command": ["true"]},
                   {"name": "b", "command": ["true"], "python-bridge": true}]}
        """
        let file = try JobFile.parse(Array(json.utf8), origin: "jobs.json")
        #expect(try #require(file.task(named: "a")).pythonBridge == false)
        #expect(try #require(file.task(named: "b")).pythonBridge == true)
        let plain = try JobFile.parse(Array(#"{"tasks": [{"name": "a", "command": ["true"]}]}"#.utf8), origin: "jobs.json")
        #expect(try #require(plain.task(named: "a")).pythonBridge == true)
        do {
            _ = try JobFile.parse(Array(#"{"tasks": [{"name": "a", "command": ["true"], "python-bridge": "off"}]}"#.utf8), origin: "jobs.json")
            Issue.record("accepted a string")
        } catch {
            #expect(error.problems.first?.hasPrefix("task 'a': field 'python-bridge': expected true or false") == true, "\(error.problems)")
        }
    }

    @Test("a task run through an executor without the bridge tells the node's overtime so")
    func remoteCommand() {
        let launcher = RemoteLauncher(prefix: ["srun"], overtime: "/opt/ot/bin/overtime")
        var spec = TaskSpec(name: "t", arguments: ["python3", "train.py"])
        #expect(launcher.command(for: spec, log: "/runs/t.log").contains("--python-bridge"))
        spec.pythonBridge = "/opt/ot/share/overtime/python"
        #expect(!launcher.command(for: spec, log: "/runs/t.log").contains("--python-bridge"),
                "on: the node's overtime hands over its own")
    }
}
