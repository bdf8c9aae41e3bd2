import Foundation

/// PyYAML (Debian's python3-yaml, YAML 1.1), the reader the YAML tests hold ours against:
/// `safe_load`, its data written as JSON, and JSON data written as YAML with `safe_dump`.
public enum PyYAML {
    /// Debian's interpreter, which has python3-yaml (scripts/setup installs both); another
    /// `python3` on PATH may not.
    static let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"

    /// The YAML text's data, as `json.dumps(yaml.safe_load(text))` writes it.
    public static func json(fromYAML text: [UInt8]) throws -> [UInt8] {
        try run("import json,sys,yaml; sys.stdout.write(json.dumps(yaml.safe_load(sys.stdin.buffer)))", input: text)
    }

    /// The same, with PyYAML's YAML 1.1 resolvers for plain scalars swapped for YAML 1.2's
    /// core schema (`on` a string, `1e-3` a number, `0777` decimal, no timestamps), as a
    /// job file is read; merge keys as before.
    public static func json(fromYAMLCoreSchema text: [UInt8]) throws -> [UInt8] {
        try run(#"""
        import json, re, sys, yaml
        class Loader(yaml.SafeLoader):
            pass
        Loader.yaml_implicit_resolvers = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag == "tag:yaml.org,2002:merge"]
            for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
        for tag, pattern, first in [
                ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
                ("bool", r"true|True|TRUE|false|False|FALSE", list("tTfF")),
                ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", list("-+0123456789")),
                ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
                 list("-+0123456789."))]:
            Loader.add_implicit_resolver("tag:yaml.org,2002:" + tag, re.compile("(?:" + pattern + ")$"), first)
        def integer(loader, node):
            text = loader.construct_scalar(node)
            return int(text[2:], 16) if text.startswith("0x") else int(text[2:], 8) if text.startswith("0o") else int(text)
        Loader.add_constructor("tag:yaml.org,2002:int", integer)
        sys.stdout.write(json.dumps(yaml.load(sys.stdin.buffer, Loader=Loader)))
        """#, input: text)
    }

    /// The JSON text's data, as `yaml.safe_dump` writes it (keys in their order), but with
    /// every string that YAML 1.2's core schema reads as something else quoted: PyYAML's
    /// dumper knows only YAML 1.1, and writes the string "1e-2" bare.
    public static func yaml(fromJSON text: [UInt8]) throws -> [UInt8] {
        try run(#"""
        import json, re, sys, yaml
        core = re.compile(r"(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                          r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|null|Null|NULL|~|true|True|TRUE|false|False|FALSE|)")
        class Dumper(yaml.SafeDumper):
            pass
        def string(dumper, value):
            return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'" if core.fullmatch(value) else None)
        Dumper.add_representer(str, string)
        sys.stdout.write(yaml.dump(json.load(sys.stdin.buffer), Dumper=Dumper, sort_keys=False, allow_unicode=True))
        """#, input: text)
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private static func run(_ program: String, input: [UInt8]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python.hasPrefix("/") ? python : "/usr/bin/env")
        process.arguments = (python.hasPrefix("/") ? [] : [python]) + ["-c", program]
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        // Written from a thread of its own: a large input would fill the pipe while the
        // child's output fills the other.
        let writer = Thread {
            stdin.fileHandleForWriting.write(Data(input))
            try? stdin.fileHandleForWriting.close()
        }
        writer.start()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "PyYAML failed (\(process.terminationStatus)): \(String(decoding: err, as: UTF8.self))")
        }
        return Array(out)
    }
}
