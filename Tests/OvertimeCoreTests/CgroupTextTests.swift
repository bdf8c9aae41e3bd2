import Testing
@testable import OvertimeCore

/// The core's reading of the kernel's cgroup and /proc text: where this process sits in each
/// hierarchy (mountinfo, /proc/self/cgroup) on the machines Overtime meets, and the numbers a
/// cgroup's files and a process's `stat` hold. The fixtures are those files as the kernel
/// writes them.
@Suite struct CgroupTextTests {
    /// A sandbox with every v1 hierarchy and v2 beside them at `unified` (holding hugetlb
    /// only), where this process is in a v1 memory cgroup of its own: `cat
    /// /proc/self/mountinfo` and `cat /proc/self/cgroup` there.
    static let hybridMountinfo = """
    22 27 0:21 / /proc rw,relatime - proc proc rw
    23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
    24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334096k,nr_inodes=3083524,mode=755
    27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
    31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
    32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
    33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
    34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
    35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
    36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
    37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
    38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
    39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
    40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
    48 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534

    """
    static let hybridProcSelfCgroup = """
    9:name=systemd:/
    8:pids:/
    7:blkio:/
    6:freezer:/
    5:devices:/
    4:memory:/process_api/fd80fe7ecce3109b4df38063dcd8a680
    3:cpuset:/
    2:cpuacct:/
    1:cpu:/
    0::/

    """

    /// A desktop or server with systemd on cgroup v2 alone, in a user's terminal scope.
    static let pureV2Mountinfo = """
    22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
    24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
    35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
    36 24 0:31 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore rw
    1210 25 0:57 / /run/user/1000 rw,nosuid,nodev,relatime shared:654 - tmpfs tmpfs rw,size=3261440k,nr_inodes=815360,mode=700,uid=1000,gid=1000

    """
    static let pureV2ProcSelfCgroup = """
    0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-2f0c.scope

    """

    /// A Docker container on a v2 host without a cgroup namespace of its own: the host's
    /// hierarchy is mounted at the container's cgroup, and /proc/self/cgroup names the
    /// host's path, which is not under the mount.
    static let containerMountinfo = """
    600 580 0:63 / / rw,relatime master:310 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A
    605 600 0:66 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
    606 605 0:30 /docker/4f1c2a /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate,memory_recursiveprot

    """
    static let containerProcSelfCgroup = "0::/docker/4f1c2a\n"

    @Test func aHybridMachineHasBothDirectoriesFromItsMounts() {
        let places = CgroupPlaces(mountinfo: Array(Self.hybridMountinfo.utf8), procSelfCgroup: Array(Self.hybridProcSelfCgroup.utf8))
        #expect(places.v2Directory == "/sys/fs/cgroup/unified", "\(places)")
        #expect(places.v1MemoryDirectory == "/sys/fs/cgroup/memory/process_api/fd80fe7ecce3109b4df38063dcd8a680", "\(places)")
        #expect(places.mounts.v2 == "/sys/fs/cgroup/unified" && places.mounts.v1Memory == "/sys/fs/cgroup/memory")
        #expect(!places.mounts.v2Subtree && !places.mounts.v1MemorySubtree)
        #expect(places.membership.v2 == "/" && places.membership.v1Memory == "/process_api/fd80fe7ecce3109b4df38063dcd8a680")
    }

    @Test func aPureV2MachineHasItsV2DirectoryAndSaysWhyNoV1() {
        let places = CgroupPlaces(mountinfo: Array(Self.pureV2Mountinfo.utf8), procSelfCgroup: Array(Self.pureV2ProcSelfCgroup.utf8))
        #expect(places.v2Directory == "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-2f0c.scope")
        #expect(places.v1MemoryDirectory == nil && places.membership.v1Memory == nil)
        #expect(places.v1MemoryAbsence == "no cgroup v1 memory hierarchy is mounted")
    }

