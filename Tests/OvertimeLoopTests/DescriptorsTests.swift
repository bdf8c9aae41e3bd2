import Foundation
import OvertimeLoop
import Testing

@Suite struct DescriptorsTests {
    static func makeDirectory() throws -> String {
        var template = Array("/tmp/overtime-loop-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(cString: try #require(made))
    }

    static func remove(_ directory: String) {
        for name in Descriptors.directoryEntries(directory) ?? [] { unlink(directory + "/" + name) }
        rmdir(directory)
    }

    @Test func aFileIsReplacedWholeAndNeverThroughAThingPlantedAtItsTemporaryName() throws {
        let directory = try Self.makeDirectory()
        defer { Self.remove(directory) }
        let path = directory + "/metrics.prom", temporary = path + ".tmp-1"
        let victim = directory + "/victim"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: victim))
        // Another user's symlink at the temporary name: written through, it would truncate
        // the victim (a root supervisor, a shared collector directory).
        #expect(symlink(victim, temporary) == 0)
        #expect(Descriptors.replaceFile(path, with: Array("page 1\n".utf8), temporary: temporary) == nil)
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "keep me")
        #expect((try? String(contentsOfFile: path, encoding: .utf8)) == "page 1\n")
        #expect(access(temporary, F_OK) != 0, "no temporary file is left")
        #expect(Descriptors.replaceFile(path, with: Array("page 2\n".utf8), temporary: temporary) == nil)
        #expect((try? String(contentsOfFile: path, encoding: .utf8)) == "page 2\n")
    }

    @Test("a file's tail: its last bytes; a FIFO where a log was is neither waited for nor read")
    func fileTails() throws {
        let directory = try Self.makeDirectory()
        defer { Self.remove(directory) }
        let log = directory + "/task.log"
        try Data("line 1\nline 2\n".utf8).write(to: URL(fileURLWithPath: log))
        #expect(Descriptors.readFileTail(log, limit: 7) == Array("line 2\n".utf8))
        #expect(Descriptors.readFileTail(log, limit: 100) == Array("line 1\nline 2\n".utf8))
        #expect(Descriptors.readFileTail(directory + "/none.log", limit: 100) == nil)
        let fifo = directory + "/fifo.log"
        #expect(mkfifo(fifo, 0o644) == 0)
        // A blocking open of a FIFO with no writer would wait here for good.
        #expect(Descriptors.readFileTail(fifo, limit: 100) == nil)
    }

    @Test func directoryEntriesListNamesWithoutDotsAndHonourTheLimit() throws {
        let directory = try Self.makeDirectory()
        defer { Self.remove(directory) }
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
