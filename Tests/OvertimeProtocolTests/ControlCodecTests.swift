import OvertimeProtocol
import Testing

// The control socket's messages (docs/control.md): requests, replies and task status, each
// encoded once and decoded on the other side. The exact lines below are the format as it
// was written before these types existed; a change to them is a change to docs/control.md.

/// Decodes a request line given as text; the error when it is refused.
func decodeRequest(_ line: String) -> Result<ControlRequest, ControlRequest.DecodeError> {
    Result { () throws(ControlRequest.DecodeError) in try ControlRequest.decode(utf8(line)) }
}

func decodeReply(_ line: String) -> Result<ControlReply, ProtocolError> {
    Result { () throws(ProtocolError) in try ControlReply.decode(utf8(line)) }
}

/// The text of a line without its newline.
func text(_ line: [UInt8]) -> String {
    #expect(line.last == 0x0A && line.filter { $0 == 0x0A }.count == 1, "one line: \(show(line))")
    return String(decoding: line.dropLast(), as: UTF8.self)
}

@Suite("Control requests")
struct ControlRequestTests {
    static let requests: [ControlRequest] = [
        ControlRequest(.status), ControlRequest(id: .number(1), .status), ControlRequest(id: .number(2), .info),
        ControlRequest(id: .string("w"), .watch),
        ControlRequest(id: .object([("nested", .array([.number(1), .bool(true), .null]))]), .cancel(task: "train")),
        ControlRequest(.cancel(task: "say \"hi\"\n日本")),
        ControlRequest(.extend(task: "job", by: .text("10m"), pastMax: false)),
        ControlRequest(.extend(task: "job", by: .seconds(600), pastMax: true)),
        ControlRequest(.extend(task: "job", by: .seconds(0.25), pastMax: false)),
        ControlRequest(.revoke(task: "job", after: nil)),
        ControlRequest(.revoke(task: "job", after: .seconds(0))),
        ControlRequest(.revoke(task: "job", after: .text("1h30m"))),
    ]

    @Test("encode → decode gives the same request", arguments: requests)
    func roundTrip(request: ControlRequest) throws {
        let line = request.encoded()
        #expect(try ControlRequest.decode(Array(line.dropLast())) == request, "\(show(line))")
    }

    @Test("the lines overtime ctl has always sent")
    func exactLines() {
        #expect(text(ControlRequest(id: .number(1), .status).encoded()) == #"{"id":1,"op":"status"}"#)
        #expect(text(ControlRequest(id: .number(1), .watch).encoded()) == #"{"id":1,"op":"watch"}"#)
        #expect(text(ControlRequest(id: .number(1), .cancel(task: "job")).encoded()) == #"{"id":1,"op":"cancel","task":"job"}"#)
        #expect(text(ControlRequest(id: .number(1), .extend(task: "job", by: .seconds(1800), pastMax: true)).encoded())
            == #"{"id":1,"op":"extend","task":"job","by":1800,"past_max":true}"#)
        // Seconds go out to the millisecond, as every duration on the wire.
        #expect(text(ControlRequest(id: .number(1), .revoke(task: "job", after: .seconds(1.00049))).encoded())
            == #"{"id":1,"op":"revoke","task":"job","after":1}"#)
        #expect(text(ControlRequest(.revoke(task: "job", after: .text("30s"))).encoded()) == #"{"op":"revoke","task":"job","after":"30s"}"#)
    }

