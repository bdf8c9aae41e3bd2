import OvertimeLoop
import OvertimeProtocol

/// How a task's process is made: the descriptors it is given, its environment, its
/// isolation, the cgroup it is created in (DESIGN §3, §7), and the words for a spawn that
/// failed. Lives for one start. Loop-thread only.
struct TaskLaunch {
    private let spec: TaskSpec
    private unowned let core: SupervisorState
    /// The descriptors the child inherits: closed here once it is spawned (`closePassed`).
    private var passed: [Int32] = []

    init(spec: TaskSpec, core: SupervisorState) {
        self.spec = spec
        self.core = core
    }

    /// What to spawn, with the task's channels opened and its output's readers made.
    mutating func request(channels: TaskChannels, output: TaskOutput, socketName: String) throws -> SpawnRequest {
        let leaderEnd = try channels.openLeader(passing: &passed)
        channels.openReporterSocket(named: socketName)
        if spec.readiness.notifySocket { channels.openNotifySocket(named: socketName) }
        var stdin: Int32 = 0
        if case .null = spec.stdin {
            stdin = try core.nullInput ?? Descriptors.openNull(forWriting: false).also { passed.append($0) }
        }
        let stdout = try outputDescriptor(spec.stdout, inherit: 1, output: output)
        let stderr: Int32
        if case let .file(outPath, _) = spec.stdout, case let .file(errPath, true) = spec.stderr, outPath == errPath {
            stderr = stdout  // one log for both: one open, and the two streams interleave in order
        } else if case .terminal = spec.stdout, case .terminal = spec.stderr {
            stderr = stdout  // one terminal for both, as on a real one
        } else {
            stderr = try outputDescriptor(spec.stderr, inherit: 2, output: output)
        }
        var descriptors = [stdin, stdout, stderr, leaderEnd]
        if let notifyFD = spec.readiness.notifyFD {
            let writeEnd = try channels.openNotifyFD(passing: &passed)
            while descriptors.count < Int(notifyFD) { descriptors.append(-1) }
            descriptors.append(writeEnd)
        }
        var request = SpawnRequest(
            arguments: spec.arguments,
            baseEnvironment: spec.inheritEnvironment ? core.inheritedEnvironment : nil,
            environment: environmentOverrides(channels),
            workingDirectory: spec.workingDirectory,
            descriptors: descriptors
        )
        isolate(&request)
        return request
    }

    /// The task's own cgroup, made for `request` to be spawned into; nil where the run has none.
    func cgroup(for request: inout SpawnRequest) throws -> TaskCgroup? {
        guard let tree = core.cgroups else { return nil }
        let made = try tree.taskCgroup(memoryLimit: spec.memory.hardLimit, memoryBeforeExec: spec.memory.max != nil)
        request.cgroupProcs = made.procsForSpawn
        request.cgroupDirectory = made.v2DirectoryDescriptor
        return made
    }

    /// Closes the parent's copies of what the child was given.
    mutating func closePassed() {
        passed.forEach(Descriptors.close)
        passed.removeAll()
    }

    private mutating func outputDescriptor(_ target: OutputTarget, inherit fd: Int32, output: TaskOutput) throws(SystemError) -> Int32 {
        switch target {
        case .inherit:
            return fd
        case .discard:
            if let shared = core.nullOutput { return shared }
            return try Descriptors.openNull(forWriting: true).also { passed.append($0) }
        case let .file(path, append):
            return try Descriptors.openForWriting(path, append: append).also { passed.append($0) }
        case let .capture(sink):
            return try output.pipe(into: sink, valve: nil, passing: &passed)
        case let .terminal(sizeFrom, valve, sink):
            return try output.terminal(sizeFrom: sizeFrom, into: sink, valve: valve, passing: &passed)
        }
    }

