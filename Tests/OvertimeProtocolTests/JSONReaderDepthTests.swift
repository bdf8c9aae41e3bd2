// The codec refuses lines over 64 KiB before reading them, so through the public API no input
// can nest deeper than ~65,000 levels. These tests drive the internal reader directly with far
// deeper input, to be sure its depth limit (not the line limit) is what keeps the stack safe.
// @testable needs a debug build, hence the guard.
#if DEBUG
@testable import OvertimeProtocol
import Testing

@Suite("JSONReader: depth limit, driven directly")
struct JSONReaderDepthTests {
    /// Reads one value from `text` with the generic value reader (or skips it), returning the error kind.
    static func readErrorKind(_ text: String, skip: Bool) -> ProtocolError.Kind? {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { buffer -> ProtocolError.Kind? in
            var reader = JSONReader(UnsafeRawBufferPointer(buffer))
            do {
                if skip { try reader.skipValue() } else { _ = try reader.readValue() }
                return nil
            } catch let error as ProtocolError {
                return error.kind
            } catch {
                return nil  // cannot happen: the reader throws only ProtocolError
            }
        }
    }

    @Test("the limit is 64 levels")
    func limit() {
        #expect(JSONReader.maxDepth == maxDepth)
        for skip in [false, true] {
            #expect(Self.readErrorKind(nestedArrays(64), skip: skip) == nil)
            #expect(Self.readErrorKind(nestedArrays(65), skip: skip) == .notJSON)
        }
    }

    @Test("100,000 and 1,000,000 open brackets or braces are refused without recursing", arguments: [100_000, 1_000_000])
    func veryDeep(count: Int) {
        for skip in [false, true] {
            #expect(Self.readErrorKind(String(repeating: "[", count: count), skip: skip) == .notJSON)
            #expect(Self.readErrorKind(nestedArrays(count), skip: skip) == .notJSON)
            #expect(Self.readErrorKind(String(repeating: #"{"a":"#, count: count), skip: skip) == .notJSON)
            #expect(Self.readErrorKind(String(repeating: #"[{"a":"#, count: count), skip: skip) == .notJSON)
        }
    }
}
#endif
