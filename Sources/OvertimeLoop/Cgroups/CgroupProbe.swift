internal import OvertimeCore

/// What this machine lets the supervisor do with cgroups (DESIGN §7): where it sits in each
/// hierarchy (`CgroupPlaces`, from `/proc/self/mountinfo` and `/proc/self/cgroup`), and
/// whether that directory may have children. A machine may have a usable v2 hierarchy, a
/// usable v1 `memory` one, both (a hybrid: v2 for containment, v1 for memory), or none.
public struct CgroupProbe: Sendable, Equatable {
    /// The supervisor's own directory in the v2 hierarchy, when it is mounted and writable.
    public var v2Directory: String?
    /// The controllers the v2 directory hands down to its children, its own
    /// `cgroup.subtree_control` (what it may merely offer, `cgroup.controllers`, cannot be
    /// turned on there while the supervisor is a process in it).
    public var v2Controllers: [String] = []
    /// The supervisor's own directory in the v1 memory hierarchy, when mounted and writable.
    public var v1MemoryDirectory: String?
    /// Why a hierarchy is not used: one sentence each, for reports and `--help`.
    public var unavailable: [String] = []

    public init(v2Directory: String? = nil, v2Controllers: [String] = [], v1MemoryDirectory: String? = nil, unavailable: [String] = []) {
        self.v2Directory = v2Directory
        self.v2Controllers = v2Controllers
        self.v1MemoryDirectory = v1MemoryDirectory
        self.unavailable = unavailable
    }

    /// Looks, without creating anything.
    public static func probe() -> CgroupProbe {
        var probe = CgroupProbe()
        let places = CgroupPlaces.ofThisProcess()
        if let directory = places.v2Directory {
            if CgroupFiles.isWritable(directory) {
                probe.v2Directory = directory
                probe.v2Controllers = KernelText.words(Descriptors.readWholeFile(directory + "/cgroup.subtree_control"))
            } else {
                probe.unavailable.append("cgroup v2 at \(directory) is not writable here")
            }
        } else {
            probe.unavailable.append(places.v2Absence)
        }
        if let directory = places.v1MemoryDirectory {
            if CgroupFiles.isWritable(directory) {
                probe.v1MemoryDirectory = directory
            } else {
                probe.unavailable.append("the cgroup v1 memory hierarchy at \(directory) is not writable here")
            }
        } else if !probe.v2Controllers.contains("memory") {
            probe.unavailable.append(places.v1MemoryAbsence)
        }
        return probe
    }
}

extension CgroupPlaces {
    /// This process's places, read from /proc.
    static func ofThisProcess() -> CgroupPlaces {
        CgroupPlaces(mountinfo: Descriptors.readWholeFile("/proc/self/mountinfo") ?? [],
                     procSelfCgroup: Descriptors.readWholeFile("/proc/self/cgroup") ?? [])
    }
}
