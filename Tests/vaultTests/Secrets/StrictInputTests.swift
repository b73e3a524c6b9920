import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Inputs from the security review (issue 14) that once trapped the binary or stopped it
/// with a misleading message: each now ends in one clear error line, or is set aside.
@Suite struct StrictInputTests {
    /// Finding 11: a label of 64 four-byte characters (256 UTF-8 bytes) made `share
    /// --labels` trap on its 1-byte length field. It is refused where it comes in.
    @Test func aLabelLongerThan255BytesIsRefusedAtTheDoor() throws {
        let circle = try Circle(["alice", "bob"])
        let wide = String(repeating: "\u{20000}", count: 64)
        let carol = try User().initialize("carol")
        let message = try circle["alice"].fails("peer", "add", carol.card(), "--label", wide, "--yes")
        #expect(message.contains("it is longer than 255 bytes in UTF-8"))
        #expect(try User().vault.run(["init", "--label", wide]).stderr.contains("it is longer than 255 bytes in UTF-8"))
        // Wide labels that fit are published as they are (a file name bounds this one's length).
        let fits = String(repeating: "\u{20000}", count: 40)
        try circle["alice"].ok("peer", "rename", "bob", fits)
        try circle["alice"].ok("share", "-", "--to", fits, "-k", "2", "--labels", "--out-dir", circle.files.path, stdin: "x")
        #expect(try BundleHeader(bundleAt: circle.files.file("\(fits).vshare")).labels?.map(\.value) == ["alice", fits])
    }

    /// Finding 12: a bundle name the file system refuses ("LABEL.vshare" over 255 bytes) failed
    /// `share --out-dir` only after the dealer's share was stored. Now nothing is kept.
    @Test func aShareWhoseBundleCannotBeNamedKeepsNothing() throws {
        let circle = try Circle(["alice", "bob"])
        // 64 scalars and 250 UTF-8 bytes: a valid label, but 257 bytes with ".vshare".
        let wide = String(repeating: "\u{20000}", count: 62) + "ab"
        #expect(wide.utf8.count == 250)
        let alice = circle["alice"]
        try alice.ok("peer", "rename", "bob", wide)
        let out = circle.files.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let listed = try alice.ok("secrets", "list")
        let message = try alice.fails("share", "-", "--to", wide, "-k", "2", "--out-dir", out, stdin: "x")
        #expect(message.contains("vault: error: ") && message.contains("File name too long"), "\(message)")
        #expect(try alice.ok("secrets", "list") == listed)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
    }

    /// Finding 11: metadata over 65535 bytes trapped on its 2-byte length field.
    @Test func metadataOverItsLengthFieldIsRefused() throws {
        let circle = try Circle(["alice", "bob"])
        let phones = (0..<16).flatMap { _ in ["--phone", String(repeating: "5", count: 4096)] }
        let message = try circle["alice"].fails(
            ["share", "-", "--type", "contact", "--contact-name", "x", "--to", "bob", "-k", "2", "--out-dir", circle.files.path] + phones,
            stdin: "note")
        #expect(message.contains("vault: error: invalid secret: the fields take 65588 bytes, more than 65535"))
    }

    /// Finding 16: a released piece whose box was altered is set aside with its own message,
    /// and recovery goes on with the good pieces.
    @Test func aDamagedReleaseIsSetAsideAndRecoveryGoesOn() throws {
        let circle = try Circle(["alice", "bob", "carol"])
        let note = try circle.files.write("note.txt", Array("the combination is 4-8-15-16".utf8))
        let id = try circle.share(from: "alice", [note, "--to", "bob,carol", "-k", "2"])
        let honest = try circle.release(id, from: "carol", to: "alice")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: circle.release(id, from: "bob", to: "alice"))))
        bytes[9 + ReleasedPiece.headerLength + 64 + 24 + 30] ^= 1
        let damaged = try circle.files.write("damaged.vpiece", bytes)
        let result = try circle["alice"].vault.run(["recover", id, "--piece", damaged, honest])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "the combination is 4-8-15-16")
        #expect(result.stderr.contains("vault: warning: piece 2 from an unverified sender (\(damaged)) set aside, damaged: its sealed keys do not open"))
        #expect(try circle["alice"].fails("recover", id, "--piece", damaged).contains("only 1 verified piece, 2 needed"))
    }
}
