#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Overtime's own copy of the Python worker library, handed to tasks so that tqdm, rich and
/// Lightning bars report progress even where the job's Python has no `overtime-worker`
/// installed: the case whenever `overtime` itself came from `uv tool install`, `pipx`, the
/// tarball or the image, which keep it apart from the job's environment.
///
/// The wheel, the tarball and the image lay it out as `<prefix>/share/overtime/python` beside
/// `<prefix>/bin/overtime`: a `sitecustomize.py`, and the library in `lib/` under it. The
/// directory goes on the task's PYTHONPATH after the task's own entries; its
/// `sitecustomize.py` runs at the start of every Python of the task (then the one it hides),
/// and puts `lib/` at the very end of `sys.path`, so a copy of the library the job installed
/// itself, or has on its own PYTHONPATH, is the one imported (docs/protocol.md, "Bars with no
/// code change").
public enum PythonBridge {
    /// The bundled copy beside the running `overtime`, or nil (a build from a checkout, or a
    /// binary copied without its `share/`).
    public static func besideExecutable() -> String? {
        guard let executable = ProcessEnvironment.executablePath() else { return nil }
        return bundled(forExecutable: executable) { access($0, R_OK) == 0 }
    }

    /// `<prefix>/share/overtime/python` for `<prefix>/bin/overtime`, when `readable` says
    /// it holds the start-up hook.
    static func bundled(forExecutable executable: String, readable: (String) -> Bool) -> String? {
        // Two path components up, on the bytes: this runs at every start.
        var prefix = Substring(executable)
        for _ in 0..<2 {
            guard let slash = prefix.utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
            prefix = prefix[..<slash]
        }
        let directory = String(prefix) + "/share/overtime/python"
        return readable(directory + "/sitecustomize.py") ? directory : nil
    }

    /// The PYTHONPATH of a task whose own is `own` (nil: it has none), with `bridge` after
    /// its entries; unchanged when `bridge` is one of them already.
    public static func searchPath(_ own: String?, appending bridge: String) -> String {
        guard let own, !own.isEmpty else { return bridge }
        if own.split(separator: ":", omittingEmptySubsequences: false).contains(where: { $0 == bridge }) { return own }
        return own + ":" + bridge
    }
}
