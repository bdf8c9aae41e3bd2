import Foundation
import OvertimeProtocol
import OvertimeTestSupport
import Testing
@testable import Overtime

/// The problems a YAML job file is refused with (none, and a recorded issue, if accepted).
private func yamlProblems(_ yaml: String, origin: String = "/srv/jobs/jobs.yaml",
                          sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
    do {
        _ = try JobFile.parse(Array(yaml.utf8), origin: origin)
        Issue.record("the job file was accepted:\n\(yaml)", sourceLocation: sourceLocation)
        return []
    } catch {
        return error.problems
    }
}

@Suite struct JobFileYAMLTests {
    @Test func theFormatIsTheNameElseTheFirstCharacter() {
        #expect(JobFileFormat(path: "jobs.yaml", bytes: Array("{}".utf8)) == .yaml)
        #expect(JobFileFormat(path: "dir.json/JOBS.YML", bytes: []) == .yaml)
        #expect(JobFileFormat(path: "jobs.json", bytes: Array("tasks: []".utf8)) == .json)
        #expect(JobFileFormat(path: "/dev/fd/63", bytes: Array("\u{FEFF}\n  {\"tasks\": []}".utf8)) == .json)
        #expect(JobFileFormat(path: "/dev/fd/63", bytes: Array("# jobs\ntasks: []".utf8)) == .yaml)
        #expect(JobFileFormat(path: "jobs", bytes: []) == .yaml)
    }

    @Test func aYAMLFileIsTheSameJobAsItsJSON() throws {
        let yaml = """
        # shared settings
        defaults: &d
          budget: 5m
          env: {MODE: fast}
        concurrency: 2
        tasks:
          - name: prep
            command: [sh, -c, "echo prep"]
          - name: train
            command: [python3, train.py, --lr, "1e-2"]
            after: [prep]
            require-advance: true
            retries: {max: 2, on: [timeout, "exit:3"]}
        """
        let json = """
        {"defaults": {"budget": "5m", "env": {"MODE": "fast"}}, "concurrency": 2, "tasks": [
          {"name": "prep", "command": ["sh", "-c", "echo prep"]},
          {"name": "train", "command": ["python3", "train.py", "--lr", "1e-2"], "after": ["prep"],
           "require-advance": true, "retries": {"max": 2, "on": ["timeout", "exit:3"]}}]}
        """
        let fromYAML = try JobFile.parse(Array(yaml.utf8), origin: "/jobs/jobs.yaml")
        #expect(fromYAML == (try JobFile.parse(Array(json.utf8), origin: "/jobs/jobs.json")))
        #expect(fromYAML.tasks[1].retry.maxRetries == 2)
    }

    @Test func theSameMistakesGetTheSameMessages() {
        let yaml = yamlProblems("concurrency: 0\ntasks:\n  - {name: t, command: [echo], max_runtime: 1h}\n")
        let json = yamlProblems(#"{"concurrency": 0, "tasks": [{"name": "t", "command": ["echo"], "max_runtime": "1h"}]}"#)
        #expect(yaml == json)
        #expect(yaml.count == 2)
    }

    @Test func aYAMLOneOneBooleanIsRefusedWithAHint() {
        let problems = yamlProblems("tasks:\n  - {name: t, command: [echo], require-advance: yes, clean-env: Off, notify-socket: N}\n")
        #expect(problems == [
            "task 't': field 'require-advance': expected true or false, got \"yes\": 'yes' is a string in YAML 1.2; write true",
            "task 't': field 'clean-env': expected true or false, got \"Off\": 'Off' is a string in YAML 1.2; write false",
            "task 't': field 'notify-socket': expected true or false, got \"N\": 'N' is a string in YAML 1.2; write false",
        ])
    }

    @Test func aSyntaxErrorSaysNotYAMLWithItsPlaceAndLine() {
        let problems = yamlProblems("tasks:\n  - name: a\n    command: [x\n  - name: b\n")
        #expect(problems == ["not YAML: did not find expected ',' or ']' at line 4, column 9, while parsing a flow sequence from line 3, column 14 (the line reads: - name: b)"])
    }

    @Test func whatAJobFileMayNotHoldIsPlaced() {
        #expect(yamlProblems("tasks:\n  - name: a\n    command: [x]\n    name: b\n")
            == ["the key 'name' is given a second time at line 4, column 5; it is first at line 2: keep one (the line reads: name: b)"])
        #expect(yamlProblems("tasks:\n  - name: a\n    command: !Ref x\n").first?.contains("at line 3, column 14") == true)
    }

    @Test func anEmptyFileSaysSo() {
        for text in ["", "\n\n", "# only a comment\n"] {
            #expect(yamlProblems(text) == ["the file is empty; expected a YAML mapping with the tasks, such as:  tasks: [{name: hello, command: [echo, hello]}]"])
        }
    }

    @Test func aRunKeepsAYAMLJobAsJSON() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobfile-yaml-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("jobs.yml").path
        try "tasks:\n  - name: t  # a comment\n    command: [/bin/true]\n    cwd: data\n".write(toFile: path, atomically: true, encoding: .utf8)
        let (job, text, _) = try JobFile.loadWithText(path: path)
        #expect(String(decoding: text, as: UTF8.self) == #"{"tasks":[{"name":"t","command":["/bin/true"],"cwd":"data"}]}"#)
        let copy = try JobFile.parse(text, origin: directory.appendingPathComponent("job.json").path)
        #expect(copy == job)
    }

    /// Every whole job file the docs show, ```json or ```yaml, read in its own language and
    /// in the other (converted by PyYAML, reading YAML by the core schema as a job file is
    /// read): the same job.
    @Test func everyDocsExampleIsTheSameJobInJSONAndYAML() throws {
        let doc = try String(contentsOfFile: Checkout.path("docs/jobfile.md"), encoding: .utf8)
        let blocks = JobFileLoadingTests.fencedBlocks(in: doc, language: "json").map { ($0, JobFileFormat.json) }
            + JobFileLoadingTests.fencedBlocks(in: doc, language: "yaml").map { ($0, JobFileFormat.yaml) }
        let jobs = blocks.filter { $0.0.contains("tasks") }
        #expect(jobs.count >= 3)
        for (k, (block, format)) in jobs.enumerated() {
            let origin = "docs/jobfile.md#\(k + 1)"
            // The docs' commands need not be on this machine: none is looked up.
            let host = JobFileHost.system()
            do {
                let own = try JobFile.parse(Array(block.utf8), format: format, origin: origin, directory: "/docs", host: host)
                let other: JobFile
                switch format {
                case .json: other = try JobFile.parse(try PyYAML.yaml(fromJSON: Array(block.utf8)), format: .yaml, origin: origin, directory: "/docs", host: host)
                case .yaml: other = try JobFile.parse(try PyYAML.json(fromYAMLCoreSchema: Array(block.utf8)), format: .json, origin: origin, directory: "/docs", host: host)
                }
                #expect(own == other, "docs/jobfile.md, \(format) block \(k + 1)")
            } catch {
                Issue.record("docs/jobfile.md, \(format) block \(k + 1):\n\(error)")
            }
        }
    }
}
