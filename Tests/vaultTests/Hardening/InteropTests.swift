import Foundation
import Testing
import VaultTestSupport

/// Docs/FORMAT.md claims an independent implementation can open bundles and recombine the
/// secret. Tests/Interop/recombine.py is one, written from the spec with PyNaCl and hashlib
/// (Debian's python3-nacl and python3-cryptography, installed by scripts/test).
@Suite struct InteropTests {
    static let script = ForeignNoiseTests.root.appendingPathComponent("Tests/Interop/recombine.py").path

    @Test func pythonRecombinesFromTheSpec() throws {
        let circle = try Circle(["alice", "bob", "carol", "dave", "erin"])
        // Nine full stripes (sealed chunks, FORMAT §8) and a partial tenth, behind a password layer.
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

/// DESIGN.md: a foreign Noise implementation must complete the handshake with `vault serve`.
/// Tests/Interop/noise_client.py uses the noiseprotocol package from PyPI (in .build-venv,
/// made by scripts/test).
@Suite struct ForeignNoiseTests {
    /// The package root: this file is Tests/vaultTests/Hardening/InteropTests.swift.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let python = root.appendingPathComponent(".build-venv/bin/python").path
    static let client = root.appendingPathComponent("Tests/Interop/noise_client.py").path

    @Test func noiseprotocolCompletesTheHandshakeAndSpeaksTheProtocol() throws {
        #expect(FileManager.default.fileExists(atPath: Self.python), "run scripts/test: it makes .build-venv")
        let bob = try User().initialize("bob")
        let python = try User().initialize("python")
        try bob.ok("peer", "add", python.card(), "--label", "python", "--yes")
        let server = try bob.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"], log: bob.directory.file("serve.log"))
        let port = try server.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
        // Trusted, but holding no such secret: refusal code 2 (unknown secret, in the one
        // numbering since protocol version 2; it was 3), sent inside the channel.
        let trusted = try ProcessRunner.run(Self.python, [Self.client, "127.0.0.1", port, python.vault.home + "/vault.sqlite"])
        #expect(trusted.status == 0, "\(trusted.stderr)")
        #expect(trusted.stdout == "refused 2\n")
        #expect(trusted.stderr.hasPrefix("handshake "))
        // An untrusted key completes the handshake and is refused with code 1.
        let stranger = try User().initialize("stranger")
        let untrusted = try ProcessRunner.run(Self.python, [Self.client, "127.0.0.1", port, stranger.vault.home + "/vault.sqlite"])
        #expect(untrusted.stdout == "refused 1\n", "\(untrusted.stderr)")
        #expect(server.stop() == 0)
        #expect(server.log.contains("refused an untrusted key"))
    }
}
