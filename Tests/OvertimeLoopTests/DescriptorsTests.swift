import Foundation
import OvertimeLoop
import Testing

@Suite struct DescriptorsTests {
    @Test func directoryEntriesListNamesWithoutDotsAndHonourTheLimit() throws {
        var template = Array("/tmp/overtime-loop-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let directory = String(cString: try #require(made))
        defer {
            for name in Descriptors.directoryEntries(directory) ?? [] { unlink(directory + "/" + name) }
            rmdir(directory)
        }
        let names = ["alpha", "beta", ".hidden", "gamma"]
        for name in names {
            let fd = open(directory + "/" + name, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
            #expect(fd >= 0)
            close(fd)
        }

        let all = try #require(Descriptors.directoryEntries(directory))
        #expect(all.sorted() == names.sorted())

        let two = try #require(Descriptors.directoryEntries(directory, limit: 2))
        #expect(two.count == 2)
        #expect(Set(two).isSubset(of: names))

        #expect(Descriptors.directoryEntries(directory, limit: 0) == [])
        #expect(Descriptors.directoryEntries(directory + "/no-such-directory") == nil)
    }
}
