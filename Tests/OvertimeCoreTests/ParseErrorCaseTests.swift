import Testing
import OvertimeCore

/// The core's parsers say what went wrong as a case a caller can switch on, with the text
/// as given, and their messages read as users have always seen them.
@Suite struct ParseErrorCaseTests {
    private func durationError(_ text: String, allowNone: Bool = false) -> DurationText.ParseError? {
        do {
            _ = try DurationText.parse(text, allowNone: allowNone)
            return nil
        } catch {
            return error
        }
    }

    @Test func durations() {
        #expect(durationError("  ") == .empty)
        #expect(durationError("none") == .noneNotAllowed)
        #expect(durationError("-1s") == .negative("-1s"))
        #expect(durationError("1.2.3s") == .notADuration("1.2.3s"))
        #expect(durationError("30x") == .unknownUnit("30x", unit: "x"))
        #expect(durationError("1s1h") == .misorderedUnits("1s1h"))
        #expect(durationError("9999999999999d") == .tooLong("9999999999999d"))
        #expect(durationError("30x")?.message == "'30x' has an unknown unit 'x'; expected \(DurationText.examples)")
        #expect(durationError("-1s")?.description == "'-1s' is negative; expected \(DurationText.examples)")
    }

    @Test func sizesAndWarningLevels() {
        #expect(throws: ByteSize.ParseError.notASize("4X")) { try ByteSize.parse("4X") }
        #expect(throws: ByteSize.ParseError.notAWarningLevel("120%")) { try MemoryPolicy.parseWarn("120%") }
        #expect(throws: ByteSize.ParseError.notAWarningLevel("lots")) { try MemoryPolicy.parseWarn("lots") }
        #expect(ByteSize.ParseError.notASize("4X").description == "'4X' is not a size; expected \(ByteSize.expected)")
    }

    @Test func limitsAndNiceValues() {
        #expect(throws: TaskIsolation.ParseError.notANiceValue("20")) { try TaskIsolation.parseNiceness("20") }
        #expect(throws: TaskIsolation.ParseError.notALimit("1:2:3")) { try ResourceLimit.parse(.openFiles, "1:2:3") }
        #expect(throws: TaskIsolation.ParseError.softAboveHard("10:5")) { try ResourceLimit.parse(.openFiles, "10:5") }
        #expect(throws: TaskIsolation.ParseError.badLimitValue(.addressSpace, "4X:8G")) { try ResourceLimit.parse(.addressSpace, "4X:8G") }
        #expect(TaskIsolation.ParseError.badLimitValue(.openFiles, "many").message
            == "'many' is not a limit; expected \(ResourceLimit.expected(.openFiles))")
        #expect(TaskIsolation.ParseError.notFound(.group, "staff", localFilesOnly: false).message == "no such group: staff")
        #expect(TaskIsolation.ParseError.notFound(.user, "ann", localFilesOnly: true).message.hasPrefix("no such user: ann (in /etc/passwd: "))
        #expect(TaskIsolation.ParseError.reservedID(.user, "4294967295").message
            == "4294967295 is not a user id (it means 'no change' to the kernel)")
        #expect(TaskIsolation.ParseError("the directory did not answer") == .lookupFailed("the directory did not answer"))
    }

    @Test func metricsAddresses() {
        for text in ["::1:80", "[::1", "[::1]80"] {
            #expect(throws: MetricsAddressError.malformedIPv6(text)) { try MetricsAddress.parse(text) }
        }
        for text in ["", "abc", "70000", ":", "1.2.3.4:"] {
            #expect(throws: MetricsAddressError.badPort(text)) { try MetricsAddress.parse(text) }
        }
        #expect(MetricsAddressError.malformedIPv6("::1:80").message == "'::1:80': an IPv6 address is written [ADDR]:PORT, as [::1]:9464")
    }
}
