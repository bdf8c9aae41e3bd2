/// A runner as its children's exit callbacks hold it (`TaskRunner.link`): cleared by the
/// runner's deinit, so a callback after it sees nil, as through a weak reference. Loop-thread
/// only, like the runner.
final class RunnerLink {
    unowned(unsafe) var runner: TaskRunner?

    init(_ runner: TaskRunner) {
        self.runner = runner
    }
}
