import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct PeerCommandTests {
    let alice: User
    let bob: User

    init() throws {
        alice = try User().initialize("alice")
        bob = try User().initialize("bob")
    }

    @Test func addsFromTextStdinAndImages() throws {
        let card = try alice.card()
        try bob.ok("peer", "add", card, "--label", "alice-text", "--addr", "127.0.0.1:7733", "--yes")
        let list = try bob.ok("peer", "list", "--json")
        let peers = try JSONSerialization.jsonObject(with: Data(list.utf8)) as! [[String: Any]]
        #expect(peers.count == 1 && peers[0]["label"] as? String == "alice-text")
        #expect(peers[0]["address"] as? String == "127.0.0.1:7733")
        try bob.ok("peer", "remove", "alice-text", "--yes")

        try bob.ok("peer", "add", "-", "--yes", stdin: card.uppercased() + "#alice\n")
        #expect(try bob.ok("peer", "show", "alice").contains(card))
        try bob.ok("peer", "remove", "alice", "--yes")

        let png = alice.directory.file("alice.png")
        try alice.ok("id", "--png", png)
        let added = try bob.vault.run("peer", "add", "--image", png, "--yes")
        #expect(added.status == 0)
        #expect(added.stderr.contains("trusted 'alice'"))
        #expect(try bob.ok("peer", "show", "alice", "--json").contains(card))
    }

    @Test func addsFromPGMAndJPEGPhotos() throws {
        let (side, pixels) = try QRCode(text: alice.card().uppercased() + "#alice").bitmap(scale: 5)
        let pgm = try bob.directory.write("a.pgm", Array("P5\n\(side) \(side)\n255\n".utf8) + pixels)
        try bob.ok("peer", "add", "--image", pgm, "--label", "alice-pgm", "--yes")
        let jpeg = bob.directory.file("a.jpg")
        #expect(try ProcessRunner.run("/usr/bin/cjpeg", ["-quality", "50", "-outfile", jpeg, pgm]).status == 0)
        try bob.ok("peer", "remove", "alice-pgm", "--yes")
        try bob.ok("peer", "add", "--image", jpeg, "--yes")
        #expect(try bob.ok("peer", "list").contains("alice "))
    }

    @Test func asksForConfirmationOnTheTerminal() throws {
        let card = try alice.card()
        let fingerprint = try KeyCard(text: card).fingerprint
        let declined = try bob.vault.interactive("peer", "add", card, "--label", "alice")
        try declined.expect("Trust this key? [y/N] ")
        declined.send("n")
        let no = declined.finish()
        #expect(no.status == 2)
        #expect(no.stderr.contains("fingerprint  \(fingerprint)"))
        #expect(no.stderr.contains("vault: error: cancelled; nothing was changed"))
        #expect(try isEmptyJSONList(bob.ok("peer", "list", "--json")))

        let accepted = try bob.vault.interactive("peer", "add", card, "--label", "alice")
        try accepted.expect("Trust this key? [y/N] ")
        accepted.send("y")
        #expect(accepted.finish().status == 0)
        #expect(try bob.ok("peer", "list").contains(fingerprint))
    }

    @Test func refusesWithoutATerminalOrYes() throws {
        let message = try bob.fails("peer", "add", alice.card(), "--label", "alice")
        #expect(message.contains("needs confirmation and there is no terminal"))
        #expect(message.contains("vault: hint: pass --yes"))
    }

    @Test func refusesOwnDuplicateAndTakenLabel() throws {
        #expect(try bob.fails("peer", "add", bob.card(), "--label", "me", "--yes").contains("this is your own key card"))
        try bob.ok("peer", "add", alice.card(), "--label", "alice", "--yes")
        let duplicate = try bob.fails("peer", "add", alice.card(), "--label", "again", "--yes")
        #expect(duplicate.contains("already trusted, as peer 'alice'"))
        let carol = try User().initialize("carol")
        #expect(try bob.fails("peer", "add", carol.card(), "--label", "ALICE", "--yes")
            .contains("a peer named 'alice' already exists"))
        #expect(try bob.fails("peer", "add", carol.card(), "--yes").contains("the card carries no label"))
    }

    @Test func refusesMalformedCards() throws {
        let card = try alice.card()
        let good = try KeyCard(text: card).encoded
        var typo = Array(card)
        typo[30] = typo[30] == "q" ? "p" : "q"
        let cases: [(String, String)] = [
            (String(typo), "bad checksum"),
            (Bech32.encode(hrp: "age", data: good), "expected prefix 'vault1', found 'age1'"),
            (Bech32.encode(hrp: "vault", data: [9] + good.dropFirst()), "unknown version 9"),
            (Bech32.encode(hrp: "vault", data: Array(good.dropLast(2))), "63 bytes where version 1 has 65"),
            ("hello", "it has no data after a '1' separator"),
        ]
        for (text, expected) in cases {
            let message = try bob.fails("peer", "add", text, "--label", "x", "--yes")
            #expect(message.contains("vault: error: invalid key card: \(expected)"), "\(message)")
        }
        #expect(try bob.fails("peer", "add", "-", "--label", "x", "--yes").contains("standard input holds no key card"))
        // Standard input that cannot be read (a directory) is an error in words, not a trap.
        let before = bob.vault.keystoreBytes()
        let directory = try ProcessRunner.run("/bin/sh", ["-c", #"exec "$0" peer add - --label x --yes < "$1""#, VaultBinary.path, bob.directory.path],
                                              environment: bob.vault.childEnvironment)
        #expect(directory.status == 1 && directory.stderr.hasPrefix("vault: error: standard input: Is a directory\n"), "\(directory.stderr)")
        #expect(bob.vault.keystoreBytes() == before)
        #expect(try bob.fails("peer", "add", card, "--label", "x", "--addr", "nowhere", "--yes").contains("invalid address"))
        #expect(try bob.fails("peer", "add", card, "--image", "x.png", "--yes", status: 64).contains("not both"))
        // No card at all is a usage error, as any missing argument is (issue 32).
        let none = try bob.fails("peer", "add", "--label", "x", "--yes", status: 64)
        #expect(none.contains("no key card given") && none.contains("vault: hint: 'vault help peer add' shows how to use it"), "\(none)")
    }

    @Test func refusesImagesWithoutAKeyCard() throws {
        let blank = try bob.directory.write("blank.png", GrayImage(width: 50, height: 50, pixels: .init(repeating: 255, count: 2500)).png())
        #expect(try bob.fails("peer", "add", "--image", blank, "--yes").contains("no QR code found in \(blank)"))
        let url = try bob.directory.write("url.png", QRCode(text: "https://example.org").png())
        #expect(try bob.fails("peer", "add", "--image", url, "--yes").contains("is not a vault key card"))
        let text = try bob.directory.write("note.txt", Array("not an image".utf8))
        #expect(try bob.fails("peer", "add", "--image", text, "--yes").contains("not a PNG, JPEG or binary PGM file"))
        #expect(try bob.fails("peer", "add", "--image", bob.directory.file("missing.png"), "--yes").contains("cannot read image \(bob.directory.file("missing.png")): No such file or directory"))
    }

    @Test func listsShowsRenamesAndRemoves() throws {
        let carol = try User().initialize("carol")
        #expect(try bob.ok("peer", "list").isEmpty)
        try bob.ok("peer", "add", alice.card(), "--label", "alice", "--yes")
        try bob.ok("peer", "add", carol.card(), "--label", "carol", "--addr", "[::1]:7733", "--yes")
        let list = try bob.ok("peer", "list")
        #expect(list.hasPrefix("LABEL"))
        #expect(list.contains("carol  ") && list.contains("[::1]:7733"))
        let show = try bob.ok("peer", "show", "CAROL")
        #expect(try show.contains("label        carol") && show.contains(carol.card()))

        try bob.ok("peer", "rename", "carol", "Caroline")
        let taken = try bob.fails("peer", "rename", "alice", "caroline")
        #expect(taken.contains("a peer named 'Caroline' already exists") && taken.contains("'vault peer list' shows the names taken")
                    && !taken.contains("with --label NAME\n"), "\(taken)")
        #expect(try bob.fails("peer", "rename", "nobody", "x").contains("no peer named 'nobody'"))
        #expect(try bob.fails("peer", "rename", "alice", "bad,label").contains("invalid label"))
        #expect(try bob.fails("peer", "show", "carol").contains("vault: hint: 'vault peer list'"))

        #expect(try bob.fails("peer", "remove", "alice").contains("needs confirmation"))
        let remove = try bob.vault.interactive("peer", "remove", "alice")
        try remove.expect("Stop trusting 'alice'? [y/N] ")
        remove.send("yes")
        #expect(remove.finish().status == 0)
        try bob.ok("peer", "remove", "caroline", "--yes")
        #expect(try bob.fails("peer", "remove", "caroline", "--yes").contains("no peer named"))
        #expect(try isEmptyJSONList(bob.ok("peer", "list", "--json")))
    }

    /// Issue 32: a peer's address changes (DHCP, another network) without a new key, so it
    /// can be changed and forgotten; `peer add --addr` of a key already trusted says how.
    @Test func setsAndClearsAPeersAddress() throws {
        try bob.ok("peer", "add", alice.card(), "--label", "alice", "--addr", "192.168.1.20:7733", "--yes")
        let again = try bob.fails("peer", "add", alice.card(), "--label", "alice", "--addr", "192.168.1.21:7733", "--yes")
        #expect(again.contains("already trusted, as peer 'alice'")
            && again.contains("vault: hint: to change where it is reached, run 'vault peer set-addr alice 192.168.1.21:7733'"), "\(again)")
        let set = try bob.vault.run("peer", "set-addr", "ALICE", "192.168.1.21:7733")
        #expect(set.status == 0 && set.stderr.contains("'alice' is reached at 192.168.1.21:7733"), "\(set.stderr)")
        #expect(try bob.ok("peer", "show", "alice").contains("address      192.168.1.21:7733\n"))
        try bob.ok("peer", "set-addr", "alice", "[::1]:7734")
        #expect(try bob.ok("peer", "list").contains("[::1]:7734"))
        try bob.ok("peer", "set-addr", "alice", "-")
        #expect(try bob.ok("peer", "show", "alice").contains("address      -\n"))
        #expect(try bob.fails("peer", "set-addr", "alice", "nowhere").contains("invalid address"))
        #expect(try bob.fails("peer", "set-addr", "nobody", "10.0.0.1:7733").contains("no peer named 'nobody'"))
        #expect(try bob.fails("peer", "set-addr", "alice", status: 64).contains("missing expected argument"))
    }
}

func isEmptyJSONList(_ text: String) throws -> Bool {
    (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Any])?.isEmpty == true
}
