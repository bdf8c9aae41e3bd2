import Testing
@testable import OvertimeCore

@Suite struct DurationTextTests {
    @Test(arguments: [
        ("250ms", Duration.milliseconds(250)),
        ("30s", .seconds(30)),
        ("1.5s", .milliseconds(1500)),
        ("5m", .seconds(300)),
        ("2h", .seconds(7200)),
        ("1h30m", .seconds(5400)),
        ("1d", .seconds(86_400)),
        ("1m30s", .seconds(90)),
        ("10", .seconds(10)),
        ("0.25", .milliseconds(250)),
        ("0", .zero),
        (" 30s ", .seconds(30)),
    ])
    func parses(text: String, expected: Duration) throws {
        #expect(try DurationText.parse(text) == expected)
    }

    @Test func noneOnlyWhereAllowed() throws {
        #expect(try DurationText.parse("none", allowNone: true) == nil)
        // A limit of nothing is no limit, as `timeout 0`; where no limit is not allowed, 0 is 0.
        #expect(try DurationText.parse("0", allowNone: true) == nil)
        #expect(try DurationText.parse("0s", allowNone: true) == nil)
        #expect(try DurationText.parse("0ms", allowNone: false) == .zero)
        #expect(throws: DurationText.ParseError.self) { try DurationText.parse("none") }
    }

    @Test(arguments: ["-1s", "abc", "1e400", "", "  ", "1e3", "5 m", "1.2.3s", ".5s", "5.s", "30x", "1s1h", "1s1s", "ms", "9999999999999d", "nan", "inf", "0x10"])
    func refuses(text: String) {
        #expect(throws: DurationText.ParseError.self) { try DurationText.parse(text, allowNone: true) }
    }

    @Test func errorsSayWhatWasWrongAndWhatWouldBeRight() {
        do {
            _ = try DurationText.parse("-1s")
            Issue.record("accepted -1s")
        } catch {
            #expect(error.message.contains("negative"))
            #expect(error.message.contains("30s"))
        }
        do {
            _ = try DurationText.parse("")
            Issue.record("accepted an empty string")
        } catch {
            #expect(error.message.contains("empty"))
        }
    }

    @Test func formats() {
        #expect(DurationText.format(.milliseconds(850)) == "850ms")
        #expect(DurationText.format(.milliseconds(12_500)) == "12.5s")
        #expect(DurationText.format(.seconds(30)) == "30s")
        #expect(DurationText.format(.seconds(245)) == "4m05s")
        #expect(DurationText.format(.seconds(7200)) == "2h00m")
    }
}
