import OvertimeProtocol
import Testing
@testable import OvertimeCore

/// A progress message becomes a `progress` event inside the machine's actions, each
/// copied on its way out; past 128 bytes Swift copies them with `memcpy` calls, a quarter
/// more work a message (ProgressLayoutTests says the same of `Progress`).
@Suite struct EventLayoutTests {
    @Test func eventsAndActionsStayWithin128Bytes() {
        #expect(MemoryLayout<TaskEvent.Kind>.size <= 128, "\(MemoryLayout<TaskEvent.Kind>.size) bytes")
        #expect(MemoryLayout<TaskMachine.Action>.size <= 128, "\(MemoryLayout<TaskMachine.Action>.size) bytes")
    }
}
