import Foundation
import OvertimeProtocol
import OvertimeYAML
import Testing

/// The text read as one tree.
func yaml(_ text: String) throws -> JSONValue? {
    try YAMLDocument.value(Array(text.utf8))
}

/// The error reading `text` gives, or nil when it is read.
func yamlError(_ text: String) -> YAMLError? {
    yamlError(Array(text.utf8))
}

func yamlError(_ bytes: [UInt8]) -> YAMLError? {
    do {
        _ = try YAMLDocument.value(bytes)
        return nil
    } catch {
        return error
    }
}

@Suite("YAML: scalars by the core schema")
struct YAMLScalarTests {
    @Test("the Norway problem: no, yes, on, off, y, n stay strings")
    func norway() throws {
        let value = try yaml("country: no\nanswer: yes\nflag: on\nother: off\nshort: y\nN: n\n")
        #expect(value == .object([("country", .string("no")), ("answer", .string("yes")), ("flag", .string("on")),
                                  ("other", .string("off")), ("short", .string("y")), ("N", .string("n"))]))
    }

    @Test("null, booleans and numbers as the core schema writes them")
    func coreSchema() throws {
        let cases: [(String, JSONValue)] = [
            ("~", .null), ("null", .null), ("Null", .null), ("NULL", .null), ("", .null),
            ("true", .bool(true)), ("True", .bool(true)), ("TRUE", .bool(true)), ("false", .bool(false)), ("FALSE", .bool(false)),
            ("0", .number(0)), ("-17", .number(-17)), ("+12", .number(12)), ("0o17", .number(15)), ("0x1F", .number(31)),
            ("0xff", .number(255)), ("1.5", .number(1.5)), ("-.5", .number(-0.5)), ("5.", .number(5)), ("1e-2", .number(0.01)),
            ("6.02E+23", .number(6.02e23)), ("-.inf", .number(-.infinity)), (".Inf", .number(.infinity)),
            // What the core schema does not make a number or a bool.
            ("nULL", .string("nULL")), ("tRue", .string("tRue")), ("0x", .string("0x")), ("0o8", .string("0o8")),
            ("-0x1F", .string("-0x1F")), ("1e", .string("1e")), (".", .string(".")), ("1.2.3", .string("1.2.3")),
            ("+.nan", .string("+.nan")), ("12abc", .string("12abc")), ("30s", .string("30s")), ("1h30m", .string("1h30m")),
        ]
        for (text, expected) in cases {
            #expect(try yaml("v: \(text)\n") == .object([("v", expected)]), "\(text)")
        }
        guard case let .number(nan)? = try yaml(".nan") else { Issue.record(".nan is not a number"); return }
        #expect(nan.isNaN)
    }

    @Test("quoted scalars are strings, whatever they look like")
    func quoted() throws {
        #expect(try yaml("[\"true\", '12', \"null\", '', \"~\"]") == .array([.string("true"), .string("12"), .string("null"), .string(""), .string("~")]))
    }

    /// PyYAML reads YAML 1.1, where these differ; this reader keeps YAML 1.2's core schema
    /// (the differential test keeps away from them).
    @Test("where YAML 1.1 (PyYAML) and 1.2 differ, the 1.2 meaning")
    func oneTwoNotOneOne() throws {
        #expect(try yaml("yes") == .string("yes"))      // 1.1: true
        #expect(try yaml("on") == .string("on"))        // 1.1: true
        #expect(try yaml("0o17") == .number(15))        // 1.1: the string "0o17" (its octal is 017)
        #expect(try yaml("1_000") == .string("1_000"))  // 1.1: 1000
        #expect(try yaml("0777") == .number(777))       // 1.1: octal, 511
    }

    @Test("the standard tags say what a scalar is; the non-specific ! makes a string")
    func standardTags() throws {
        let value = try yaml("""
        a: !!str 12
        b: !!int "12"
        c: !!float 3
        d: !!bool "true"
        e: !!null ""
        f: ! 12
        g: !<tag:yaml.org,2002:str> 0x10
        h: !!map {x: 1}
        i: !!seq [1]
        """)
        #expect(value == .object([("a", .string("12")), ("b", .number(12)), ("c", .number(3)), ("d", .bool(true)),
                                  ("e", .null), ("f", .string("12")), ("g", .string("0x10")),
                                  ("h", .object([("x", .number(1))])), ("i", .array([.number(1)]))]))
    }

    @Test("other tags are refused with their line and column", arguments: [
        ("a: 1\nb: !!python/object:os.system x\n", "!!python/object:os.system", 2, 4),
        ("a: !Ref name\n", "!Ref", 1, 4),
        ("data: !!binary aGVsbG8=\n", "!!binary", 1, 7),
        ("when: !!timestamp 2024-01-01\n", "!!timestamp", 1, 7),
        ("s: !!set {a, b}\n", "!!set", 1, 4),
        ("- !!omap [{a: 1}]\n", "!!omap", 1, 3),
    ])
    func otherTags(text: String, tag: String, line: Int, column: Int) throws {
        let error = try #require(yamlError(text))
        #expect(error.problem.contains("the tag '\(tag)' is not allowed"))
        #expect(!error.isSyntax)
        #expect((error.line, error.column) == (line, column))
    }

    @Test("a tag that does not fit its value is refused")
    func mismatchedTag() throws {
        #expect(try #require(yamlError("a: !!int twelve")).problem.contains("'twelve' is not a value of its tag '!!int'"))
        #expect(try #require(yamlError("a: !!map [1]")).problem == "the tag '!!map' is on a sequence")
        #expect(try #require(yamlError("a: !!seq x")).problem == "the tag '!!seq' is on a scalar")
    }
}

