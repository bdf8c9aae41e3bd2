import OvertimeProtocol
import Testing

/// Every progress message is copied several times on its way from the decoder to the
/// events; past 128 bytes Swift copies a value with a call to `memcpy` rather than a few
/// moves, which cost a quarter more instructions a message when `Progress` grew to 129.
@Suite struct ProgressLayoutTests {
    @Test func progressStaysWithin128Bytes() {
        #expect(MemoryLayout<Progress>.size <= 104, "\(MemoryLayout<Progress>.size) bytes")
        #expect(MemoryLayout<ChildMessage>.size <= 128, "\(MemoryLayout<ChildMessage>.size) bytes")
        // The progress event holds it with the time left (a Duration?).
        #expect(MemoryLayout<(Progress, Duration?)>.size <= 127, "\(MemoryLayout<(Progress, Duration?)>.size) bytes")
    }

    @Test func theFractionReadsBackAsGiven() {
        for fraction in [0, 0.25, 1, 1e-300] as [Double] {
            #expect(Progress(fraction: fraction).fraction?.bitPattern == fraction.bitPattern)
        }
        #expect(Progress(fraction: -0.0) == Progress(fraction: 0), "equal as numbers are")
        #expect(Progress().fraction == nil && Progress(fraction: nil) == Progress())
        var p = Progress(fraction: 0.5)
        p.fraction = nil
        #expect(p == Progress())
    }

    @Test func theReportingCountReadsBackAsGiven() {
        var p = Progress(completed: 1, reporting: 3)
        #expect(p.reporting == 3)
        p.reporting = nil
        #expect(p.reporting == nil && p == Progress(completed: 1))
    }
}
