/// Every setting of a task (see `TaskSetting`), in the order `overtime run --help` and a
/// job file's list of fields show them.
extension TaskSetting {
    public static let all: [TaskSetting] = [
        // MARK: Budget

        TaskSetting(
            key: "budget", section: .budget,
            options: [Option(name: "--budget", valueName: "DUR", help: """
                first deadline, from start (default 30s; 'none' or 0, as with
                GNU timeout: no limit but --max-runtime)
                """) { values, text, _ throws(ValueError) in
                values.budget = DurationLimit(duration: try Read.limit(text))
            }],
            example: Example(options: ["--budget", "45s"], fields: #"{"budget": "45s"}"#),
            readField: { values, field, fields, _ in values.budget = fields.duration(field, allowNone: true, positive: true) },
            writeOptions: { settings in ["--budget", settings.policy.budget.map(Write.seconds) ?? "none"] }),
        TaskSetting(
            key: "window", section: .budget,
            options: [Option(name: "--window", valueName: "DUR|auto", help: """
                each progress or heartbeat moves the deadline to now + DUR
                (default: the budget; 'none' or 0: the first report lifts it;
                'auto' or auto:MIN..MAX: learned from the task's own pace in
                each phase, 1s..6h by default; see docs/hangs.md)
                """) { values, text, _ throws(ValueError) in
                values.window = try WindowSetting.parse(text)
            }],
            example: Example(options: ["--window", "none"], fields: #"{"window": "none"}"#),
            readField: { values, field, fields, _ in
                if case let .string(text) = field.value, text.trimmingSpaces.lowercased().hasPrefix("auto") {
                    do throws(ValueError) {
                        values.window = try WindowSetting.parse(text)
                    } catch {
                        fields.problem(field, error.message)
                    }
                    return
                }
                // `none` (or 0): after the first report the task runs without a soft deadline.
                values.window = fields.duration(field, allowNone: true, positive: true).map { .fixed($0.duration ?? BudgetPolicy.unlimitedWindow) }
            },
            writeOptions: { settings in WindowSetting.option(for: settings.policy).map { ["--window", $0] } ?? [] }),
        TaskSetting(
            key: "phase-window", section: .budget,
            options: [Option(name: "--phase-window", valueName: "PHASE=DUR", help: """
                the window while the task is in PHASE (it names its phases:
                docs/hangs.md), over the task's own; 'none': no soft limit
                there (repeatable)
                """) { values, text, _ throws(ValueError) in
                try values.readPhaseWindow(text)
            }],
            example: Example(options: ["--phase-window", "compile=600", "--phase-window", "eval=none"],
                             fields: #"{"phase-window": {"compile": "10m", "eval": "none"}}"#),
            readField: { values, field, fields, _ in values.readPhaseWindows(field, in: fields) },
            writeOptions: { settings in phaseWindowOptions(settings.policy.phaseWindows) }),
        TaskSetting(
            key: "on-stall", section: .budget,
            options: [Option(name: "--on-stall", valueName: "cancel|warn", help: """
                when the soft deadline passes: cancel (default, reason timeout),
                or warn: mark the task stalled, run --diagnose once, and let it
                go on until it reports again or its max-runtime ends it
                """) { values, text, _ throws(ValueError) in
                values.onStall = try TaskSettingValues.stallAction(text)
            }],
            example: Example(options: ["--on-stall", "warn"], fields: #"{"on-stall": "warn"}"#),
            readField: { values, field, fields, _ in
                guard let text = fields.string(field, expected: "\"cancel\" or \"warn\"") else { return }
                do throws(ValueError) {
                    values.onStall = try TaskSettingValues.stallAction(text)
                } catch {
                    fields.problem(field, error.message)
                }
            },
            writeOptions: { settings in settings.policy.onStall == .cancel ? [] : ["--on-stall", settings.policy.onStall.rawValue] }),
        TaskSetting(
            key: "checkpoint-lead", section: .budget,
            options: [Option(name: "--checkpoint-lead", valueName: "DUR", help: """
                how long a checkpoint takes: when the task's pace will not bring
                it to its end before max-runtime (or the batch's deadline, or the
                engine's end), it is advised to checkpoint this long before it
                (a longer 'checkpoint' phase it reports wins; default off)
                """) { values, text, _ throws(ValueError) in
                values.checkpointLead = try Read.duration(text, positive: true)
            }],
            example: Example(options: ["--checkpoint-lead", "90"], fields: #"{"checkpoint-lead": "90s"}"#),
            readField: { values, field, fields, _ in values.checkpointLead = fields.duration(field, allowNone: false, positive: true)?.duration },
            writeOptions: { settings in settings.policy.checkpointLead.map { ["--checkpoint-lead", Write.seconds($0)] } ?? [] }),
        TaskSetting(
            key: "max-runtime", section: .budget,
            options: [Option(name: "--max-runtime", valueName: "DUR", help: """
                hard ceiling from start that progress cannot pass (default
                none; 0 is none too)
                """) { values, text, _ throws(ValueError) in
                values.maxRuntime = DurationLimit(duration: try Read.limit(text))
            }],
            example: Example(options: ["--max-runtime", "2h"], fields: #"{"max-runtime": "2h"}"#),
            readField: { values, field, fields, _ in values.maxRuntime = fields.duration(field, allowNone: true, positive: true) },
            writeOptions: { settings in settings.policy.maxRuntime.map { ["--max-runtime", Write.seconds($0)] } ?? [] }),
        TaskSetting(
            key: "grace", section: .budget,
            options: [Option(name: "--grace", valueName: "DUR", help: "time between SIGTERM and SIGKILL (default 10s)") { values, text, _ throws(ValueError) in
                values.grace = try Read.duration(text)
            }],
            example: Example(options: ["--grace", "2.5s"], fields: #"{"grace": 2.5}"#),
            readField: { values, field, fields, _ in values.grace = fields.duration(field, allowNone: false, positive: false)?.duration },
            writeOptions: { settings in ["--grace", Write.seconds(settings.policy.grace)] }),
        TaskSetting(
            key: "warn-before", section: .budget,
            options: [Option(name: "--warn-before", valueName: "DUR", help: "send 'expiring' this long before the deadline (default off)") { values, text, _ throws(ValueError) in
                values.warnBefore = try Read.duration(text)
            }],
            example: Example(options: ["--warn-before", "5s"], fields: #"{"warn-before": "5s"}"#),
            readField: { values, field, fields, _ in values.warnBefore = fields.duration(field, allowNone: false, positive: false)?.duration },
            writeOptions: { settings in settings.policy.warnBefore > .zero ? ["--warn-before", Write.seconds(settings.policy.warnBefore)] : [] }),
        TaskSetting(
            key: "require-advance", section: .budget,
            options: [Option(name: "--require-advance", valueName: nil, help: "progress extends only if 'completed' grew or 'fraction' rose") { values, _, _ in
                values.requireAdvance = true
            }],
            example: Example(options: ["--require-advance"], fields: #"{"require-advance": true}"#),
            readField: { values, field, fields, _ in values.requireAdvance = fields.bool(field) },
            writeOptions: { settings in settings.policy.requireAdvance ? ["--require-advance"] : [] }),
        TaskSetting(
            key: "every-reporter", section: .budget,
            options: [Option(name: "--every-reporter", valueName: nil, help: """
                each reporter that has reported (fd 3, each connection to
                OVERTIME_SOCKET) must report within the window until it
                disconnects; the earliest of their deadlines is in force (no
                effect with --window none)
                """) { values, _, _ in
                values.everyReporter = true
            }],
            example: Example(options: ["--every-reporter"], fields: #"{"every-reporter": true}"#),
            readField: { values, field, fields, _ in values.everyReporter = fields.bool(field) },
            writeOptions: { settings in settings.policy.everyReporter ? ["--every-reporter"] : [] }),
        TaskSetting(
            key: "min-start", section: .scheduling, options: [],
            example: Example(options: [], fields: #"{"min-start": "30s"}"#),
            readField: { values, field, fields, _ in values.minStart = fields.duration(field, allowNone: false, positive: false)?.duration },
            writeOptions: { _ in [] }),

        // MARK: Reporting

        TaskSetting(
            key: "notify-socket", section: .reporting,
            options: [Option(name: "--notify-socket", valueName: "on|off", help: """
                give CMD NOTIFY_SOCKET (and WATCHDOG_USEC, its window in µs):
                READY=1 is ready, WATCHDOG=1 a heartbeat, EXTEND_TIMEOUT_USEC an
                extend, STATUS= the progress detail (default on)
                """) { values, text, _ throws(ValueError) in
                values.notifySocket = try onOff(text)
            }],
            example: Example(options: ["--notify-socket", "off"], fields: #"{"notify-socket": false}"#),
            readField: { values, field, fields, _ in values.notifySocket = fields.bool(field) },
            writeOptions: { settings in settings.readiness.notifySocket ? [] : ["--notify-socket", "off"] }),
        TaskSetting(
            key: "notify-fd", section: .reporting,
            options: [Option(name: "--notify-fd", valueName: "N", help: "s6 readiness: a newline CMD writes on fd N (4 to 15) marks it ready") { values, text, _ throws(ValueError) in
                guard let fd = Int32(text), Readiness.notifyFDRange.contains(fd) else { throw .notADescriptor(text) }
                values.notifyFD = fd
            }],
            example: Example(options: ["--notify-fd", "5"], fields: #"{"notify-fd": 5}"#),
            readField: { values, field, fields, _ in values.notifyFD = JobFileDecoder.notifyFD(field, in: fields) },
            writeOptions: { settings in settings.readiness.notifyFD.map { ["--notify-fd", String($0)] } ?? [] }),

        // MARK: Environment

        TaskSetting(
            key: "env", section: .environment,
            options: [Option(name: "--env", valueName: "NAME=VALUE", help: "set a variable for CMD (repeatable)") { values, text, _ throws(ValueError) in
                guard let eq = text.firstIndex(of: "="), eq != text.startIndex else {
                    throw .notNameValue(text)
                }
                // The OVERTIME_* variables are set over these (the remote launcher passes a
                // batch's OVERTIME_ATTEMPT on this way); a job file refuses them, as its author's
                // mistake.
                values.env = (values.env ?? [:]).merging([String(text[..<eq]): String(text[text.index(after: eq)...])]) { _, new in new }
            }],
            example: Example(options: ["--env", "LOG_LEVEL=debug"], fields: #"{"env": {"LOG_LEVEL": "debug"}}"#),
            readField: { values, field, fields, decoder in values.env = decoder.environment(field, in: fields) },
            writeOptions: { settings in settings.environment.sorted { $0.key < $1.key }.flatMap { ["--env", "\($0.key)=\($0.value)"] } }),
        TaskSetting(
            key: "clean-env", section: .environment,
            options: [Option(name: "--clean-env", valueName: nil, help: """
                start CMD from an empty environment (then --env, and the
                OVERTIME_* variables); CMD is looked up on its own PATH, or
                /usr/local/bin:/usr/bin:/bin when it has none
                """) { values, _, _ in
                values.cleanEnv = true
            }],
            example: Example(options: ["--clean-env"], fields: #"{"clean-env": true}"#),
            readField: { values, field, fields, _ in values.cleanEnv = fields.bool(field) },
            writeOptions: { settings in settings.inheritEnvironment ? [] : ["--clean-env"] }),
        TaskSetting(
            key: "python-bridge", section: .environment,
            options: [Option(name: "--python-bridge", valueName: "on|off", help: """
                on (default): where overtime was installed with its bundled
                Python bridge (the wheel, the tarball, the image), put it on
                CMD's PYTHONPATH after CMD's own entries, so tqdm, rich and
                Lightning bars report progress with nothing installed in CMD's
                Python; a copy of overtime-worker CMD has itself comes first
                """) { values, text, _ throws(ValueError) in
                values.pythonBridge = try onOff(text)
            }],
            example: Example(options: ["--python-bridge", "off"], fields: #"{"python-bridge": false}"#),
            readField: { values, field, fields, _ in values.pythonBridge = fields.bool(field) },
            // The node's overtime hands its own bundled bridge over, unless this task's is off.
            writeOptions: { settings in settings.pythonBridge ? [] : ["--python-bridge", "off"] }),
        TaskSetting(
            key: "cwd", section: .environment, options: [],
            example: Example(options: [], fields: #"{"cwd": "/tmp"}"#),
            readField: { values, field, fields, decoder in values.cwd = decoder.directory(field, in: fields) },
            // The launcher starts in the task's directory, and the remote run in the launcher's.
            writeOptions: { _ in [] }),

        // MARK: Isolation

        TaskSetting(
            key: "user", section: .isolation,
            options: [Option(name: "--user", valueName: "USER", help: """
                run as USER (a name or uid; needs root): its primary group,
                supplementary groups cleared, HOME/USER/LOGNAME set
                """) { values, text, accounts throws(ValueError) in
                values.user = try Read.isolation(text, accounts.user)
            }],
            example: Example(options: ["--user", "0"], fields: #"{"user": 0}"#),
            readField: { values, field, fields, decoder in
                values.user = decoder.isolationText(field, in: fields, example: "\"nobody\" or 65534", decoder.host.accounts.user)
            },
            writeOptions: { settings in settings.isolation.user.map { ["--user", String($0.uid)] } ?? [] }),
        TaskSetting(
            key: "group", section: .isolation,
            options: [Option(name: "--group", valueName: "GROUP", help: "run with GROUP (a name or gid; needs root)") { values, text, accounts throws(ValueError) in
                values.group = try Read.isolation(text, accounts.group)
            }],
            example: Example(options: ["--group", "0"], fields: #"{"group": "0"}"#),
            readField: { values, field, fields, decoder in
                values.group = decoder.isolationText(field, in: fields, example: "\"nogroup\" or 65534", decoder.host.accounts.group)
            },
            writeOptions: { settings in settings.isolation.groupID.map { ["--group", String($0)] } ?? [] }),
        TaskSetting(
            key: "limits", section: .isolation,
            options: ResourceLimit.Resource.allCases.map { resource in
                Option(name: "--limit-\(resource.rawValue)", valueName: resource.valueName, help: resource.help) { values, text, _ throws(ValueError) in
                    let limit = try Read.isolation(text) { text throws(TaskIsolation.ParseError) in try ResourceLimit.parse(resource, text) }
                    values.limits = ResourceLimit.merged([limit], over: values.limits)
                }
            },
            example: Example(options: ["--limit-as", "4G", "--limit-nofile", "512:1024", "--limit-cpu", "1h", "--limit-nproc", "256"],
                             fields: #"{"limits": {"as": "4G", "nofile": "512:1024", "cpu": "1h", "nproc": 256}}"#),
            readField: { values, field, fields, decoder in values.limits = decoder.limits(field, in: fields) },
            writeOptions: { settings in settings.isolation.limits.flatMap { ["--limit-\($0.resource.rawValue)", "\($0.soft):\($0.hard)"] } }),
        TaskSetting(
            key: "nice", section: .isolation,
            options: [Option(name: "--nice", valueName: "N", help: "CMD's nice value, -20 (first) to 19 (last)") { values, text, _ throws(ValueError) in
                values.nice = try Read.isolation(text, TaskIsolation.parseNiceness)
            }],
            example: Example(options: ["--nice", "10"], fields: #"{"nice": 10}"#),
            readField: { values, field, fields, decoder in
                values.nice = decoder.isolationText(field, in: fields, example: "10", TaskIsolation.parseNiceness)
            },
            writeOptions: { settings in settings.isolation.niceness.map { ["--nice", String($0)] } ?? [] }),

        // MARK: Containment and memory

        TaskSetting(
            key: "memory-max", section: .containment,
            options: [Option(name: "--memory-max", valueName: "SIZE", help: """
                cancel with reason 'memory' (exit 124) when CMD's memory (all
                its processes) reaches SIZE, e.g. 200M, 4G; with a memory cgroup
                the kernel's hard limit sits a margin above it ('none': no watchdog)
                """) { values, text, _ throws(ValueError) in
                if text.trimmingSpaces.lowercased() == "none" {
                    values.memoryMax = TaskSettingValues.MemoryLimit(bytes: nil)
                    return
                }
                do throws(ByteSize.ParseError) {
                    values.memoryMax = TaskSettingValues.MemoryLimit(bytes: try ByteSize.parse(text))
                } catch {
                    throw .size(error)
                }
            }],
            example: Example(options: ["--memory-max", "2G"], fields: #"{"memory-max": "2G"}"#),
            readField: { values, field, fields, decoder in values.memoryMax = decoder.memoryMax(field, in: fields) },
            writeOptions: { settings in settings.memory.max.map { ["--memory-max", String($0)] } ?? [] }),
        TaskSetting(
            key: "memory-warn", section: .containment,
            options: [Option(name: "--memory-warn", valueName: "LEVEL", help: """
                send CMD one 'warning' when its memory passes LEVEL: a size, or
                a percentage of --memory-max (default 90%)
                """) { values, text, _ throws(ValueError) in
                do throws(ByteSize.ParseError) {
                    values.memoryWarn = try MemoryPolicy.parseWarn(text)
                } catch {
                    throw .size(error)
                }
            }],
            example: Example(options: ["--memory-max", "2G", "--memory-warn", "75%"], fields: #"{"memory-max": "2G", "memory-warn": "75%"}"#),
            readField: { values, field, fields, decoder in values.memoryWarn = decoder.memoryWarn(field, in: fields) },
            // As bytes: the node's own reading of a share could only round differently.
            writeOptions: { settings in
                settings.memory.max != nil ? settings.memory.warnBytes.map { ["--memory-warn", String($0)] } ?? [] : []
            }),
        TaskSetting(
            key: "diagnose", section: .containment,
            options: [Option(name: "--diagnose", valueName: "CMD", help: """
                before a timeout or memory cancel, run shell command CMD with
                {pid} replaced by CMD's pid (also $OVERTIME_TASK_PID), its output
                into CMD's stderr: 'py-spy dump --pid {pid} --subprocesses',
                'gdb -p {pid} -batch -ex "thread apply all bt"', 'jstack {pid}',
                'nvidia-smi'
                """) { values, text, _ throws(ValueError) in
                guard !text.trimmingSpaces.isEmpty else { throw .noCommand }
                values.diagnose = text
            }],
            example: Example(options: ["--diagnose", "echo {pid}"], fields: #"{"diagnose": "echo {pid}"}"#),
            readField: { values, field, fields, _ in values.diagnose = JobFileDecoder.diagnose(field, in: fields) },
            writeOptions: { settings in settings.diagnose.map { ["--diagnose", $0.template] } ?? [] }),
        TaskSetting(
            key: "diagnose-limit", section: .containment,
            options: [Option(name: "--diagnose-limit", valueName: "DUR", help: "the longest the cancel waits for it (default 10s)") { values, text, _ throws(ValueError) in
                values.diagnoseLimit = try Read.duration(text, positive: true)
            }],
            example: Example(options: ["--diagnose", "true", "--diagnose-limit", "3s"], fields: #"{"diagnose": "true", "diagnose-limit": "3s"}"#),
            readField: { values, field, fields, _ in values.diagnoseLimit = fields.duration(field, allowNone: false, positive: true)?.duration },
            writeOptions: { settings in settings.diagnose.map { ["--diagnose-limit", Write.seconds($0.limit)] } ?? [] }),

        // MARK: A batch's own

        TaskSetting(
            key: "resources", section: .scheduling, options: [],
            example: Example(options: [], fields: #"{"resources": {"cpu": 1}}"#),
            readField: { values, field, fields, decoder in values.resources = decoder.requests(field, in: fields) },
            // A remote task's pools are the engine's step options (`SrunExecutor`).
            writeOptions: { _ in [] }),
        TaskSetting(
            key: "retries", section: .scheduling, options: [],
            example: Example(options: [], fields: #"{"retries": 2}"#),
            readField: { values, field, fields, decoder in values.retry = decoder.retries(field, in: fields) },
            // The batch retries: each attempt is a run of its own.
            writeOptions: { _ in [] }),
    ]
}

extension TaskSetting {
    /// An option that is on or off: `on` or `off`, and the words people use for them.
    public static func onOff(_ text: String) throws(ValueError) -> Bool {
        switch text.lowercased() {
        case "on", "yes", "true", "1": return true
        case "off", "no", "false", "0": return false
        default: throw .neitherOnNorOff(text)
        }
    }
}

/// The readers of option values shared by several settings.
private enum Read {
    /// A duration, or nil for `none` (or 0).
    static func limit(_ text: String) throws(TaskSetting.ValueError) -> Duration? {
        do {
            return try DurationText.parse(text, allowNone: true)
        } catch {
            throw .duration(error)
        }
    }

    static func duration(_ text: String, positive: Bool = false) throws(TaskSetting.ValueError) -> Duration {
        let duration: Duration
        do {
            duration = try DurationText.parse(text)!
        } catch {
            throw .duration(error)
        }
        if positive, duration <= .zero { throw .notAboveZero }
        return duration
    }

    static func isolation<T>(_ text: String, _ parse: (String) throws(TaskIsolation.ParseError) -> T) throws(TaskSetting.ValueError) -> T {
        do {
            return try parse(text)
        } catch {
            throw .isolation(error)
        }
    }
}

private enum Write {
    /// Seconds as a bare number, which every duration option reads.
    static func seconds(_ duration: Duration) -> String {
        String(duration.seconds)
    }
}

extension ResourceLimit.Resource {
    /// What `--limit-…` takes, for the help.
    fileprivate var valueName: String {
        switch self {
        case .addressSpace: "SIZE"
        case .openFiles, .processes: "N"
        case .cpuSeconds: "DUR"
        }
    }

    fileprivate var help: String {
        switch self {
        case .addressSpace: "address-space limit, e.g. 4G, 512M"
        case .openFiles: "open-descriptor limit"
        case .cpuSeconds: "CPU-time limit (SIGXCPU at the soft limit, SIGKILL at the hard)"
        case .processes: """
            process limit of CMD's user (the kernel exempts root)
            (each limit: VALUE, SOFT:HARD, or unlimited)
            """
        }
    }
}