@Suite("YAML: structure")
struct YAMLStructureTests {
    @Test("a key given twice is refused, naming both lines")
    func duplicateKey() throws {
        let error = try #require(yamlError("tasks:\n  - name: a\n    command: [x]\n    name: b\n"))
        #expect(error.description == "the key 'name' is given a second time at line 4, column 5; it is first at line 2: keep one")
        #expect((error.line, error.column) == (4, 5))
    }

    @Test("a key that is a sequence or a mapping is refused")
    func nonScalarKey() throws {
        let error = try #require(yamlError("a: 1\n? [x, y]\n: 2\n"))
        #expect(error.description == "a key that is a sequence or a mapping at line 2, column 3; the keys of a job file are names")
        #expect((error.line, error.column) == (2, 3))
        #expect(yamlError("{a: 1}: 2") != nil)
    }

    @Test("anchors and aliases repeat a node")
    func aliases() throws {
        let value = try yaml("base: &cmd [python3, run.py]\nagain: *cmd\n")
        #expect(value?["again"] == .array([.string("python3"), .string("run.py")]))
    }

    @Test("an alias to no anchor is refused where it stands")
    func undefinedAlias() throws {
        let error = try #require(yamlError("a: 1\nb: *nothing\n"))
        #expect(error.description == "the alias '*nothing' refers to no anchor at line 2, column 4; an anchor '&nothing' must come before it")
        #expect((error.line, error.column) == (2, 4))
    }

