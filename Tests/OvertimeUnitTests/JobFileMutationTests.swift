import Foundation
import OvertimeTestSupport
import Testing
@testable import Overtime

// A broken job file of any shape gets a list of problems, never a crash: the job files of
// docs/jobfile.md, mutated byte by byte thousands of times (deterministically), each either
// parse or are refused with at least one problem, every problem one line.

@Suite struct JobFileMutationTests {
    static let corpus: [[UInt8]] = {
        let doc = (try? String(contentsOfFile: Checkout.path("docs/jobfile.md"), encoding: .utf8)) ?? ""
        return JobFileLoadingTests.fencedBlocks(in: doc, language: "json").map { Array($0.utf8) }
    }()

    /// Bytes that make JSON (and job files) interesting where they land.
    static let alphabet = Array(#"{}[]":,0123456789.-+eE truefalsnul\/"#.utf8) + [0, 0x0A, 0x80, 0xC3, 0xFF]

    static func mutate(_ input: [UInt8], _ dice: inout TestDice) -> [UInt8] {
        var bytes = input
        for _ in 0...dice.roll(4) where !bytes.isEmpty {
            let at = dice.roll(bytes.count)
            switch dice.roll(5) {
            case 0: bytes.removeSubrange(at..<min(bytes.count, at + 1 + dice.roll(12)))
            case 1: bytes.insert(alphabet[dice.roll(alphabet.count)], at: at)
            case 2: bytes[at] = alphabet[dice.roll(alphabet.count)]
            case 3:
                let end = min(bytes.count, at + 1 + dice.roll(40))
                bytes.insert(contentsOf: bytes[at..<end], at: dice.roll(bytes.count))
            default:
                // A value swapped for another kind: where a number was, a string; and so on.
                let replacements: [[UInt8]] = [Array("null".utf8), Array("[]".utf8), Array("{}".utf8), Array("\"x\"".utf8),
                                               Array("-1".utf8), Array("1e400".utf8), Array("\"root\"".utf8), Array("true".utf8)]
                let end = min(bytes.count, at + 1 + dice.roll(8))
                bytes.replaceSubrange(at..<end, with: replacements[dice.roll(replacements.count)])
            }
        }
        return bytes
    }

    @Test func mutatedJobFilesAreParsedOrRefusedWithProblems() async throws {
        try #require(Self.corpus.count >= 3, "the docs' job files were not found")
        var dice = TestDice(state: 20261130)
        var refused = 0
        for round in 0..<10_000 {
            // Other tests share this process's few threads: do not hold one for long.
            if round % 50 == 0 { await Task.yield() }
            let bytes = Self.mutate(Self.corpus[round % Self.corpus.count], &dice)
            do {
                let job = try JobFile.parse(bytes, origin: "fuzz.json", directory: "/srv/jobs")
                #expect(!job.tasks.isEmpty, "round \(round): a parsed file has tasks")
            } catch {
                refused += 1
                #expect(!error.problems.isEmpty, "round \(round): refused without a reason")
                for problem in error.problems {
                    #expect(!problem.isEmpty && !problem.contains("\n"), "round \(round): \(problem)")
                }
            }
        }
        #expect(refused > 2500, "the mutations should break most files; \(refused) of 10,000 were refused")
    }

    @Test("names and keys from the file reach a message escaped: one line, no terminal escape sequence")
    func controlCharactersAreEscaped() {
        let json = #"{"tasks": [{"name": "t\u001b[31m", "command": ["true"], "comma\nd": 1, "after": ["x\ry"]}]}"#
        do {
            _ = try JobFile.parse(Array(json.utf8), origin: "jobs.json", directory: "/srv/jobs")
            Issue.record("accepted")
        } catch {
            #expect(error.problems.count >= 2, "\(error.problems)")
            for problem in error.problems {
                #expect(!problem.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(problem)")
            }
            #expect(error.problems.contains { $0.contains(#"field 'comma\nd'"#) }, "\(error.problems)")
            #expect(error.problems.contains { $0.contains(#"\u001b[31m"#) }, "\(error.problems)")
        }
    }
}
