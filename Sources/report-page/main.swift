import Foundation

// Turns the report's page (page.html, with page.css, groups.js, phases.js and page.js) into Swift for
// OvertimeReport. Run by the ReportPage build-tool plugin whenever one of the files changes.
// Usage: report-page OUTPUT.swift PAGE.html PAGE.css SCRIPT.js...
//
// page.html is the whole page with holes: `{{page.css}}` and, after `{{data}}`, one per
// script named as its file (`{{groups.js}}`, `{{page.js}}`), in the order the scripts are
// given, are filled here with those files (each without its last newline, so that a file
// may end as text files do); `{{title}}` and `{{data}}` are where `overtime report` writes
// the run's title and data. The output is page.html cut at those two: three string constants.
// An inlined file must not end its element early (a `</style` in the style, a `</script`
// or `<!--` in a script): the build fails there rather than draw a broken page.

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

/// The hole a script fills is named as its file: `{{page.js}}`.
func holeName(of scriptPath: String) -> String {
    URL(fileURLWithPath: scriptPath).lastPathComponent
}

func page(htmlPath: String, cssPath: String, scriptPaths: [String]) throws -> String {
    let html = try read(htmlPath)
    let css = try inlined(cssPath)
    try refuse(["</style"], in: css, path: cssPath, because: "end the page's <style> element early")
    let scripts = try scriptPaths.map { path in
        let script = try inlined(path)
        try refuse(["</script", "<!--"], in: script, path: path, because: "end the page's <script> element early")
        return script
    }
    let (pieces, names) = try holes(of: html, path: htmlPath)
    let expected = ["title", "page.css", "data"] + scriptPaths.map(holeName)
    guard names == expected else {
        throw PageError(path: htmlPath, text: "its holes are \(names.map { "{{\($0)}}" }.joined(separator: ", ")); "
                        + "it needs exactly \(expected.map { "{{\($0)}}" }.joined(separator: ", ")), in that order")
    }
    let beforeTitle = pieces[0]
    let titleToData = pieces[1] + css + pieces[2]
    let afterData = zip(scripts, pieces[4...]).reduce(pieces[3]) { $0 + $1.0 + $1.1 }
    let files = ["page.html", "page.css"] + scriptPaths.map(holeName)
    let sources = files.dropLast().joined(separator: ", ") + " and " + files[files.count - 1]
    return """
    // Written by report-page from \(sources); edit those, not this.
    enum PageText {
        /// page.html up to the page's title.
        static let beforeTitle = \(swiftLiteral(beforeTitle))
        /// From the title's end to the run's data, the style inline.
        static let titleToData = \(swiftLiteral(titleToData))
        /// From the data's end to the page's end, the scripts inline.
        static let afterData = \(swiftLiteral(afterData))
    }

    """
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 4 else {
    FileHandle.standardError.write(Data("usage: report-page OUTPUT.swift PAGE.html PAGE.css SCRIPT.js...\n".utf8))
    exit(2)
}
do {
    let swift = try page(htmlPath: arguments[1], cssPath: arguments[2], scriptPaths: Array(arguments[3...]))
    do {
        try swift.write(toFile: arguments[0], atomically: true, encoding: .utf8)
    } catch {
        throw PageError(path: arguments[0], text: "cannot write it: \(error.localizedDescription)")
    }
} catch let error as PageError {
    FileHandle.standardError.write(Data("\(error.description)\n".utf8))
    exit(1)
}
