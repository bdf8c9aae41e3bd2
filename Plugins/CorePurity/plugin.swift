import PackagePlugin

/// Keeps OvertimeCore pure: its build runs `core-purity` over its sources whenever one
/// changes, and fails on any import other than the modules it may use. The compiler alone
/// cannot say this: Glibc is importable from every Linux target, and a module of this
/// package that is not a declared dependency may still be found beside the others in the
/// build directory.
@main
struct CorePurity: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        guard let module = target as? SourceModuleTarget else { return [] }
        let sources = module.sourceFiles(withSuffix: "swift").map(\.url)
        let stamp = context.pluginWorkDirectoryURL.appending(path: "CorePurityChecked.swift")
        return [.buildCommand(
            displayName: "Checking that OvertimeCore imports only what it may",
            executable: try context.tool(named: "core-purity").url,
            arguments: [stamp.path] + sources.map(\.path),
            inputFiles: sources,
            outputFiles: [stamp]
        )]
    }
}
