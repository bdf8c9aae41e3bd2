import Overtime

/// The small pure pieces of a live row: bars, spinners, percentages, compact durations.
enum DisplayFormat {
    /// Unicode eighth blocks, one to seven eighths.
    private static let eighths: [Character] = ["▏", "▎", "▍", "▌", "▋", "▊", "▉"]
    static let unicodeSpinner: [String] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
    static let asciiSpinner: [String] = ["|", "/", "-", "\\"]

    /// A bar `width` columns wide, `fraction` (clamped to 0…1) of it filled. Unicode: full and
    /// eighth blocks on a light shade; ASCII: `[###-----]` (brackets included in the width).
    static func bar(_ fraction: Double, width: Int, unicode: Bool) -> (filled: String, empty: String) {
        let f = fraction.isFinite ? min(1, max(0, fraction)) : 0
        if unicode {
            guard width > 0 else { return ("", "") }
            let total = width * 8
            let done = Int((f * Double(total)).rounded(.down))
            let full = done / 8
            let part = done % 8
            var filled = String(repeating: "█", count: full)
            if part > 0 { filled.append(eighths[part - 1]) }
            let used = full + (part > 0 ? 1 : 0)
            return (filled, String(repeating: "░", count: width - used))
        }
        guard width >= 3 else { return (String(repeating: "#", count: max(0, width)), "") }
        let inner = width - 2
        let full = Int((f * Double(inner)).rounded(.down))
        return ("[" + String(repeating: "#", count: full), String(repeating: "-", count: inner - full) + "]")
    }

    /// A bar for work of unknown size: a short block sweeping back and forth, by `frame`.
    static func sweep(frame: Int, width: Int, unicode: Bool) -> (before: String, block: String, after: String) {
        let inner = unicode ? width : width - 2
        guard inner > 0 else { return ("", "", "") }
        let blockWidth = min(3, inner)
        let span = inner - blockWidth
        var position = 0
        if span > 0 {
            let cycle = 2 * span
            let step = ((frame % cycle) + cycle) % cycle
            position = step <= span ? step : cycle - step
        }
        let background = unicode ? "░" : " "
        let before = String(repeating: background, count: position)
        let after = String(repeating: background, count: span - position)
        let block = String(repeating: unicode ? "█" : "=", count: blockWidth)
        return unicode ? (before, block, after) : ("[" + before, block, after + "]")
    }

    static func spinner(frame: Int, unicode: Bool) -> String {
        let frames = unicode ? unicodeSpinner : asciiSpinner
        return frames[((frame % frames.count) + frames.count) % frames.count]
    }

    /// `45%`; never shows 100% before the work is complete.
    static func percent(_ fraction: Double) -> String {
        let f = fraction.isFinite ? min(1, max(0, fraction)) : 0
        var p = Int((f * 100).rounded(.down))
        if p == 100 && f < 1 { p = 99 }
        return "\(p)%"
    }

    /// A compact duration for a narrow column: `42s`, `4m05s`, `2h05m`, `120h`. Elapsed
    /// time rounds down; a countdown rounds up, so it reads 0s only when time is up.
    static func clock(_ d: Duration, roundingUp: Bool = false) -> String {
        let ns = max(0, d.nanoseconds)
        let s = roundingUp ? (ns / 1_000_000_000) + (ns % 1_000_000_000 == 0 ? 0 : 1) : ns / 1_000_000_000
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m" + two(s % 60) + "s" }
        if s < 100 * 3600 { return "\(s / 3600)h" + two((s % 3600) / 60) + "m" }
        return "\(s / 3600)h"
    }

    private static func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
}

/// Estimates the time to completion from how fast the share done has grown lately.
/// Pure: it is fed `(time, fraction)` samples and asked at a given time.
struct RateTracker: Sendable, Equatable {
    struct Sample: Sendable, Equatable {
        var time: MonotonicInstant
        var fraction: Double
    }

    /// Samples closer together than this replace the newest one rather than add one.
    static let spacing = Duration.milliseconds(250)
    /// The rate is measured over at most this much recent time.
    static let window = Duration.seconds(30)
    /// No estimate from samples spanning less than this.
    static let minimumSpan = Duration.milliseconds(900)

    private(set) var samples: [Sample] = []

    mutating func add(_ fraction: Double, at time: MonotonicInstant) {
        guard fraction.isFinite else { return }
        if let last = samples.last, fraction < last.fraction {
            samples.removeAll()  // went backwards: a new phase, measured afresh
        }
        if samples.count >= 2, let last = samples.last, time - last.time < Self.spacing {
            samples[samples.count - 1] = Sample(time: time, fraction: fraction)
        } else {
            samples.append(Sample(time: time, fraction: fraction))
        }
        while samples.count > 2, let first = samples.first, time - first.time > Self.window {
            samples.removeFirst()
        }
    }

    /// Time left at `now`, counting down from the newest sample; nil while unknown (too few
    /// samples, no growth).
    func eta(at now: MonotonicInstant) -> Duration? {
        guard let first = samples.first, let last = samples.last, last.fraction < 1 else { return nil }
        let span = last.time - first.time
        guard span >= Self.minimumSpan else { return nil }
        let grown = last.fraction - first.fraction
        guard grown > 0 else { return nil }
        let seconds = (1 - last.fraction) * span.seconds / grown
        let left = Duration.seconds(fromDouble: seconds) - (now - last.time)
        return max(.zero, left)
    }
}
