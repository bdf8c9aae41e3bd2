import Foundation

// Turns a page of OvertimeReport (the run report's page.html, the live page's live.html)
// and the files it inlines into Swift. Run by the PageBundle build-tool plugin whenever one
// of the files changes.
// Usage: page-bundle OUTPUT.swift ENUM CUTS PAGE.html FILE...
//
// PAGE.html is the whole page with holes `{{name}}`. A hole named as one of the FILEs
// (`{{page.css}}`, `{{page.js}}`) is filled here with that file, without its last newline,
// so that a file may end as text files do; every FILE fills exactly one hole. The other
// holes are where the program writes what it knows only when it serves the page (the run's
// title and data, a response's nonce): they must be CUTS (comma-separated), in that order.
// The output is `enum ENUM` with the page cut at them: `pieces`, one more than the cuts.
// An inlined file must not end its element early (a `</style` in a style sheet, a
// `</script` or `<!--` in a script): the build fails there rather than serve a broken page.

/// A reason the page cannot be made, said as `path:line: error: text`.
struct PageError: Error {
    var path: String
    var line: Int?
    var text: String

    var description: String {
        "\(path)\(line.map { ":\($0)" } ?? ""): error: \(text)"
    }
}

func read(_ path: String) throws -> String {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw PageError(path: path, text: "cannot read it")
    }
    guard let text = String(data: data, encoding: .utf8) else {
        throw PageError(path: path, text: "it is not UTF-8")
    }
    return text
}

/// A file as it goes inside the page: without the newline that ends it.
func inlined(_ path: String) throws -> String {
    let text = try read(path)
    return text.hasSuffix("\n") ? String(text.dropLast()) : text
}

/// The line (from 1) on which `index` falls.
func lineNumber(of index: String.Index, in text: String) -> Int {
    text[..<index].reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
}

/// Fails where `text` holds any of `forbidden` (in any case).
func refuse(_ forbidden: [String], in text: String, path: String, because why: String) throws {
    for word in forbidden {
        if let found = text.range(of: word, options: .caseInsensitive) {
            throw PageError(path: path, line: lineNumber(of: found.lowerBound, in: text), text: "`\(word)` here would \(why)")
        }
    }
}

/// page.html cut at its holes: the text between them and the name of each hole, in order.
func holes(of html: String, path: String) throws -> (pieces: [String], names: [String]) {
    var pieces: [String] = []
    var names: [String] = []
    var rest = html[...]
    while let open = rest.range(of: "{{") {
        guard let close = rest[open.upperBound...].range(of: "}}") else {
            throw PageError(path: path, line: lineNumber(of: open.lowerBound, in: html), text: "`{{` without its `}}`")
        }
        pieces.append(String(rest[..<open.lowerBound]))
        names.append(String(rest[open.upperBound..<close.lowerBound]))
        rest = rest[close.upperBound...]
    }
    pieces.append(String(rest))
    return (pieces, names)
}

/// `text` as a Swift string literal of printable ASCII.
func swiftLiteral(_ text: String) -> String {
    var literal = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\\": literal += "\\\\"
        case "\"": literal += "\\\""
        case "\n": literal += "\\n"
        case "\t": literal += "\\t"
        case " "..."~": literal.unicodeScalars.append(scalar)
        default: literal += "\\u{\(String(scalar.value, radix: 16))}"
        }
    }
    return literal + "\""
}

/// The hole a file fills is named as the file: `{{page.js}}`.
func holeName(of scriptPath: String) -> String {
    URL(fileURLWithPath: scriptPath).lastPathComponent
}

func bundle(enumName: String, cuts: [String], htmlPath: String, filePaths: [String]) throws -> String {
    let html = try read(htmlPath)
    var files: [String: String] = [:]
    for path in filePaths {
        let name = holeName(of: path)
        let text = try inlined(path)
        if name.hasSuffix(".css") {
            try refuse(["</style"], in: text, path: path, because: "end the page's <style> element early")
        } else {
            try refuse(["</script", "<!--"], in: text, path: path, because: "end the page's <script> element early")
        }
        files[name] = text
    }
    let (pieces, names) = try holes(of: html, path: htmlPath)
    let cutNames = names.filter { files[$0] == nil }
    guard cutNames == cuts else {
        throw PageError(path: htmlPath, text: "its holes for the program are \(cutNames.map { "{{\($0)}}" }.joined(separator: ", ")); "
                        + "it needs exactly \(cuts.map { "{{\($0)}}" }.joined(separator: ", ")), in that order")
    }
    for name in files.keys.sorted() where names.filter({ $0 == name }).count != 1 {
        throw PageError(path: htmlPath, text: "{{\(name)}} must be a hole of it exactly once")
    }
    var cutPieces: [String] = [pieces[0]]
    for (name, piece) in zip(names, pieces.dropFirst()) {
        if let file = files[name] {
            cutPieces[cutPieces.count - 1] += file + piece
        } else {
            cutPieces.append(piece)
        }
    }
    let sources = ([holeName(of: htmlPath)] + filePaths.map(holeName)).joined(separator: ", ")
    return """
    // Written by page-bundle from \(sources); edit those, not this.
    enum \(enumName) {
        /// The program's holes, in order: \(cuts.joined(separator: ", ")).
        static let cuts = [\(cuts.map(swiftLiteral).joined(separator: ", "))]
        /// The page's text between them, the files inline.
        static let pieces = [
    \(cutPieces.map { "        " + swiftLiteral($0) + "," }.joined(separator: "\n"))
        ]
    }

    """
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 5 else {
    FileHandle.standardError.write(Data("usage: page-bundle OUTPUT.swift ENUM CUTS PAGE.html FILE...\n".utf8))
    exit(2)
}
do {
    let cuts = arguments[2].split(separator: ",").map(String.init)
    let swift = try bundle(enumName: arguments[1], cuts: cuts, htmlPath: arguments[3], filePaths: Array(arguments[4...]))
    do {
        try swift.write(toFile: arguments[0], atomically: true, encoding: .utf8)
    } catch {
        throw PageError(path: arguments[0], text: "cannot write it: \(error.localizedDescription)")
    }
} catch let error as PageError {
    FileHandle.standardError.write(Data("\(error.description)\n".utf8))
    exit(1)
}
