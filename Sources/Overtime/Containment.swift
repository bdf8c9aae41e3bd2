import OvertimeLoop
import OvertimeProtocol

/// How a supervisor holds its tasks whole (DESIGN §7): in a cgroup each, or as process
/// groups. Said in every report (`run --json`, `summary.json`, `ctl status`, `--help`):
/// never a silent downgrade.
public struct Containment: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Each task in a cgroup of its own, entered before exec: cancel, the leader's end
        /// and the supervisor's death kill every process in it, `setsid` or not.
        case cgroup
        /// Each task is its process group (its session), with the supervisor as subreaper
        /// and the task guard: a process that starts a session of its own and whose parent
        /// then dies is out of reach.
        case processGroup = "process-group"
    }

    /// Where the memory watchdog reads a task's memory.
    public enum MemorySource: String, Sendable {
        /// The task's v2 memory cgroup: usage, peak, OOM kills, a hard limit.
        case cgroupV2 = "cgroup-v2"
        /// The task's v1 memory cgroup: the same, in v1's files.
        case cgroupV1 = "cgroup-v1"
        /// The sum of its processes' resident sets from `/proc`, sampled; no OOM counter.
        case proc
    }

    public var kind: Kind
    /// "v2", "v1" or "v2+v1" (a hybrid: v2 holds the task, v1 counts its memory).
    public var cgroupVersion: String?
    public var memory: MemorySource
    /// The run's own cgroup directories.
    public var directories: [String]
    /// Why it is not more than it is (no memory controller, a hierarchy not writable, or
    /// `--cgroup off`).
    public var notes: [String]

    /// What was asked for.
    public enum Request: Sendable, Equatable {
        /// A cgroup per task where the machine allows it, else process groups.
        case automatic
        /// Process groups only (`--cgroup off`).
        case off
    }

    /// One line for `--help` and a report: "cgroup v2+v1 (memory from cgroup v1)".
    public var summary: String {
        switch kind {
        case .cgroup:
            return "a cgroup per task (cgroup \(cgroupVersion ?? "?")), memory from \(memory == .proc ? "/proc samples" : memory == .cgroupV2 ? "cgroup v2" : "cgroup v1")"
        case .processGroup:
            return "process groups (no cgroup" + (notes.isEmpty ? "" : ": " + notes.joined(separator: "; ")) + "), memory from /proc samples"
        }
    }

    /// What this machine would give, found without creating anything (for `--help`).
    public static func available(_ request: Request = .automatic) -> Containment {
        guard request == .automatic else { return Self.off }
        let probe = CgroupProbe.probe()
        if probe.v2Directory == nil, probe.v1MemoryDirectory == nil {
            return Containment(kind: .processGroup, cgroupVersion: nil, memory: .proc, directories: [], notes: probe.unavailable)
        }
        let v2Memory = probe.v2Directory != nil && probe.v2Controllers.contains("memory")
        return Containment(kind: .cgroup,
                           cgroupVersion: Self.version(v2: probe.v2Directory != nil, v1: !v2Memory && probe.v1MemoryDirectory != nil),
                           memory: v2Memory ? .cgroupV2 : (probe.v1MemoryDirectory != nil ? .cgroupV1 : .proc),
                           directories: [], notes: probe.unavailable)
    }

    static let off = Containment(kind: .processGroup, cgroupVersion: nil, memory: .proc, directories: [], notes: ["--cgroup off"])

    /// What a supervisor made.
    init(tree: CgroupTree?, notes: [String]) {
        guard let tree else {
            self.init(kind: .processGroup, cgroupVersion: nil, memory: .proc, directories: [], notes: notes)
            return
        }
        self.init(kind: .cgroup,
                  cgroupVersion: Self.version(v2: tree.v2Directory != nil, v1: tree.v1MemoryDirectory != nil),
                  memory: tree.v2Memory ? .cgroupV2 : (tree.v1MemoryDirectory != nil ? .cgroupV1 : .proc),
                  directories: tree.directories, notes: tree.problems)
    }

    init(kind: Kind, cgroupVersion: String?, memory: MemorySource, directories: [String], notes: [String]) {
        self.kind = kind
        self.cgroupVersion = cgroupVersion
        self.memory = memory
        self.directories = directories
        self.notes = notes
    }

    private static func version(v2: Bool, v1: Bool) -> String {
        switch (v2, v1) {
        case (true, true): "v2+v1"
        case (true, false): "v2"
        default: "v1"
        }
    }
}

extension Containment {
    /// As reports carry it: `{"kind": "cgroup", "cgroup": "v2+v1", "memory": "cgroup-v1",
    /// "directories": [...], "notes": [...]}`.
    public func write(into w: inout JSONWriter) {
        w.beginObject()
        w.key("kind"); w.string(kind.rawValue)
        w.key("cgroup"); if let cgroupVersion { w.string(cgroupVersion) } else { w.null() }
        w.key("memory"); w.string(memory.rawValue)
        w.key("directories"); w.beginArray(); for d in directories { w.string(d) }; w.endArray()
        w.key("notes"); w.beginArray(); for n in notes { w.string(n) }; w.endArray()
        w.endObject()
    }
}
