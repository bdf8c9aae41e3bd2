import Foundation
import PackagePlugin

/// Makes OvertimeReport's two pages part of it: for each, its build runs `page-bundle` over
/// the page's HTML and the style sheets and scripts it inlines whenever one of them changes,
/// and compiles what it writes (the page as Swift strings, cut where the program fills it
/// in) into the module. So a page is files that an editor, `node --check` and the pages' own
/// tests (Tests/ReportPage, Tests/LivePage) read as they are, and the binary still carries
/// it whole.
@main
struct PageBundle: BuildToolPlugin {
    /// A page: its HTML, the files it inlines (each fills the hole named as it), the holes
    /// the program fills (in order), and the Swift enum it becomes.
    struct Page {
        var html: String
        var files: [String]
        var cuts: [String]
        var enumName: String
    }

    static let pages = [
        // `overtime report`: the run's title and data.
        Page(html: "page.html", files: ["page.css", "common.js", "groups.js", "phases.js", "timeline.js", "page.js"],
             cuts: ["title", "data"], enumName: "PageText"),
        // The live page (--ui): the nonce of its style and script, new in every response.
        Page(html: "live.html", files: ["page.css", "live.css", "common.js", "phases.js", "timeline.js", "livetimeline.js", "live.js"],
             cuts: ["nonce", "nonce"], enumName: "LivePageText"),
    ]

    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        guard let module = target as? SourceModuleTarget else { return [] }
        let sources = module.sourceFiles.map(\.url)
        func file(_ name: String) throws -> URL {
            guard let url = sources.first(where: { $0.lastPathComponent == name }) else {
                throw PageFileMissing(name: name, target: module.name)
            }
            return url
        }
        return try Self.pages.map { page in
            let html = try file(page.html)
            let inputs = try page.files.map(file)
            let output = context.pluginWorkDirectoryURL.appending(path: page.enumName + ".swift")
            return .buildCommand(
                displayName: "Making \(page.enumName) of \(page.html), \(page.files.joined(separator: ", "))",
                executable: try context.tool(named: "page-bundle").url,
                arguments: [output.path, page.enumName, page.cuts.joined(separator: ","), html.path] + inputs.map(\.path),
                inputFiles: [html] + inputs,
                outputFiles: [output]
            )
        }
    }
}

struct PageFileMissing: Error, CustomStringConvertible {
    var name: String
    var target: String
    var description: String { "\(target) has no Page/\(name): a page is made of it" }
}
