import PackagePlugin

/// Makes the report's page part of OvertimeReport: its build runs `report-page` over
/// `Page/page.html`, `page.css`, `groups.js`, `phases.js` and `page.js` whenever one of them changes, and
/// compiles what it writes (the page as Swift strings) into the module. So the page is files
/// that an editor, `node --check` and the page's own tests (Tests/ReportPage) read as they
/// are, and the binary still carries it whole.
@main
struct ReportPage: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        guard let module = target as? SourceModuleTarget else { return [] }
        let files = module.sourceFiles.map(\.url)
        // The scripts in the order of their holes in page.html: groups.js and phases.js define
        // what page.js calls.
        let inputs = try ["page.html", "page.css", "groups.js", "phases.js", "page.js"].map { name in
            guard let file = files.first(where: { $0.lastPathComponent == name }) else {
                throw PageFileMissing(name: name, target: module.name)
            }
            return file
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "PageText.swift")
        return [.buildCommand(
            displayName: "Making the report page of page.html, page.css and its scripts",
            executable: try context.tool(named: "report-page").url,
            arguments: [output.path] + inputs.map(\.path),
            inputFiles: inputs,
            outputFiles: [output]
        )]
    }
}

struct PageFileMissing: Error, CustomStringConvertible {
    var name: String
    var target: String
    var description: String { "\(target) has no Page/\(name): the report's page is made of it" }
}
