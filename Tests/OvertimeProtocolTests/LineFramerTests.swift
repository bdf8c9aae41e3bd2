import OvertimeProtocol
import Testing

/// What a framer hands out, copied so it outlives the callback.
enum Framed: Equatable, CustomStringConvertible {
    case line([UInt8])
    case overlong([UInt8])

    init(_ item: LineFramer.Item) {
        switch item {
        case let .line(buffer): self = .line(Array(buffer))
        case let .overlong(excerpt): self = .overlong(excerpt)
        }
    }

    static func line(_ text: String) -> Framed { .line(utf8(text)) }

    var description: String {
        switch self {
        case let .line(b): "line(\(show(b)))"
        case let .overlong(b): "overlong(\(show(b)))"
        }
    }
}

/// Feeds `chunks` to one framer (then `finish()` if asked) and collects what comes out.
func frame(_ chunks: [[UInt8]], maxLineLength: Int = ProtocolLimits.maxLineLength, finish: Bool = true) -> [Framed] {
    var framer = LineFramer(maxLineLength: maxLineLength)
    var out: [Framed] = []
    for chunk in chunks {
        chunk.withUnsafeBytes { framer.feed($0) { out.append(Framed($0)) } }
    }
    if finish { framer.finish { out.append(Framed($0)) } }
    return out
}

/// Checks `actual` against what DESIGN §3 alone asks of a framer for `stream`: split at '\n',
/// a last piece without newline is a line at finish, and a line over the limit becomes exactly
/// one overlong report whose excerpt is the start of that line. The excerpt holds the first 80
/// bytes when that many had arrived by the time the line went over the limit: always for the
/// 64 KiB limit, not necessarily for the tiny limits used here.
func framingMatches(_ actual: [Framed], stream: [UInt8], maxLineLength: Int) -> Bool {
    var pieces = stream.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
    if pieces.last?.isEmpty == true { pieces.removeLast() }  // the stream ended with a newline
    guard actual.count == pieces.count else { return false }
    for (item, piece) in zip(actual, pieces) {
        switch item {
        case let .line(bytes):
            guard piece.count <= maxLineLength, bytes == piece else { return false }
        case let .overlong(excerpt):
            let least = min(80, maxLineLength + 1)
            guard piece.count > maxLineLength, excerpt.count >= least, excerpt.count <= 80,
                  piece.starts(with: excerpt) else { return false }
        }
    }
    return true
}

