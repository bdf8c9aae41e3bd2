import Foundation
import Testing
@testable import Overtime

// The supervisor's own environment, read whole (what a task inherits) and by name (what the
// display reads): the two agree on every variable, and a name that is not set is absent.
@Suite struct ProcessEnvironmentTests {
    @Test func readByNameAgreesWithTheWholeEnvironment() {
        let whole = ProcessEnvironment.current()
        let names = Array(whole.keys.prefix(5)) + ["OVERTIME_NOT_SET_BY_ANYONE_\(getpid())"]
        let some = ProcessEnvironment.values(of: names)
        #expect(!whole.isEmpty)
        for name in names { #expect(some[name] == whole[name], "\(name)") }
        #expect(some.count == min(5, whole.count))
    }
}
