import Testing
@testable import Overtime

/// The name a task gets when none is given: its program's, and through `env` the program
/// `env` runs.
@Suite struct TaskNameTests {
    @Test(arguments: [
        (["/usr/bin/python3", "train.py"], "python3"),
        (["python3"], "python3"),
        ([], "task"),
        (["env", "PYTHONHASHSEED=0", "CUDA_VISIBLE_DEVICES=", "python3", "train.py"], "python3"),
        (["/usr/bin/env", "-i", "-u", "HOME", "-C", "/srv", "--", "/opt/venv/bin/torchrun", "x.py"], "torchrun"),
        (["env", "A=1"], "env"),
        (["env"], "env"),
        (["environment-check"], "environment-check"),
    ])
    func theNameIsTheProgramsOwn(arguments: [String], name: String) {
        #expect(TaskSpec.defaultName(for: arguments) == name)
    }
}
