import Foundation
import PackagePlugin

/// Gives the CLI its version and the commit it was built from: before each build,
/// `scripts/build-info` writes `BuildInfo.swift` from the checkout's `VERSION` file (the one
/// place the version is written; the wheels, the tarball and the image take it from there
/// too) and `git rev-parse HEAD`. It rewrites the file only when either has changed, so an
/// unchanged checkout recompiles nothing. A prebuild command, run at every build, rather
/// than a build command: a new commit changes no file SwiftPM could be told to watch.
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        let root = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        return [.prebuildCommand(
            displayName: "Stamping the version and commit",
            executable: URL(filePath: "/bin/sh"),
            arguments: [root.appending(path: "scripts/build-info").path, root.path, output.path],
            outputFilesDirectory: output
        )]
    }
}
