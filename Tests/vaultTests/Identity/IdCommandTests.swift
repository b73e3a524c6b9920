import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct IdCommandTests {
    @Test func showsLabelCardFingerprintAndQR() throws {
        let user = try User().initialize("alice")
        let output = try user.ok("id")
        let card = try user.card()
        #expect(output.contains("label        alice\n"))
        #expect(output.contains("card         \(card)#alice\n"))
        let fingerprint = try KeyCard(text: card).fingerprint
        #expect(output.contains("fingerprint  \(fingerprint)\n"))
        #expect(output.contains("▄") && output.contains("█"))
        // Not a terminal: no colour escapes.
        #expect(!output.contains("\u{1B}["))
    }

    /// Issue 32: the card's text carries the label, on the `card` line and with `--format
    /// text`, so that `vault peer add "$(vault id --format text)"` needs no --label; the PNG
    /// carries it too, and a card without one still imports with --label.
    @Test func theCardTextCarriesTheLabelThatPeerAddTakes() throws {
        let alice = try User().initialize("Zoë's laptop")
        let bob = try User().initialize("bob")
        let text = try alice.ok("id", "--format", "text").trimmingCharacters(in: .newlines)
        #expect(text == (try alice.card()) + "#Zoë's laptop")
        #expect(try alice.ok("id").contains("card         \(text)\n"))
        try bob.ok("peer", "add", text, "--yes")
        #expect(try bob.ok("peer", "show", "Zoë's laptop").contains(alice.card()))

        let carol = try User().initialize("carol")
        let png = carol.directory.file("carol.png")
        try carol.ok("id", "--png", png)
        try bob.ok("peer", "add", "--image", png, "--yes")
        try bob.ok("peer", "show", "carol")

        let dave = try User().initialize("dave")
        #expect(try bob.fails("peer", "add", dave.card(), "--yes").contains("the card carries no label"))
        try bob.ok("peer", "add", dave.card(), "--label", "dave", "--yes")
        #expect(try bob.ok("peer", "show", "dave").contains(dave.card()))
    }

    @Test func printsEachFormat() throws {
        let user = try User().initialize("alice")
        let card = try KeyCard(text: user.card())
        let hex = try user.ok("id", "--format", "hex").trimmingCharacters(in: .newlines)
        #expect(hex == card.encoded.map { String(format: "%02x", $0) }.joined())
        let base64 = try user.ok("id", "--format", "base64").trimmingCharacters(in: .newlines)
        #expect(Data(base64Encoded: base64) == Data(card.encoded))
        let json = try JSONSerialization.jsonObject(with: Data(user.ok("id", "--format", "json").utf8)) as! [String: String]
        #expect(json["card"] == card.text && json["label"] == "alice" && json["fingerprint"] == card.fingerprint)
        #expect(json["agreementKey"] == card.agreementKey.map { String(format: "%02x", $0) }.joined())
    }

    /// The terminal rendering of `vault id --qr`, read back into a bitmap, scans to the card
    /// and its suggested label, in both polarities.
    @Test(arguments: [false, true])
    func terminalQRScans(invert: Bool) throws {
        let user = try User().initialize("alice")
        let text = try invert ? user.ok("id", "--qr", "--invert") : user.ok("id", "--qr")
        #expect(!text.contains("vault1"))
        let image = try #require(TerminalQR.bitmap(from: text, invert: invert))
        #expect(try QRScanner.scan(image) == [Array((user.card().uppercased() + "#alice").utf8)])
    }

    @Test func pngDecodesWithLibzbarAndZbarimg() throws {
        let user = try User().initialize("Zoë's laptop")
        let png = user.directory.file("card.png")
        let result = try user.vault.run("id", "--png", png)
        #expect(result.status == 0 && result.stdout.isEmpty)
        let payload = try user.card().uppercased() + "#Zoë's laptop"
        #expect(QRScanner.scan(try GrayImage(contentsOf: png)) == [Array(payload.utf8)])
        let zbarimg = try ProcessRunner.run("/usr/bin/zbarimg", ["--quiet", "--raw", "-Sbinary", png])
        #expect(zbarimg.status == 0, "\(zbarimg.stderr)")
        #expect(zbarimg.stdoutBytes == Array(payload.utf8) || zbarimg.stdoutBytes == Array((payload + "\n").utf8))
    }

    @Test func svgIsWrittenAndFilesAreNotOverwritten() throws {
        let user = try User().initialize("alice")
        let svg = user.directory.file("card.svg")
        try user.ok("id", "--svg", svg)
        let content = try String(contentsOfFile: svg, encoding: .utf8)
        #expect(content.contains("<svg") && content.contains("<path d=\"M"))
        #expect(try user.fails("id", "--svg", svg).contains("already exists"))
        #expect(try String(contentsOfFile: svg, encoding: .utf8) == content)
    }

    @Test func forcesColoursOnATerminalButNotUnderNO_COLOR() throws {
        let user = try User().initialize("alice")
        // A session whose stdout is the terminal itself.
        let script = "exec \"$0\" id --qr > /dev/tty"
        let session = try TerminalSession("/bin/sh", ["-c", script, VaultBinary.path], environment: user.vault.childEnvironment)
        try session.expect("\u{1B}[97;40m")
        #expect(session.finish().status == 0)
        var env = user.vault.childEnvironment
        env["NO_COLOR"] = "1"
        let plain = try TerminalSession("/bin/sh", ["-c", "\"$0\" id --qr > /dev/tty; echo DONE > /dev/tty", VaultBinary.path], environment: env)
        try plain.expect("DONE")
        #expect(!plain.transcript.contains("\u{1B}["))
    }
}
