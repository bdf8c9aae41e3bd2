import OvertimeLoop
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The srun executor (DESIGN §8): inside a Slurm allocation, each task is a job step,
/// `srun --exclusive -N1 -n1 …`, supervised on its node by `overtime run --control-stdio`,
/// whose events come back over the step's standard streams (`RemoteTaskRunner`).
enum SrunExecutor {
    /// The launcher for a batch whose journal is in `runDirectory`.
    /// - Throws: `BatchError` outside an allocation, or when the run directory is on a
    ///   filesystem the allocation's other nodes cannot see.
    static func launcher(runDirectory: String, overtime: String?, environment: [String: String] = ProcessEnvironment.current()) throws -> RemoteLauncher {
        guard let job = environment["SLURM_JOB_ID"], !job.isEmpty else {
            throw BatchError.outsideSlurmAllocation
        }
        let nodes = Int(environment["SLURM_JOB_NUM_NODES"] ?? environment["SLURM_NNODES"] ?? "1") ?? 1
        if nodes > 1, let local = localFilesystem(runDirectory) {
            throw BatchError.runDirectoryNotShared(path: runDirectory, filesystem: local, otherNodes: nodes - 1, job: job)
        }
        guard let binary = overtime ?? ProcessEnvironment.executablePath() else {
            throw BatchError.binaryNotFound
        }
        // The steps' own words: one task, one node, CPUs of their own; output as it comes.
        return RemoteLauncher(prefix: ["srun", "--exclusive", "-N1", "-n1", "--unbuffered", "--quiet"], overtime: binary)
    }

    /// The per-task words: its name in `squeue`, and the engine's binding of what the
    /// task's `resources` ask (`cpu` as CPUs, `gpu` slots as GPUs) in place of local slots.
    static func stepOptions(task: String, gpus: Int?, cpus: Int?) -> [String] {
        var words = ["--job-name=\(task)"]
        if let cpus, cpus > 0 { words.append("--cpus-per-task=\(cpus)") }
        if let gpus, gpus > 0 { words.append("--gres=gpu:\(gpus)") }
        return words
    }

    /// The filesystem's name when it is one only this node sees (ext4, xfs, tmpfs, …); nil
    /// for a network or cluster one, or one it cannot tell.
    static func localFilesystem(_ path: String) -> String? {
        guard let type = Descriptors.filesystemType(path) else { return nil }
        let local: [Int: String] = [0xEF53: "ext2/3/4", 0x5846_5342: "xfs", 0x0102_1994: "tmpfs", 0x9123_683E: "btrfs",
                                    0x2FC1_2FC1: "zfs", 0x794C_7630: "overlayfs", 0x4D44: "vfat"]
        return local[type]
    }

    /// `path` from `/` (the nodes run from wherever srun puts them).
    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : JobFilePath.currentDirectory() + "/" + path
    }

}