    @Test func aContainersViewOfASubtreeIsNoPlaceAndSaysSo() {
        let places = CgroupPlaces(mountinfo: Array(Self.containerMountinfo.utf8), procSelfCgroup: Array(Self.containerProcSelfCgroup.utf8))
        #expect(places.v2Directory == nil && places.mounts.v2Subtree, "\(places)")
        #expect(places.v2Absence == "cgroup v2 is mounted here only at a subtree of its hierarchy (a container's view)")
        let nothing = CgroupPlaces(mountinfo: [], procSelfCgroup: [])
        #expect(nothing.v2Directory == nil && nothing.v1MemoryDirectory == nil)
        #expect(nothing.v2Absence == "no cgroup v2 hierarchy is mounted")
    }

    @Test func theMountsAreFoundInEveryShapeOfMountLine() {
        // Escaped mount points are unescaped; the first mount of a hierarchy at its root wins;
        // mounts of a subtree only are noted, not used; memory may be one of several
        // controllers; a cgroup v1 mount without memory, other filesystems, and lines cut
        // short are passed over.
        let mountinfo = Array("""
        50 25 0:40 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory
        51 25 0:41 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw
        52 25 0:26 / /mnt/my\\040cgroups rw shared:9 master:2 - cgroup2 cgroup2 rw,nsdelegate
        53 25 0:26 / /second rw - cgroup2 cgroup2 rw
        54 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct
        55 25 0:28 / /sys/fs/cgroup/mem\\134ory rw - cgroup cgroup rw,cpu,memory
        56 25 0:29 / /tmp rw - tmpfs tmpfs rw
        57 25 0:30 / /short rw - cgroup2
        58 25 0:31 /
        """.utf8)
        let found = CgroupMounts(mountinfo: mountinfo)
        #expect(found.v2 == "/mnt/my cgroups", "\(found)")
        #expect(found.v1Memory == "/sys/fs/cgroup/mem\\ory", "\(found)")
        #expect(found.v2Subtree && found.v1MemorySubtree, "\(found)")
        let containerView = CgroupMounts(mountinfo: Array(mountinfo.prefix(while: { $0 != UInt8(ascii: "\n") })))
        #expect(containerView.v1Memory == nil && containerView.v1MemorySubtree && !containerView.v2Subtree, "\(containerView)")
        let none = CgroupMounts(mountinfo: Array("54 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n".utf8))
        #expect(none.v2 == nil && none.v1Memory == nil && !none.v2Subtree && !none.v1MemorySubtree)
        // An escape that is not three octal digits, or past a byte, stays as written.
        let odd = CgroupMounts(mountinfo: Array("1 2 0:1 / /a\\09x\\777 rw - cgroup2 cgroup2 rw\n".utf8))
        #expect(odd.v2 == "/a\\09x\\777", "\(odd)")
    }

    @Test func theMembershipKeepsColonsInPathsAndWholeControllerNames() {
        let own = CgroupMembership(procSelfCgroup: Array("12:cpu,cpuacct:/a\n4:memory:/process_api/x\n0::/user.slice/u.service\n".utf8))
        #expect(own.v2 == "/user.slice/u.service" && own.v1Memory == "/process_api/x")
        // A path that holds colons is kept whole; a line without two colons is skipped;
        // "memory" must be a whole controller name.
        let odd = CgroupMembership(procSelfCgroup: Array("garbage\n5:memoryx:/no\n0::/a:b\n3:cpu,memory:/m\n".utf8))
        #expect(odd.v2 == "/a:b" && odd.v1Memory == "/m", "\(odd)")
        #expect(CgroupMembership(procSelfCgroup: []) == CgroupMembership(procSelfCgroup: Array("\n\n".utf8)))
    }

