import OvertimeProtocol
import Testing

/// `reporter` on any message, `closed` on progress, `why` on cancel, and text fields
/// cleaned of colour codes as they are decoded.
@Suite struct ReporterFieldsTests {
    func line(_ text: String) throws(ProtocolError) -> ChildLine {
        try ChildLine.decode(utf8(text))
    }

    @Test func aReporterNameComesWithAnyMessage() throws {
        #expect(try line(#"{"type":"heartbeat","reporter":"rank 1"}"#) == ChildLine(.heartbeat, reporter: "rank 1"))
        #expect(try line(#"{"type":"progress","completed":3,"reporter":"pid 4242"}"#)
                == ChildLine(.progress(Progress(completed: 3)), reporter: "pid 4242"))
        #expect(try line(#"{"type":"ready"}"#).reporter == nil)
        #expect(try line(#"{"type":"ready","reporter":null}"#).reporter == nil)
    }

    @Test func aReporterNameIsTrimmedCleanedAndCut() throws {
        #expect(try line(#"{"type":"ready","reporter":"  rank 0\t "}"#).reporter == "rank 0")
        #expect(try line(#"{"type":"ready","reporter":"\u001b[31mrank 3\u001b[0m"}"#).reporter == "rank 3")
        #expect(try line(#"{"type":"ready","reporter":"   "}"#).reporter == nil, "nothing left: no name")
        let long = String(repeating: "é", count: 100)
        #expect(try line(#"{"type":"ready","reporter":"\#(long)"}"#).reporter == String(repeating: "é", count: 64),
                "cut on a character, not a byte")
    }

    @Test func aReporterNameOfAnotherTypeIsAProtocolError() {
        #expect(childErrorKind(utf8(#"{"type":"ready","reporter":3}"#)) == .wrongType)
        #expect(childErrorKind(utf8(#"{"type":"progress","closed":"yes"}"#)) == .wrongType)
    }

    @Test func closedMarksABarFinishedAndRoundTrips() throws {
        let closed = ChildMessage.progress(Progress(completed: 10, total: 10, bar: "tok", closed: true))
        #expect(try decodeChild(#"{"type":"progress","completed":10,"total":10,"bar":"tok","closed":true}"#) == closed)
        #expect(try ChildMessage.decode(Array(closed.encoded().dropLast())) == closed)
        #expect(try decodeChild(#"{"type":"progress","closed":false}"#) == .progress(Progress()))
    }

    @Test func cancelCarriesWhy() throws {
        let cancel = SupervisorMessage.cancel(reason: .timeout, grace: 10, why: "last progress 10 s ago, from pid 4")
        let text = String(decoding: cancel.encoded(), as: UTF8.self)
        #expect(text.contains(#""why":"last progress 10 s ago, from pid 4""#))
        #expect(try supervisorRoundTrip(cancel) == cancel)
        #expect(!String(decoding: SupervisorMessage.cancel(reason: .user, grace: 1).encoded(), as: UTF8.self).contains("why"))
    }

    @Test(arguments: [
        ("\u{1B}[1;31mTokenizing\u{1B}[0m", "Tokenizing"),
        ("\u{1B}]8;;http://x\u{07}link\u{1B}]8;;\u{1B}\\", "link"),
        ("a\u{1B}7b\u{1B}8c", "abc"),
        ("tab\there\r\u{7F}", "tab here "),   // line breaks and tabs keep words apart
        ("two\nlines", "two lines"),
        ("ünï\u{1B}[2Kcödé 🚀", "ünïcödé 🚀"),
        ("trailing\u{1B}", "trailing"),
        ("cut\u{1B}[12", "cut"),
    ])
    func colourCodesAndControlCharactersAreStripped(_ raw: String, _ clean: String) {
        #expect(TerminalText.stripped(raw) == clean)
    }

    @Test func cleanTextIsNotCopied() {
        let text = String(repeating: "step 12/100 loss 0.25 ", count: 20)
        let stripped = TerminalText.stripped(text)
        #expect(stripped == text)
        // The same storage: nothing was built.
        var a = text, b = stripped
        let same = a.withUTF8 { x in b.withUTF8 { y in x.baseAddress == y.baseAddress } }
        #expect(same)
    }

    @Test func progressTextFieldsArriveClean() throws {
        let message = try decodeChild(#"{"type":"progress","title":"\u001b[32mtrain\u001b[0m","detail":"loss\u001b[K 0.1","bar":"\u001b[1mb"}"#)
        #expect(message == .progress(Progress(title: "train", detail: "loss 0.1", bar: "b")))
    }
}