    @Test("merge keys as PyYAML takes them: written keys win, then the first mapping named")
    func mergeKeys() throws {
        let value = try yaml("""
        a: &a {budget: 1m, grace: 5s, env: {X: a}}
        b: &b {budget: 2m, retries: 3}
        one:
          <<: *a
          grace: 1s
        both:
          <<: [*a, *b]
          name: t
        inline:
          <<: {x: 1}
        """)
        #expect(value?["one"] == .object([("budget", .string("1m")), ("env", .object([("X", .string("a"))])), ("grace", .string("1s"))]))
        #expect(value?["both"] == .object([("budget", .string("1m")), ("grace", .string("5s")), ("env", .object([("X", .string("a"))])),
                                           ("retries", .number(3)), ("name", .string("t"))]))
        #expect(value?["inline"] == .object([("x", .number(1))]))
        #expect(try #require(yamlError("a: {<<: 3}")).advice?.hasPrefix("it takes a mapping or a sequence of mappings") == true)
        // Quoted, it is an ordinary key.
        #expect(try yaml("'<<': 3") == .object([("<<", .number(3))]))
    }

    @Test("a billion laughs is refused at once")
    func aliasBomb() throws {
        var text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        for level in 1...9 {
            let previous = Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ")
            text += "a\(level): &a\(level) [\(previous)]\n"
        }
        let started = ContinuousClock.now
        let error = try #require(yamlError(text))
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(error.problem.contains("stand for more than \(YAMLDocument.aliasBudget(byteCount: text.utf8.count)) nodes"))
        #expect(error.advice?.contains("alias bomb") == true)
        #expect(error.line == 6)
    }

    @Test("more than one document is refused")
    func twoDocuments() throws {
        let error = try #require(yamlError("tasks: []\n---\ntasks: []\n"))
        #expect(error.description.hasPrefix("a second document starts at line 2, column 1; a job file is one YAML document"))
        #expect((error.line, error.column) == (2, 1))
        // One document with its markers is one.
        #expect(try yaml("---\na: 1\n...\n") == .object([("a", .number(1))]))
    }

    @Test("an empty file, or comments alone, holds no document")
    func empty() throws {
        #expect(try yaml("") == nil)
        #expect(try yaml("# nothing here\n\n") == nil)
        #expect(try yaml("---\n") == .null)
    }

    @Test("a syntax error: libyaml's words, its line and column")
    func syntaxError() throws {
        let error = try #require(yamlError("tasks:\n  - name: a\n   command: [x]\n"))
        #expect(error.isSyntax)
        #expect(error.description == "did not find expected '-' indicator at line 3, column 4, while parsing a block collection from line 2, column 3")
        let unclosed = try #require(yamlError("a: [1, 2\n"))
        #expect(unclosed.isSyntax)
        #expect(unclosed.line == 2)
    }

    @Test("bytes that are not UTF-8 are placed too")
    func notUTF8() throws {
        let error = try #require(yamlError(Array("a: 1\nb: ".utf8) + [0xFF, 0x0A]))
        #expect(error.isSyntax)
        #expect(error.problem.contains("UTF-8"))
        #expect((error.line, error.column) == (2, 4))
    }

    @Test("nesting deeper than 64 is refused, not a crash")
    func deep() throws {
        #expect(try yaml(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)) != nil)
        #expect(yamlError(String(repeating: "[", count: 65) + String(repeating: "]", count: 65))?.problem == "nested more than 64 deep")
        let error = try #require(yamlError(String(repeating: "[", count: 100_000)))
        #expect(error.problem == "nested more than 64 deep")
        #expect((error.line, error.column) == (1, 65))
    }

    @Test("as JSON text, the top-level sequence written item by item, first")
    func jsonText() throws {
        let text = Array("before: &d {x: 1}\ntasks:\n  - {name: a, <<: *d}\n  - name: \"b\\n\"\nafter: .inf\n".utf8)
        let json = try #require(try YAMLDocument.jsonText(text, streaming: "tasks"))
        #expect(String(decoding: json, as: UTF8.self) == #"{"tasks":[{"name":"a","x":1},{"name":"b\n"}],"before":{"x":1},"after":null}"#)
        // Not a mapping at the top, or tasks by an alias: written whole.
        #expect(try YAMLDocument.jsonText(Array("[1, 2]".utf8), streaming: "tasks") == Array("[1,2]".utf8))
        #expect(try YAMLDocument.jsonText(Array("a: &t [1]\ntasks: *t\n".utf8), streaming: "tasks") == Array(#"{"a":[1],"tasks":[1]}"#.utf8))
        #expect(try YAMLDocument.jsonText(Array("a: 1\ntasks: []\n".utf8), streaming: "tasks") == Array(#"{"tasks":[],"a":1}"#.utf8))
        #expect(try YAMLDocument.jsonText(Array("# nothing\n".utf8), streaming: "tasks") == nil)
        // An error in the last item is an error of the whole text.
        #expect(throws: YAMLError.self) { try YAMLDocument.jsonText(Array("tasks:\n  - a\n  - !Ref b\n".utf8), streaming: "tasks") }
    }
}
