import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// What a SIGKILL leaves behind.
@Suite struct CrashSafetyTests {
    /// The descriptor of `pid` open on an unnamed file in `directory` (O_TMPFILE), once it
    /// has `minimum` bytes.
    static func waitForUnnamedOutput(of pid: pid_t, in directory: String, minimum: Int, timeout: Double = 60) -> Bool {
        let directory = URL(fileURLWithPath: directory).standardizedFileURL.resolvingSymlinksInPath().path
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [] {
                let link = "/proc/\(pid)/fd/\(fd)"
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link),
                      target.hasPrefix(directory + "/"), target.hasSuffix("(deleted)") else { continue }
                var info = stat()
                if stat(link, &info) == 0, info.st_size >= minimum { return true }
            }
            usleep(5_000)
        }
        return false
    }

    /// `recover -o` and `item show -o` killed part way through writing leave no file,
    /// partial or whole, and no temporary file either.
    @Test func killedOutputsLeaveNothing() throws {
        let circle = try Circle(["alice", "bob"])
        let input = circle.files.file("big.bin")
        let file = try OutputFile(path: input)
        var block = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<48 {
            block.withUnsafeMutableBytes { SecureRandom().fill($0) }
            try block.withUnsafeBytes { try file.write($0) }
        }
        try file.commit()
        let out = circle.files.file("bundles")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let id = try circle["alice"].ok("share", input, "--to", "bob", "-k", "2", "--out-dir", out).trimmingCharacters(in: .newlines)
        try circle["bob"].ok("secrets", "import", out + "/bob.vshare")
        let piece = circle.files.file("bob-for-alice.vpiece")
        try circle["bob"].ok("secrets", "release", id, "--for", "alice", "-o", piece)

        let target = circle.files.file("target")
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        for round in 0..<3 {
            let recovering = try circle["alice"].vault.background(["recover", id, "--piece", piece, "-o", target + "/out-\(round).bin"],
                                                                 log: circle.files.file("recover-\(round).log"))
            #expect(Self.waitForUnnamedOutput(of: recovering.pid, in: target, minimum: (round + 1) << 20), "\(recovering.log)")
            #expect(recovering.stop(SIGKILL) != 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: target).isEmpty, "round \(round)")
        }
        // Unharmed, it writes the file whole.
        try circle["alice"].ok("recover", id, "--piece", piece, "-o", target + "/out.bin")
        #expect(FileManager.default.contents(atPath: target + "/out.bin") == FileManager.default.contents(atPath: input))
    }
}
