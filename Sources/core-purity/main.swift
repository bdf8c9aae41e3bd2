import Foundation

// Fails when a source file of OvertimeCore imports anything but the modules the pure core
// may use. Run by the CorePurity build-tool plugin whenever one of those files changes;
// its output, an empty Swift file, is compiled into the core so that the check cannot be
// skipped. Usage: core-purity OUTPUT SOURCE...

let allowed: Set<String> = ["OvertimeProtocol"]

/// The top module an `import` line names (`@testable import A`, `import struct A.B` and
/// `#if canImport(A)` alike); nil for any other line.
func importedModule(_ line: Substring) -> String? {
    var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
    if let first = words.first, first == "#if" || first == "#elseif", let start = line.range(of: "canImport(") {
        return String(line[start.upperBound...].prefix { $0 != ")" && $0 != "," })
    }
    while let first = words.first, first.hasPrefix("@") { words = words.dropFirst() }
    guard words.first == "import" else { return nil }
    words = words.dropFirst()
    let kinds: Set<Substring> = ["struct", "class", "enum", "protocol", "typealias", "func", "let", "var"]
    if let first = words.first, kinds.contains(first) { words = words.dropFirst() }
    return words.first.map { String($0.prefix { $0 != "." }) }
}

let arguments = CommandLine.arguments.dropFirst()
guard let output = arguments.first else {
    FileHandle.standardError.write(Data("usage: core-purity OUTPUT SOURCE...\n".utf8))
    exit(2)
}
var problems = 0
for path in arguments.dropFirst() {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
        FileHandle.standardError.write(Data("\(path): error: cannot read it\n".utf8))
        problems += 1
        continue
    }
    for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        guard let module = importedModule(line), !allowed.contains(module) else { continue }
        FileHandle.standardError.write(Data("\(path):\(number + 1): error: OvertimeCore is pure: it may import \(allowed.sorted().joined(separator: ", ")) only, not \(module)\n".utf8))
        problems += 1
    }
}
if problems > 0 { exit(1) }
let stamp = "// Written by core-purity: every import of OvertimeCore is one it may make.\n"
do {
    try stamp.write(toFile: output, atomically: true, encoding: .utf8)
} catch {
    FileHandle.standardError.write(Data("\(output): error: cannot write it: \(error)\n".utf8))
    exit(1)
}
