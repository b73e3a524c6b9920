import Foundation
import Testing
import VaultTestSupport

/// Docs/FORMAT.md claims an independent implementation can open bundles and recombine the
/// secret. Tests/Interop/recombine.py is one, written from the spec with PyNaCl and hashlib
/// (Debian's python3-nacl, installed by scripts/test).
@Suite struct InteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Interop/recombine.py").path

    @Test func pythonRecombinesFromTheSpec() throws {
        let circle = try Circle(["alice", "bob", "carol", "dave", "erin"])
        // Three stripes of 3 × 64 KiB and a partial fourth, behind a password layer.
        let content = (0..<(3 * 3 * 65536 + 12345)).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 13) }
        let file = try circle.files.write("payload.bin", content)
        let password = try circle.files.write("pw", Array("interop password\n".utf8))
        let id = try circle.share(from: "alice", [file, "--to", "bob,carol,dave,erin", "-k", "3", "--scrypt-n", "65536",
                                                  "--password-file", password, "--labels", "--description", "interop"])
        #expect(id.count == 32)
        var arguments = [Self.script, "--password-file", password]
        for label in ["bob", "dave", "erin"] {
            arguments += [circle[label].vault.home + "/vault.sqlite", circle.lastOut + "/\(label).vshare"]
        }
        let result = try ProcessRunner.run("/usr/bin/python3", arguments)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutBytes == content)
        // Python derived the password key with the N recorded in the layer and decrypted, so
        // the dealer used that N; it must be the one asked for, not the default.
        #expect(result.stderr.contains("scrypt N=65536"))

        // And it refuses a bundle whose piece was altered, as the spec requires.
        var damaged = [UInt8](try Data(contentsOf: URL(fileURLWithPath: circle.lastOut + "/dave.vshare")))
        damaged[damaged.count - 100] ^= 1
        let path = try circle.files.write("damaged.vshare", damaged)
        arguments[6] = path
        let refused = try ProcessRunner.run("/usr/bin/python3", arguments)
        #expect(refused.status != 0)
    }
}
