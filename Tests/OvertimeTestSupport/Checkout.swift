import Foundation

/// The checkout the tests were built from, for the files of it they read or run (the docs,
/// the worker library, scripts): its root, found from this file's own path.
public enum Checkout {
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// A path in the checkout: `Checkout.path("docs/jobfile.md")`.
    public static func path(_ relative: String) -> String {
        root + "/" + relative
    }
}