    @Test("what other clients may send: unknown fields, null for not given, CRLF, the last of a repeated key")
    func lenient() throws {
        #expect(try decodeRequest(#"{"op":"status","future":{"x":[1]},"task":42}"#).get() == ControlRequest(.status))
        #expect(try decodeRequest("{\"op\":\"status\",\"id\":\"crlf\"}\r").get() == ControlRequest(id: .string("crlf"), .status))
        #expect(try decodeRequest(#"{"op":"revoke","task":"j","after":null}"#).get() == ControlRequest(.revoke(task: "j", after: nil)))
        #expect(try decodeRequest(#"{"op":"cancel","task":"a","task":"b"}"#).get() == ControlRequest(.cancel(task: "b")))
        #expect(try decodeRequest(#"{"op":"extend","task":"j","by":"soon"}"#).get() == ControlRequest(.extend(task: "j", by: .text("soon"), pastMax: false)),
                "whether text is a duration is the supervisor's call")
        #expect(try decodeRequest(#"{"op":"extend","task":"j","by":-5}"#).get() == ControlRequest(.extend(task: "j", by: .seconds(-5), pastMax: false)))
        // Only true passes max-runtime.
        for pastMax in [#""yes""#, "1", "null", "false", "[true]"] {
            #expect(try decodeRequest(#"{"op":"extend","task":"j","by":1,"past_max":\#(pastMax)}"#).get()
                == ControlRequest(.extend(task: "j", by: .seconds(1), pastMax: false)), "past_max \(pastMax)")
        }
    }

    /// (line, kind, a phrase of the message, the id the error must carry)
    static let refusals: [(String, ProtocolError.Kind, String, JSONValue?)] = [
        ("this is not json", .notJSON, "not a JSON request: ", nil),
        (#"{"op":"status""#, .notJSON, "not a JSON request: ", nil),
        (#"{"op":"status","id":7"#, .notJSON, "at byte", nil),  // broken JSON has no id to trust
        (#"{"op":"status"} x"#, .notJSON, "text after the document", nil),
        ("", .notJSON, "not a JSON request", nil),
        ("[1,2,3]", .notJSON, "a request is a JSON object", nil),
        (#""status""#, .notJSON, "a request is a JSON object", nil),
        ("{}", .missingType, #"no "op"; expected status, info, watch, cancel, extend, revoke or expiring"#, nil),
        (#"{"id":1}"#, .missingType, #"no "op""#, .number(1)),
        (#"{"op":42,"id":2}"#, .missingType, #"no "op""#, .number(2)),
        (#"{"op":null,"id":2}"#, .missingType, #"no "op""#, .number(2)),
        (#"{"op":"frobnicate","id":"x"}"#, .unknownType, #"unknown op "frobnicate"; expected status, info, watch, cancel, extend, revoke or expiring"#, .string("x")),
        (#"{"op":"Status"}"#, .unknownType, #"unknown op "Status""#, nil),
        (#"{"op":"cancel","id":3}"#, .wrongType, #""cancel" needs "task": the task's name"#, .number(3)),
        (#"{"op":"cancel","task":42,"id":4}"#, .wrongType, #""cancel" needs "task""#, .number(4)),
        (#"{"op":"cancel","task":"","id":5}"#, .wrongType, #""cancel" needs "task""#, .number(5)),
        (#"{"op":"cancel","task":null}"#, .wrongType, #""cancel" needs "task""#, nil),
        (#"{"op":"extend","by":"1m"}"#, .wrongType, #""extend" needs "task""#, nil),
        (#"{"op":"revoke","task":["job"]}"#, .wrongType, #""revoke" needs "task""#, nil),
        (#"{"op":"extend","task":"job","id":7}"#, .wrongType, ControlRequest.byProblem, .number(7)),
        (#"{"op":"extend","task":"job","by":null}"#, .wrongType, ControlRequest.byProblem, nil),
        (#"{"op":"extend","task":"job","by":[10],"id":11}"#, .wrongType, ControlRequest.byProblem, .number(11)),
        (#"{"op":"extend","task":"job","by":true}"#, .wrongType, ControlRequest.byProblem, nil),
        (#"{"op":"revoke","task":"job","after":{"s":1},"id":14}"#, .wrongType, ControlRequest.afterProblem, .number(14)),
        (#"{"op":"revoke","task":"job","after":false}"#, .wrongType, ControlRequest.afterProblem, nil),
    ]

    @Test("every malformed request is refused with a named problem and the id when it has one", arguments: refusals)
    func refused(line: String, kind: ProtocolError.Kind, phrase: String, id: JSONValue?) {
        guard case let .failure(error) = decodeRequest(line) else {
            Issue.record("\(line) was accepted")
            return
        }
        #expect(error.problem.kind == kind, "\(line) → \(error)")
        #expect(error.problem.message.contains(phrase), "\(line) → \(error)")
        #expect(error.id == id, "\(line) → \(error)")
    }

    @Test("an unknown op is named by its first 40 characters only")
    func longOp() {
        let op = String(repeating: "x", count: 5000)
        guard case let .failure(error) = decodeRequest(#"{"op":"\#(op)"}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(error.problem.message.count < 120, "\(error)")
    }

    @Test("bad UTF-8, a NUL and a line over 64 KiB are refused")
    func badBytes() {
        for bytes in [[0xFF, 0xFE, 0x7B] as [UInt8], [0x7B, 0x00, 0x7D]] {
            #expect(throws: ControlRequest.DecodeError.self, "\(show(bytes))") { try ControlRequest.decode(bytes) }
        }
        let long = utf8(#"{"op":"status","pad":""#) + [UInt8](repeating: 0x61, count: ProtocolLimits.maxLineLength) + utf8(#""}"#)
        #expect(throws: ControlRequest.DecodeError(id: nil, ProtocolError(.tooLong, "request line longer than 64 KiB"))) {
            try ControlRequest.decode(long)
        }
    }
}

@Suite("Control replies and task status")
struct ControlReplyTests {
    static let train = TaskStatus(name: "train", state: .running, live: TaskStatus.Live(
        pid: 4242, elapsed: 73.2, remaining: 28.5,
        progress: Progress(completed: 40, total: 100, fraction: 0.4, title: "Epoch 2/5", detail: "loss 0.31")))

    static let replies: [ControlReply] = [
        ControlReply(.failed("permission denied")), ControlReply(id: .number(3), .failed("no running task named 'x'")),
        ControlReply(id: .string("a"), .done("cancelling")), ControlReply(.done("clipped by max-runtime (add past_max), 4m00s left")),
        ControlReply(id: .null, .watching),
        ControlReply(.status([])),
        ControlReply(.status([], run: "20261204-120000-abcd")),
        ControlReply(id: .number(1), .supervisor(ControlReplyTests.runInfo)),
        ControlReply(.supervisor(SupervisorInfo(run: "r", kind: .batch, pid: 1, uid: 0, user: nil, started: "x", cwd: "/",
                                               jobFile: "jobs.json", runDirectory: "overtime-runs/r", running: 0, total: 5000))),
        ControlReply(id: .number(1), .status([
            train,
            TaskStatus(name: "idle", state: .running, live: TaskStatus.Live(pid: nil, elapsed: 0, remaining: nil, progress: nil)),
            TaskStatus(name: "ranks", state: .running, live: TaskStatus.Live(pid: 5, elapsed: 3, remaining: 0.7, progress: nil, reporters: 3,
                                                                             everyReporter: [.init(reporter: "rank 2", remaining: 0.7), .init(reporter: "sd_notify", remaining: 1)])),
            TaskStatus(name: "ranks, none yet", state: .running, live: TaskStatus.Live(pid: 6, elapsed: 1, remaining: 4, progress: nil, everyReporter: [])),
            TaskStatus(name: "fraction only", state: .exiting, live: TaskStatus.Live(pid: 1, elapsed: 1.5, remaining: 0, progress: Progress(fraction: 0.125))),
            TaskStatus(name: "no fields", state: .running, live: TaskStatus.Live(pid: 1, elapsed: 1, remaining: 1, progress: Progress())),
            TaskStatus(name: "stopping", attempts: 2, state: .cancelling(.failFast), live: TaskStatus.Live(pid: 7, elapsed: 9, remaining: 10, progress: nil)),
            TaskStatus(name: "next", attempts: 0, state: .waiting),
            TaskStatus(name: "soon", attempts: 1, state: .starting),
            TaskStatus(name: "again", attempts: 1, state: .retrying, reason: "timeout"),
            TaskStatus(name: "done", attempts: 1, state: .succeeded),
            TaskStatus(name: "broke", attempts: 3, state: .failed, reason: "exit 3"),
            TaskStatus(name: "never", attempts: 0, state: .skipped, reason: "dependency"),
            ControlReplyTests.stalledInPhase,
            TaskStatus(name: "say \"hi\"\n\u{1B}[31m日本", state: .running,
                       live: TaskStatus.Live(pid: 2, elapsed: 2, remaining: nil, progress: Progress(title: "\u{0}", detail: "😀"))),
        ])),
    ] + CancelReason.allCases.map { reason in
        ControlReply(.status([TaskStatus(name: "t", state: .cancelling(reason), live: TaskStatus.Live(pid: 1, elapsed: 1, remaining: nil, progress: nil))]))
    }

    /// A task with a phase, a learned window and a stall (docs/control.md).
    static let stalledInPhase: TaskStatus = {
        var live = TaskStatus.Live(pid: 3, elapsed: 60, remaining: 540, progress: nil)
        (live.phase, live.window, live.windowLearned) = ("eval", 45.2, true)
        (live.stalledSince, live.stalled) = ("2026-12-01T17:48:14.120Z", 12.4)
        return TaskStatus(name: "fit", state: .running, live: live)
    }()

    @Test("a task's phase, window and stall: written only when there is something to say")
    func hangFields() {
        let line = text(ControlReply(.status([Self.stalledInPhase])).encoded())
        #expect(line.contains(#""progress":null,"phase":"eval","window":45.2,"window_learned":true,"stalled_since":"2026-12-01T17:48:14.120Z","stalled":12.4"#), "\(line)")
        let plain = text(ControlReply(.status([TaskStatus(name: "t", state: .running, live: .init(pid: 1, elapsed: 1, remaining: 1, progress: nil))])).encoded())
        #expect(!plain.contains("phase") && !plain.contains("window") && !plain.contains("stalled"), "\(plain)")
    }

    @Test("a task's limits: the time to its max-runtime and its memory-max, written when it has them, read back")
    func limitFields() throws {
        var live = TaskStatus.Live(pid: 3, elapsed: 60, remaining: 540, progress: nil, memory: 1024, peakMemory: 2048)
        (live.hardLimitRemaining, live.memoryMax) = (3540, 734_003_200)
        let reply = ControlReply(.status([TaskStatus(name: "fit", state: .running, live: live)]))
        let line = reply.encoded()
        #expect(text(line).contains(#""max_runtime_remaining":3540"#) && text(line).contains(#""peak_memory":2048,"memory_max":734003200"#), "\(text(line))")
        #expect(try ControlReply.decode(Array(line.dropLast())) == reply)
        let plain = text(ControlReply(.status([TaskStatus(name: "t", state: .running, live: .init(pid: 1, elapsed: 1, remaining: 1, progress: nil))])).encoded())
        #expect(!plain.contains("max_runtime") && !plain.contains("memory_max"), "\(plain)")
    }

    static let runInfo = SupervisorInfo(run: "20261201-074814-09c65d80", kind: .run, pid: 4242, uid: 1000, user: "ada",
                                        started: "2026-12-01T07:48:14.120Z", cwd: "/home/ada/日本",
                                        command: ["python3", "train.py", "--lr", "say \"hi\"\n"], running: 1, total: 1)

    @Test("info's answer: its line, and a description that cannot be read is refused by name")
    func supervisorInfo() {
        #expect(text(ControlReply(id: .number(1), .supervisor(Self.runInfo)).encoded()) == #"""
        {"id":1,"ok":true,"supervisor":{"run":"20261201-074814-09c65d80","kind":"run","pid":4242,"uid":1000,"user":"ada","started":"2026-12-01T07:48:14.120Z","cwd":"/home/ada/日本","command":["python3","train.py","--lr","say \"hi\"\n"],"tasks":{"running":1,"total":1}}}
        """#)
        #expect(Self.runInfo.runs == "python3 train.py --lr say \"hi\"\n")
        for (line, phrase) in [
            (#"{"ok":true,"supervisor":[]}"#, "must be a JSON object"),
            (#"{"ok":true,"supervisor":{"run":"r","kind":"daemon","pid":1,"uid":0,"started":"x","cwd":"/","tasks":{"running":0,"total":0}}}"#, "\"kind\""),
            (#"{"ok":true,"supervisor":{"run":"r","kind":"run","pid":-1,"uid":0,"started":"x","cwd":"/","tasks":{"running":0,"total":0}}}"#, "\"pid\""),
            (#"{"ok":true,"supervisor":{"run":"r","kind":"run","pid":1,"uid":0,"started":"x","cwd":"/","command":[1],"tasks":{"running":0,"total":0}}}"#, "\"command\""),
            (#"{"ok":true,"supervisor":{"run":"r","kind":"run","pid":1,"uid":0,"started":"x","cwd":"/"}}"#, "\"running\""),
        ] {
            guard case let .failure(error) = decodeReply(line) else { Issue.record("accepted: \(line)"); continue }
            #expect(error.message.contains("\"supervisor\"") && error.message.contains(phrase), "\(line): \(error.message)")
        }
    }

    @Test("encode → decode gives the same reply", arguments: replies)
    func roundTrip(reply: ControlReply) throws {
        let line = reply.encoded()
        #expect(try ControlReply.decode(Array(line.dropLast())) == reply, "\(show(line))")
    }

    @Test("the lines the control socket has always answered with")
    func exactLines() {
        #expect(text(ControlReply(id: .number(1), .status([Self.train])).encoded()) == #"""
        {"id":1,"ok":true,"tasks":[{"name":"train","pid":4242,"state":"running","elapsed":73.2,"remaining":28.5,"progress":{"completed":40,"total":100,"fraction":0.4,"title":"Epoch 2/5","detail":"loss 0.31"}}]}
        """#)
        // A batch: attempts after the name; a task that does not run has no live fields at all.
        let batch = ControlReply(.status([
            TaskStatus(name: "a", attempts: 1, state: .cancelling(.user), live: TaskStatus.Live(pid: nil, elapsed: 0.0004, remaining: nil, progress: nil)),
            TaskStatus(name: "b", attempts: 0, state: .skipped, reason: "dependency"),
        ]))
        #expect(text(batch.encoded()) == #"""
        {"ok":true,"tasks":[{"name":"a","attempts":1,"pid":null,"state":"cancelling","cancel_reason":"user","elapsed":0,"remaining":null,"progress":null},{"name":"b","attempts":0,"state":"skipped","reason":"dependency"}]}
        """#)
        // A supervisor that knows its run names it before the tasks.
        #expect(text(ControlReply(.status([TaskStatus(name: "b", attempts: 0, state: .waiting)], run: "r1")).encoded()) == #"""
        {"ok":true,"run":"r1","tasks":[{"name":"b","attempts":0,"state":"waiting"}]}
        """#)
        #expect(text(ControlReply(id: .string("x"), .failed("bad")).encoded()) == #"{"id":"x","ok":false,"error":"bad"}"#)
        #expect(text(ControlReply(.done("30s left")).encoded()) == #"{"ok":true,"result":"30s left"}"#)
        #expect(text(ControlReply(id: .number(1), .watching).encoded()) == #"{"id":1,"ok":true,"watching":true}"#)
    }

    @Test("progress goes out with its share done, to 4 places, and reads back stable")
    func progressFraction() throws {
        let status = TaskStatus(name: "t", state: .running, live: TaskStatus.Live(pid: 1, elapsed: 1, remaining: 1, progress: Progress(completed: 1, total: 3)))
        let line = ControlReply(.status([status])).encoded()
        #expect(text(line).contains(#""progress":{"completed":1,"total":3,"fraction":0.3333}"#), "\(show(line))")
        let again = try ControlReply.decode(Array(line.dropLast()))
        #expect(again.encoded() == line)
    }

    @Test("a status reply longer than 64 KiB is read whole: a large batch's runs past that")
    func longReply() throws {
        let tasks = (0..<3000).map { TaskStatus(name: "shard-\($0)", attempts: 0, state: .waiting) }
        let line = ControlReply(.status(tasks)).encoded()
        #expect(line.count > ProtocolLimits.maxLineLength)
        #expect(try ControlReply.decode(Array(line.dropLast())) == ControlReply(.status(tasks)))
    }

    @Test("a reply's unknown fields are ignored")
    func unknownFields() throws {
        let reply = try decodeReply(#"{"ok":true,"v":2,"tasks":[{"name":"t","state":"waiting","colour":"red"}]}"#).get()
        #expect(reply == ControlReply(.status([TaskStatus(name: "t", state: .waiting)])))
        #expect(try decodeReply(#"{"ok":false,"error":"no","hint":"x"}"#).get() == ControlReply(.failed("no")))
    }

    /// (line, kind, a phrase of the message)
    static let refusals: [(String, ProtocolError.Kind, String)] = [
        ("nope", .notJSON, "not a JSON reply"),
        ("[]", .notJSON, "a reply is a JSON object"),
        (#"{"tasks":[]}"#, .missingType, #"a reply needs "ok""#),
        (#"{"ok":"yes"}"#, .missingType, #"a reply needs "ok""#),
        (#"{"ok":false}"#, .wrongType, #"a refusal needs "error""#),
        (#"{"ok":false,"error":1}"#, .wrongType, #"a refusal needs "error""#),
        (#"{"ok":true}"#, .missingType, #"carries "tasks", "watching", "result" or "supervisor""#),
        (#"{"ok":true,"watching":false}"#, .missingType, #"carries "tasks""#),
        (#"{"ok":true,"result":1}"#, .missingType, #"carries "tasks""#),
        (#"{"ok":true,"tasks":{}}"#, .wrongType, #""tasks" must be an array"#),
        (#"{"ok":true,"tasks":[1]}"#, .wrongType, "task 0 in \"tasks\": a task is a JSON object"),
        (#"{"ok":true,"tasks":[{"name":"a","state":"waiting"},{"state":"waiting"}]}"#, .wrongType, #"task 1 in "tasks": "name" must be a string"#),
        (#"{"ok":true,"tasks":[{"name":"a"}]}"#, .wrongType, #""state" must be a string"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"dancing"}]}"#, .unknownType, #"unknown state "dancing""#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"cancelling"}]}"#, .wrongType, #"a cancelling task needs a known "cancel_reason""#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"cancelling","cancel_reason":"bored"}]}"#, .wrongType, #"known "cancel_reason""#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"waiting","attempts":-1}]}"#, .outOfRange, #""attempts" must be an integer ≥ 0"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"waiting","attempts":"1"}]}"#, .wrongType, #""attempts" must be a number"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"failed","reason":3}]}"#, .wrongType, #""reason" must be a string"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":"1s"}]}"#, .wrongType, #""elapsed" must be a number"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"pid":1.5}]}"#, .outOfRange, #""pid" must be an integer ≥ 0"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"pid":4294967296}]}"#, .outOfRange, #""pid" is not a process id"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"remaining":"1s"}]}"#, .wrongType, #""remaining" must be a number or null"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"progress":[]}]}"#, .wrongType, #""progress" must be an object or null"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"progress":{"completed":-2}}]}"#, .outOfRange, #""completed" must be an integer ≥ 0"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"progress":{"total":0.5}}]}"#, .outOfRange, #""total" must be an integer ≥ 0"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"progress":{"fraction":"half"}}]}"#, .wrongType, #""fraction" must be a number"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"progress":{"title":1}}]}"#, .wrongType, #""title" must be a string"#),
        (#"{"ok":true,"tasks":[{"name":"a","state":"running","elapsed":1,"progress":{"detail":[]}}]}"#, .wrongType, #""detail" must be a string"#),
    ]

    @Test("every malformed reply is refused with a named problem", arguments: refusals)
    func refused(line: String, kind: ProtocolError.Kind, phrase: String) {
        guard case let .failure(error) = decodeReply(line) else {
            Issue.record("\(line) was accepted")
            return
        }
        #expect(error.kind == kind, "\(line) → \(error)")
        #expect(error.message.contains(phrase), "\(line) → \(error)")
    }
}
