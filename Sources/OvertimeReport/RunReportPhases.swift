extension RunReport {
    /// Where an attempt entered a phase (docs/hangs.md): drawn as a shade of its bar from
    /// here to the next phase or its end.
    public struct PhaseStart: Sendable, Equatable {
        /// Milliseconds after the run's start.
        public var time: Int64
        /// Its name, as a place in `RunReport.phaseNames`; `leftOut` for the first of the
        /// phases past `RunReport.phaseLimit`, from which none is drawn.
        public var name: Int

        public static let leftOut = -1
    }

    /// A stall of an attempt under `--on-stall warn`, in milliseconds after the run's start.
    public struct Stall: Sendable, Equatable {
        public var start: Int64
        /// When it reported again; nil when it did not before its end.
        public var end: Int64?

        public init(start: Int64, end: Int64? = nil) {
            self.start = start
            self.end = end
        }
    }
}