    /// The variables set on top of the inherited environment: the account's (HOME, USER,
    /// LOGNAME, when switching user), the task's own, PYTHONPATH with the Python bridge after
    /// the task's own entries, then the `OVERTIME_*` ones, which nothing may override.
    private func environmentOverrides(_ channels: TaskChannels) -> [String] {
        var overrides = spec.isolation.accountEnvironment.merging(spec.environment) { _, task in task }
        if let bridge = spec.pythonBridge {
            let own = spec.environment["PYTHONPATH"] ?? (spec.inheritEnvironment ? ProcessEnvironment.values(of: ["PYTHONPATH"])["PYTHONPATH"] : nil)
            overrides["PYTHONPATH"] = PythonBridge.searchPath(own, appending: bridge)
        }
        overrides["OVERTIME_FD"] = "3"
        if let path = channels.reporterSocketPath { overrides["OVERTIME_SOCKET"] = path }
        if let path = channels.notifySocketPath {
            overrides["NOTIFY_SOCKET"] = path
            // A daemon that pets systemd's watchdog does so at half this: each ping is a
            // heartbeat, so the window is the interval it must keep.
            if let window = spec.policy.effectiveWindow, window > .zero {
                overrides["WATCHDOG_USEC"] = String(max(1, window.nanoseconds / 1000))
            } else {
                overrides["WATCHDOG_USEC"] = nil
            }
        }
        overrides["OVERTIME_TASK"] = spec.name
        overrides["OVERTIME_RUN"] = core.runID
        return overrides.sorted(by: { $0.key < $1.key }).map { "\($0.key)=\($0.value)" }
    }

    private func isolate(_ request: inout SpawnRequest) {
        let isolation = spec.isolation
        request.limits = isolation.limits.map(RLimit.init)
        request.niceness = isolation.niceness
        if let (uid, gid) = isolation.credentialsToSwitch() {
            request.userID = uid
            request.groupID = gid
        }
    }

    /// What a start that failed before the task ran reports, from what failed.
    static func failure(_ error: any Error, spec: TaskSpec) -> SpawnFailure {
        if let spawn = error as? SpawnError { return spawnFailure(spawn, spec: spec) }
        if let system = error as? SystemError { return SpawnFailure(errno: system.errno, message: system.description, beforeExec: true) }
        return SpawnFailure(errno: 0, message: "\(error)", beforeExec: true)
    }

    static func spawnFailure(_ error: SpawnError, spec: TaskSpec) -> SpawnFailure {
        let command = spec.arguments.first ?? ""
        let reason = SystemError("", errno: error.errno).reason
        let isolation = spec.isolation
        let userName = isolation.user.map { $0.name ?? String($0.uid) } ?? "?"
        let groupName = isolation.effectiveGroupID.map(String.init) ?? "?"
        let message = switch error.step {
        case .exec:
            switch error.errno {
            case ErrorNumber.ENOENT: command.isEmpty ? "no command given" : "\(command): command not found"
            case ErrorNumber.EACCES where command.contains("/") && Descriptors.isDirectory(command): "\(command): is a directory"
            case ErrorNumber.EACCES: "\(command): permission denied"
            case ErrorNumber.ENOEXEC: "\(command): not an executable format"
            case ErrorNumber.EISDIR: "\(command): is a directory"
            default: "\(command): \(reason)"
            }
        case .workingDirectory: "cannot use working directory \(spec.workingDirectory ?? ""): \(reason)"
        case .user: "cannot run as user \(userName): \(reason)"
        case .group, .supplementaryGroups:
            isolation.user == nil ? "cannot run as group \(groupName): \(reason)"
                                  : "cannot run as user \(userName): cannot switch to group \(groupName): \(reason)"
        case let .limit(index):
            "cannot set the \(isolation.limits.indices.contains(index) ? isolation.limits[index].resource.rawValue : "?") limit: \(reason)"
        case .priority: "cannot set nice value \(isolation.niceness.map(String.init) ?? "?"): \(reason)"
        case .parentDeath: "cannot tie the task's life to the supervisor's: \(reason)"
        case .fork: "cannot start a process: \(reason)"
        case .cgroup: "cannot enter the task's cgroup: \(reason)"
        case .session: "cannot start a session for the task: \(reason)"
        case .descriptors: "cannot pass descriptors to the task: \(reason)"
        }
        return SpawnFailure(errno: error.errno, message: message, beforeExec: error.step != .exec)
    }
}

extension Int32 {
    /// Runs `body` with the value and returns it (for registering a descriptor as it opens).
    func also(_ body: (Int32) -> Void) -> Int32 {
        body(self)
        return self
    }
}
