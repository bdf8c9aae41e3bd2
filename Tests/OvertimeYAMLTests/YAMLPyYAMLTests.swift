import Foundation
import OvertimeProtocol
import OvertimeTestSupport
import OvertimeYAML
import Testing

/// The same data, objects compared as maps: PyYAML orders merged keys otherwise, and JSON
/// gives an object's order no meaning.
func sameData(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case let (.array(x), .array(y)):
        return x.count == y.count && zip(x, y).allSatisfy(sameData)
    case let (.object(x), .object(y)):
        let other = Dictionary(y, uniquingKeysWith: { _, last in last })
        return x.count == y.count && other.count == y.count
            && x.allSatisfy { member in other[member.key].map { sameData(member.value, $0) } ?? false }
    default:
        return a == b
    }
}

@Suite("YAML: against PyYAML's safe_load")
struct YAMLPyYAMLTests {
    static let fixtures = Checkout.path("Tests/Fixtures/yaml")

    static func fixtureNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixtures)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
    }

    /// Comments, anchors and merge keys, flow and block styles, `|` and `>` with their
    /// chomping, quoting and escapes, Unicode: where YAML 1.1 and 1.2 read the same, our
    /// reader and PyYAML read the same data.
    @Test("each fixture reads as PyYAML reads it", arguments: fixtureNames())
    func fixture(name: String) throws {
        let text = try Array(Data(contentsOf: URL(fileURLWithPath: Self.fixtures + "/" + name)))
        let ours = try #require(try YAMLDocument.value(text))
        let theirs = try JSONValue.parse(try PyYAML.json(fromYAML: text))
        #expect(sameData(ours, theirs), "\(name):\nours:   \(ours.jsonText)\nPyYAML: \(theirs.jsonText)")
        // And written as JSON a task at a time, the same again.
        let written = try #require(try YAMLDocument.jsonText(text, streaming: "tasks"))
        #expect(sameData(try JSONValue.parse(written), theirs), "\(name), as JSON text")
    }

    @Test("the corpus is there")
    func corpus() {
        #expect(Self.fixtureNames().count >= 6)
    }
}
