import OvertimeCore
import Testing

// The local account files read without the C library (AccountFiles): what a static
// `overtime` finds users and groups in before it asks the machine's name services.
@Suite struct AccountFilesTests {
    static let passwd = """
    root:x:0:0:root:/root:/bin/bash
    # a comment:x:5:5::/:/bin/sh
    +nisuser::::::
    broken:x:notanumber:1::/home/broken:/bin/sh
    short:x:7
    ada:x:1000:1000:Ada L,,,:/home/ada:/bin/zsh
    nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
    ada:x:2000:2000:a second ada, never seen:/x:/bin/sh
    """

    @Test("a user by name or uid: the first well-formed line that matches")
    func users() {
        #expect(AccountFiles.user(named: "ada", in: Self.passwd) == Account(name: "ada", uid: 1000, primaryGroupID: 1000, home: "/home/ada"))
        #expect(AccountFiles.user(uid: 65534, in: Self.passwd)?.name == "nobody")
        #expect(AccountFiles.user(uid: 0, in: Self.passwd)?.home == "/root")
        for missing in ["broken", "short", "+nisuser", "# a comment", "Ada", ""] {
            #expect(AccountFiles.user(named: missing, in: Self.passwd) == nil, "\(missing)")
        }
        #expect(AccountFiles.user(uid: 5, in: Self.passwd) == nil, "a commented line is not an account")
        #expect(AccountFiles.user(named: "root", in: "") == nil)
    }

    @Test("a group's id by name")
    func groups() {
        let group = "root:x:0:\nwheel:x:10:ada,bob\nbad:x:ten:\nstaff:x:50:"
        #expect(AccountFiles.groupID(named: "wheel", in: group) == 10)
        #expect(AccountFiles.groupID(named: "staff", in: group) == 50)
        #expect(AccountFiles.groupID(named: "bad", in: group) == nil)
        #expect(AccountFiles.groupID(named: "users", in: group) == nil)
    }
}