@Suite("LineFramer")
struct LineFramerTests {
    static let sample = utf8("{\"type\":\"heartbeat\"}\n\nsecond line\r\nthird é😀 line\n{\"type\":\"ready\"}\nno newline at end")
    static let sampleLines: [Framed] = [
        .line(#"{"type":"heartbeat"}"#), .line(""), .line("second line\r"), .line("third é😀 line"),
        .line(#"{"type":"ready"}"#), .line("no newline at end"),
    ]

    @Test("one chunk: lines, an empty line, CR kept, last line delivered by finish()")
    func oneChunk() {
        #expect(frame([Self.sample]) == Self.sampleLines)
    }

    @Test("split into two chunks at every position, the lines are the same")
    func everyTwoChunkSplit() {
        for cut in 0...Self.sample.count {
            let out = frame([Array(Self.sample[..<cut]), Array(Self.sample[cut...])])
            #expect(out == Self.sampleLines, "cut at \(cut)")
        }
    }

    @Test("split into three chunks at every pair of positions, the lines are the same")
    func everyThreeChunkSplit() {
        let s = Self.sample
        for i in 0...s.count {
            for j in i...s.count {
                let out = frame([Array(s[..<i]), Array(s[i..<j]), Array(s[j...])])
                #expect(out == Self.sampleLines, "cuts at \(i), \(j)")
            }
        }
    }

    @Test("one byte at a time")
    func byteByByte() {
        #expect(frame(Self.sample.map { [$0] }) == Self.sampleLines)
    }

    @Test("empty chunks change nothing")
    func emptyChunks() {
        #expect(frame([[], utf8("ab"), [], [], utf8("c\n"), []]) == [.line("abc")])
    }

    @Test("many lines in one chunk come out in order")
    func manyLines() {
        let stream = (0..<5000).map { #"{"type":"progress","completed":\#($0)}"# + "\n" }.joined()
        let out = frame([utf8(stream)])
        #expect(out.count == 5000)
        #expect(out == (0..<5000).map { .line(#"{"type":"progress","completed":\#($0)}"#) })
    }

    @Test("empty lines are lines")
    func emptyLines() {
        #expect(frame([utf8("\n\n\n")]) == [.line(""), .line(""), .line("")])
        #expect(frame([utf8("a\n\n")]) == [.line("a"), .line("")])
    }

    @Test("finish(): a last line without newline, and nothing when there is none")
    func finish() {
        #expect(frame([utf8("tail")]) == [.line("tail")])
        #expect(frame([utf8("tail")], finish: false) == [])
        #expect(frame([utf8("a\n")]) == [.line("a")])
        #expect(frame([]) == [])
        // A finished framer is reset: a second finish() gives nothing again.
        var framer = LineFramer()
        var out: [Framed] = []
        utf8("x").withUnsafeBytes { framer.feed($0) { out.append(Framed($0)) } }
        framer.finish { out.append(Framed($0)) }
        framer.finish { out.append(Framed($0)) }
        #expect(out == [.line("x")])
    }

    @Test("hasPartialLine tracks a buffered piece of line")
    func partialLine() {
        var framer = LineFramer(maxLineLength: 8)
        var out: [Framed] = []
        #expect(!framer.hasPartialLine)
        utf8("ab\ncd").withUnsafeBytes { framer.feed($0) { out.append(Framed($0)) } }
        #expect(framer.hasPartialLine)
        utf8("\n").withUnsafeBytes { framer.feed($0) { out.append(Framed($0)) } }
        #expect(!framer.hasPartialLine)
        // While an overlong line is being skipped, part of a line is pending too.
        utf8("0123456789").withUnsafeBytes { framer.feed($0) { out.append(Framed($0)) } }
        #expect(framer.hasPartialLine)
        utf8("\n").withUnsafeBytes { framer.feed($0) { out.append(Framed($0)) } }
        #expect(!framer.hasPartialLine)
        #expect(out == [.line("ab"), .line("cd"), .overlong(utf8("0123456789"))])
    }

    // MARK: overlong lines

    @Test("an overlong line in one chunk is reported once, with its first 80 bytes, and the next line still comes")
    func overlongInOneChunk() {
        let long = (0..<70_000).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        let out = frame([utf8("before\n") + long + utf8("\nafter\n")])
        #expect(out == [.line("before"), .overlong(Array(long.prefix(80))), .line("after")])
    }

    @Test("an overlong line split over many chunks is reported once", arguments: [1, 7, 1000, 4096, 65536, 65537])
    func overlongManyChunks(chunkSize: Int) {
        // Bytes with bit 0x20 set are never '\n' (0x0A).
        let long = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 % 251) | 0x20 }
        let stream = utf8("first\n") + long + utf8("\nnext\n") + long + utf8("\nlast")
        let chunks = stride(from: 0, to: stream.count, by: chunkSize).map { Array(stream[$0..<min($0 + chunkSize, stream.count)]) }
        let out = frame(chunks)
        let excerpt = Array(long.prefix(80))
        #expect(out == [.line("first"), .overlong(excerpt), .line("next"), .overlong(excerpt), .line("last")])
    }

    @Test("an overlong line that began in an earlier chunk is reported once when its newline arrives")
    func overlongCompletedByNewline() {
        // 65,000 bytes wait in the buffer; the next chunk pushes the line over the limit and ends it.
        let start = [UInt8](repeating: UInt8(ascii: "x"), count: 65_000)
        let out = frame([start, [UInt8](repeating: UInt8(ascii: "y"), count: 1000) + utf8("\nok\n")])
        #expect(out == [.overlong(Array(start.prefix(80))), .line("ok")])
    }

    @Test("an overlong last line without newline is reported once and not delivered by finish()")
    func overlongAtEnd() {
        let long = [UInt8](repeating: UInt8(ascii: "z"), count: 70_000)
        #expect(frame([long]) == [.overlong(Array(long.prefix(80)))])
        #expect(frame([Array(long[..<40_000]), Array(long[40_000...])]) == [.overlong(Array(long.prefix(80)))])
    }

    @Test("the excerpt spans chunks when the first chunk holds fewer than 80 bytes")
    func excerptAcrossChunks() {
        let long = (0..<70_000).map { UInt8(ascii: "0") + UInt8($0 % 10) }
        let out = frame([Array(long[..<30]), Array(long[30...]) + utf8("\n")])
        #expect(out == [.overlong(Array(long.prefix(80)))])
    }

    // MARK: the exact limit

    @Test("a line of exactly 64 KiB is a line; one byte more is overlong", arguments: [
        // Where to cut the stream in two (as bytes from the start).
        0, 1, 100, 32_768, 65_535, 65_536, 65_537,
    ])
    func exactLimit(cut: Int) {
        let max = [UInt8](repeating: UInt8(ascii: "m"), count: 65_536)
        let over = [UInt8](repeating: UInt8(ascii: "o"), count: 65_537)
        for (line, expected) in [(max, Framed.line(max)), (over, .overlong(Array(over.prefix(80))))] {
            let stream = line + utf8("\nnext\n")
            let cut = min(cut, stream.count)
            #expect(frame([Array(stream[..<cut]), Array(stream[cut...])]) == [expected, .line("next")], "\(line.count) bytes, cut \(cut)")
            // As the last line, without newline.
            #expect(frame([Array(line[..<min(cut, line.count)]), Array(line[min(cut, line.count)...])]) == [expected])
        }
    }

    @Test("default limit is the protocol's 64 KiB")
    func defaultLimit() {
        #expect(LineFramer().maxLineLength == 65_536)
        #expect(ProtocolLimits.maxLineLength == 65_536)
    }

    // With a tiny limit every line length around it and every split can be tried.
    @Test("small limit: lines around the limit at every two-chunk split", arguments: [0, 1, 8])
    func smallLimitEverySplit(limit: Int) {
        var stream: [UInt8] = []
        for length in [0, 3, limit - 1, limit, limit + 1, limit + 2, 2 * limit + 5, 100] where length >= 0 {
            stream += (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) } + [0x0A]
        }
        stream += utf8("end")
        #expect(framingMatches(frame([stream], maxLineLength: limit), stream: stream, maxLineLength: limit))
        for cut in 0...stream.count {
            let out = frame([Array(stream[..<cut]), Array(stream[cut...])], maxLineLength: limit)
            #expect(framingMatches(out, stream: stream, maxLineLength: limit), "cut \(cut): \(out)")
        }
        let out = frame(stream.map { [$0] }, maxLineLength: limit)
        #expect(framingMatches(out, stream: stream, maxLineLength: limit), "byte by byte: \(out)")
    }

    // MARK: with the decoder

    @Test("framed CRLF lines decode")
    func framedCRLF() throws {
        let out = frame([utf8("{\"type\":\"progress\",\"completed\":1}\r\n{\"type\":\"heartbeat\"}\r\n")])
        var messages: [ChildMessage] = []
        for item in out {
            guard case let .line(bytes) = item else { Issue.record("not a line: \(item)"); continue }
            messages.append(try ChildMessage.decode(bytes))
        }
        #expect(messages == [.progress(Progress(completed: 1)), .heartbeat])
    }
}
