import COvertime

/// How this program was linked, for what depends on it.
public enum ProgramImage {
    /// Whether it is linked statically (no dynamic loader started it): the C library then
    /// cannot safely load the shared libraries some of its services would (NSS's sources).
    public static let isStaticallyLinked = overtime_has_program_interpreter() == 0
}
