import Foundation
import Testing
@testable import VaultCore
import VaultTestSupport

/// Printed recovery kits from the built binary: made with 'vault secrets kit', rendered as
/// a printer would (pdftoppm), photographed badly (as the QR tests degrade images: JPEG at
/// quality 50 with cjpeg, and here noise and a greyer page too), read back by zbar and by
/// 'vault scan', with no keystore.
@Suite struct KitTests {
    /// Page images of `pdf` at 150 dpi, as `pdftoppm -r 150 -png` makes them.
    static func render(_ pdf: String, into directory: TemporaryDirectory, name: String) throws -> [String] {
        let prefix = directory.file(name)
        let result = try ProcessRunner.run("/usr/bin/pdftoppm", ["-r", "150", "-png", pdf, prefix])
        #expect(result.status == 0, "\(result.stderr)")
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(name + "-") && $0.hasSuffix(".png") }
            .sorted().map { directory.file($0) }
    }

    /// A photo-like copy of a page: grey paper, ink that is not black, noise, then a JPEG at
    /// quality 50 (cjpeg, an encoder independent of ours).
    static func degrade(_ png: String, into directory: TemporaryDirectory) throws -> String {
        let image = try GrayImage(contentsOf: png)
        // Seeded by the page's name: a page that fails to read fails again.
        let noise = SeededRandom(seed: URL(fileURLWithPath: png).lastPathComponent).bytes(image.pixels.count)
        let pixels = zip(image.pixels, noise).map { value, byte -> UInt8 in
            let toned = 40 + Int(value) * 170 / 255
            return UInt8(max(0, min(255, toned + Int(byte) * 57 / 256 - 28)))
        }
        let pgm = try directory.write(URL(fileURLWithPath: png).lastPathComponent + ".pgm",
                                      Array("P5\n\(image.width) \(image.height)\n255\n".utf8) + pixels)
        let jpeg = pgm + ".jpg"
        #expect(try ProcessRunner.run("/usr/bin/cjpeg", ["-quality", "50", "-grayscale", "-outfile", jpeg, pgm]).status == 0)
        return jpeg
    }

    static func text(_ pdf: String) throws -> String {
        let result = try ProcessRunner.run("/usr/bin/pdftotext", ["-layout", pdf, "-"])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout
    }

    static func zbar(_ image: String) throws -> [String] {
        let result = try ProcessRunner.run("/usr/bin/zbarimg", ["--quiet", "--raw", "-Sdisable", "-Sqrcode.enable", image])
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test func twoOfThreePrintedKitsRecoverWithNoKeystore() throws {
        let circle = try Circle(["alice", "bob", "carol"])
        let note = "the safe's code is 7431, left then right\n"
        let file = try circle.files.write("note.txt", Array(note.utf8))
        let id = try circle.share(from: "alice", [file, "--to", "bob,carol", "-k", "2", "--description", "the will", "--labels"])
        var pages: [String: [String]] = [:]
        for label in ["alice", "bob", "carol"] {
            let out = circle.files.file("kits-\(label)")
            let made = try circle[label].vault.run(["secrets", "kit", id, "--out-dir", out])
            #expect(made.status == 0, "\(made.stderr)")
            let pdf = out + "/\(id.prefix(16))-\(label).pdf"
            #expect(FileManager.default.fileExists(atPath: pdf), "\(made.stderr)")
            let text = try Self.text(pdf)
            #expect(text.contains("Recovery kit") && text.contains("Held by") && text.contains(label))
            #expect(text.contains("any 2 of the 3 holders' kits"))
            #expect(text.contains("the will"))
            #expect(text.contains("How to recover with vault") && text.contains("vault scan --image"))
            pages[label] = try Self.render(pdf, into: circle.files, name: "page-\(label)").map { try Self.degrade($0, into: circle.files) }
            // zbar, an independent reader, finds every code of the kit on the degraded pages.
            let codes = try pages[label]!.flatMap(Self.zbar)
            #expect(!codes.isEmpty && codes.allSatisfy { $0.hasPrefix("VAULTKIT1") }, "\(codes)")
        }
        // Carol's and alice's pages, in a mixed order, on a machine with no keystore.
        let nobody = User()
        let images = (pages["carol"]! + pages["alice"]!).reversed().flatMap { ["--image", $0] }
        let scanned = try nobody.vault.run(["scan"] + images)
        #expect(scanned.status == 0, "\(scanned.stderr)")
        #expect(scanned.stdout == note)
        #expect(scanned.stderr.contains("dealer's fingerprint"), "\(scanned.stderr)")
        #expect(!FileManager.default.fileExists(atPath: nobody.vault.home))
        // One kit alone is refused, saying how many more are needed.
        let one = try nobody.fails(["scan"] + pages["bob"]!.flatMap { ["--image", $0] })
        #expect(one.contains("read 1 kit of the 2 needed"), "\(one)")
    }

    /// A kit whose piece was altered (a code re-encoded with one byte changed, as a forger
    /// would, so the code's own checksum holds) is refused, and nothing is written.
    @Test func anAlteredKitIsRefused() throws {
        let circle = try Circle(["alice", "bob"])
        let file = try circle.files.write("note.txt", Array("a note that two kits rebuild\n".utf8))
        let id = try circle.share(from: "alice", [file, "--to", "bob", "-k", "2"])
        var codes: [String] = []
        for label in ["alice", "bob"] {
            let out = circle.files.file("kits-\(label)")
            try circle[label].ok(["secrets", "kit", id, "--out-dir", out])
            codes += try Self.render(out + "/\(id.prefix(16))-\(label).pdf", into: circle.files, name: "page-\(label)").flatMap(Self.zbar)
        }
        // The last code of bob's kit ends with his piece (and his name): change a piece byte.
        let last = codes.count - 1
        var (hrp, data) = try Bech32.decode(codes[last], maximumLength: 2000)
        data[data.count - 1 - 1 - "bob".utf8.count] ^= 0x01
        codes[last] = Bech32.encode(hrp: hrp, data: data).uppercased()
        var collector = KitCodes.Collector()
        for code in codes { try collector.add(Array(code.utf8)) }
        let shares = try collector.shares().complete
        #expect(shares.count == 2)
        let refused = #expect(throws: VaultError.self) {
            try KitRecovery.recover(shares, password: { throw VaultError.passwordRequired }, output: { _ in })
        }
        #expect("\(refused!)".contains("holder 2's kit is forged or damaged: its piece does not match the dealer's commitment"), "\(refused!)")
        // The same through the binary, from images of the codes.
        let images = try codes.enumerated().map { number, code in
            try circle.files.write("code-\(number).png", try QRCode(text: code).png(scale: 4))
        }
        let output = circle.files.file("recovered")
        let message = try User().fails(["scan", "-o", output] + images.flatMap { ["--image", $0] })
        #expect(message.contains("forged or damaged"), "\(message)")
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    @Test func aKitWithWordsAndTheInstructionsToUseThemWithoutVault() throws {
        let (circle, id, key) = try WordsCommandTests.sharedKey()
        let out = circle.files.file("kits")
        let made = try circle["bob"].vault.run(["secrets", "kit", id, "--out-dir", out, "--words", "--no-words-passphrase",
                                                "--piece", try circle.release(id, from: "alice", to: "bob")])
        #expect(made.status == 0, "\(made.stderr)")
        let text = try Self.text(out + "/\(id.prefix(16))-bob.pdf")
        #expect(text.contains("How to recover without vault, from the words"))
        #expect(text.contains("shamir recover") && text.contains("slip-0039"))
        // The words on bob's kit are bob's words of the set alice exports.
        let export = try circle["alice"].ok(["secrets", "export-words", id, "--piece", try circle.release(id, from: "carol", to: "alice"),
                                             "--no-words-passphrase"])
        let bob = WordsCommandTests.mnemonics(export)["bob"]![0].split(separator: " ")
        let printed = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        #expect(bob.allSatisfy { printed.contains(String($0)) })
        #expect(try WordsCommandTests.referenceCombines([WordsCommandTests.mnemonics(export)["carol"]![0], bob.joined(separator: " ")]) == key)
    }

    @Test func aSecretTooLargeForPaperSaysSoAndWhereItsPiecesAre() throws {
        let circle = try Circle(["alice", "bob"])
        let file = try circle.files.write("big.bin", (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let id = try circle.share(from: "alice", [file, "--to", "bob", "-k", "2", "--labels"])
        let out = circle.files.file("kits")
        let made = try circle["alice"].vault.run(["secrets", "kit", id, "--out-dir", out])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stderr.contains("too large for paper"), "\(made.stderr)")
        let pdf = out + "/\(id.prefix(16))-alice.pdf"
        let text = try Self.text(pdf)
        #expect(text.contains("This secret is too large for paper"))
        #expect(text.contains("alice (holder 1), bob (holder 2)") && text.contains("vault recover \(id.prefix(16))"))
        #expect(try Self.render(pdf, into: circle.files, name: "big").flatMap(Self.zbar).isEmpty)
        // --words on a file is refused before anything is written.
        let refused = try circle["alice"].fails(["secrets", "kit", id, "--out-dir", circle.files.file("other"), "--words", "--no-words-passphrase"])
        #expect(refused.contains("is a file; SLIP-39 words carry keys and notes"), "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: circle.files.file("other")))
    }
}
