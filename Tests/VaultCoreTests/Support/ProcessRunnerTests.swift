import Foundation
import Testing
import VaultTestSupport

/// The children the tests start get standard input, output and error, and no other
/// descriptor of the test process: not the sockets and files other tests hold open at the
/// time, nor the pipes of other children.
@Suite struct ProcessRunnerTests {
    @Test func aChildGetsNoDescriptorButItsOwnThree() throws {
        // Inheritable on purpose (no O_CLOEXEC), and above 1023, as RelayAbuseTests' 2,000
        // connections left them.
        let opened = open("/dev/null", O_RDONLY)
        try #require(opened >= 0)
        let high = fcntl(opened, F_DUPFD, 1100)
        close(opened)
        try #require(high >= 1100, "cannot raise a descriptor to 1100 here")
        defer { close(high) }
        let script = "for fd in 0 1 2 \(high); do if [ -e /proc/self/fd/$fd ]; then echo $fd; fi; done"

        let run = try ProcessRunner.run("/bin/sh", ["-c", script])
        #expect(run.stdout == "0\n1\n2\n", "\(run.stdout)")

        let directory = TemporaryDirectory("vault-spawn")
        let background = try BackgroundProcess("/bin/sh", ["-c", script + "; echo done"], environment: [:], logPath: directory.file("log"))
        _ = try background.waitFor("done")
        #expect(background.log == "0\n1\n2\ndone\n", "\(background.log)")
    }
}
