#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import OvertimeCore

/// The core writes UTC timestamps without the C library: its calendar must agree with
/// gmtime_r's to the millisecond.
@Suite struct TimestampTests {
    let encoder = EventEncoder(runID: "r", wallOffsetNanoseconds: 0)

    @Test func knownInstants() {
        #expect(encoder.timestamp(MonotonicInstant(nanoseconds: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(encoder.timestamp(MonotonicInstant(nanoseconds: 951_782_400_123_000_000)) == "2000-02-29T00:00:00.123Z")
        #expect(encoder.timestamp(MonotonicInstant(nanoseconds: 1_796_009_415_999_999_999)) == "2026-11-30T03:30:15.999Z")
        #expect(encoder.timestamp(MonotonicInstant(nanoseconds: -1_000_000)) == "1969-12-31T23:59:59.999Z")
    }

    @Test func agreesWithGmtimeOverCenturies() {
        var dice = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let seconds = Int64.random(in: -2_208_988_800...7_258_118_400, using: &dice)  // 1900 to 2200
            let millis = Int64.random(in: 0...999, using: &dice)
            var t = time_t(seconds)
            var parts = tm()
            gmtime_r(&t, &parts)
            func pad(_ n: Int32, _ width: Int) -> String {
                let s = String(n)
                return String(repeating: "0", count: max(0, width - s.count)) + s
            }
            let expected = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
                + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
            let got = encoder.timestamp(MonotonicInstant(nanoseconds: seconds * 1_000_000_000 + millis * 1_000_000))
            guard got == expected else {
                Issue.record("\(seconds).\(millis): \(got), gmtime_r says \(expected)")
                return
            }
        }
    }
}