    @Test func flatKeyedFilesOfBothVersionsGiveTheirNumbers() throws {
        // v1 memory.oom_control and memory.stat, v2 memory.events and cpu.stat, as written.
        let oomControl = Array("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n".utf8)
        #expect(KernelText.value("oom_kill", in: oomControl) == 3)
        let v1Stat = Array("""
        cache 288022528
        rss 2166784
        inactive_file 160165888
        active_file 127856640
        hierarchical_memory_limit 9223372036854771712
        total_cache 288026624
        total_inactive_file 160165888

        """.utf8)
        #expect(KernelText.value("total_inactive_file", in: v1Stat) == 160_165_888)
        #expect(KernelText.value("hierarchical_memory_limit", in: v1Stat) == 9_223_372_036_854_771_712)
        let events = Array("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n".utf8)
        #expect(KernelText.value("oom_kill", in: events) == 1 && KernelText.value("oom", in: events) == 2)
        let cpuStat = Array("usage_usec 10380335368\nuser_usec 7900472903\nsystem_usec 2479862464\nnice_usec 13501702\n".utf8)
        let cpu = try #require(KernelText.cpuMicroseconds(cpuStat: cpuStat))
        #expect(cpu.user == 7_900_472_903 && cpu.system == 2_479_862_464)
        #expect(KernelText.cpuMicroseconds(cpuStat: Array("usage_usec 5\nuser_usec 3\n".utf8)) == nil)
        #expect(KernelText.cpuMicroseconds(cpuStat: nil) == nil)
        // A key that is another's prefix, a last line without its newline, a value too large
        // or not a number, a key missing, no file.
        let stat = Array("usage_usec 90\nuser_usec 70\nsystem_usec 20\nnr_periods 0".utf8)
        #expect(KernelText.value("user_usec", in: stat) == 70 && KernelText.value("nr_periods", in: stat) == 0)
        #expect(KernelText.value("usage", in: stat) == nil && KernelText.value("nr_throttled", in: stat) == nil)
        #expect(KernelText.value("big", in: Array("big 18446744073709551616\n".utf8)) == nil)
        #expect(KernelText.value("max", in: Array("max 18446744073709551615\nword max\n".utf8)) == UInt64.max)
        #expect(KernelText.value("word", in: Array("word max\n".utf8)) == nil)
        #expect(KernelText.value("key", in: Array("key\n".utf8)) == nil)
        #expect(KernelText.value("user_usec", in: nil) == nil)
    }

    @Test func singleNumbersListsAndProcessLists() {
        // A file holding one number (memory.peak, memory.usage_in_bytes): its newline ends it;
        // a v2 limit's "max", an empty file and a number past UInt64 are none.
        #expect(KernelText.number(Array("1048576\n".utf8)) == 1_048_576 && KernelText.number(Array("7".utf8)) == 7)
        #expect(KernelText.number(Array("max\n".utf8)) == nil && KernelText.number([]) == nil && KernelText.number(nil) == nil)
        #expect(KernelText.number(Array("18446744073709551616\n".utf8)) == nil)
        #expect(KernelText.number(Array("9223372036854771712\n".utf8)) == 9_223_372_036_854_771_712)
        // cgroup.controllers, cgroup.subtree_control: an empty one is no controller.
        #expect(KernelText.words(Array("cpuset cpu io memory hugetlb pids rdma misc\n".utf8)) == ["cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"])
        #expect(KernelText.words(Array("hugetlb\n".utf8)) == ["hugetlb"])
        #expect(KernelText.words(Array("\n".utf8)).isEmpty && KernelText.words(nil).isEmpty)
        #expect(KernelText.processIDs(Array("13621\n13631\n".utf8)) == [13621, 13631])
        #expect(KernelText.processIDs([]).isEmpty && KernelText.processIDs(Array("x\n12\n".utf8)) == [12])
    }

    @Test func aProcesssStatAndStatmGiveItsSessionAndResidentPages() throws {
        #expect(KernelText.residentPages(statm: Array("765 441 413 5 0 123 0\n".utf8)) == 441)
        #expect(KernelText.residentPages(statm: Array("765\n".utf8)) == nil && KernelText.residentPages(statm: []) == nil)
        let fields = "R 13621 13621 24623 0 -1 4194304 97 0 0 0 0 0 0 0 20 0 1 0 1036829 3133440 380 18446744073709551615 93881064382464 0\n"
        let cat = try #require(KernelText.sessionAndResidentPages(stat: Array("13631 (cat) \(fields)".utf8)))
        #expect(cat.session == 24623 && cat.pages == 380)
        // A command name may hold spaces and parentheses: the fields count from the last ")".
        let odd = try #require(KernelText.sessionAndResidentPages(stat: Array("13631 (a) b (c)) \(fields)".utf8)))
        #expect(odd.session == 24623 && odd.pages == 380)
        #expect(KernelText.sessionAndResidentPages(stat: Array("13631 (cat) R 1 2 3\n".utf8)) == nil)
        #expect(KernelText.sessionAndResidentPages(stat: Array("no parenthesis".utf8)) == nil)
    }
}
