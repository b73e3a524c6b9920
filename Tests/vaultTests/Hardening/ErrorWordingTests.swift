import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// Issue 19: every error a user can meet is one `vault: error:` line in words. The bad
/// inputs of the CLI's suites (refusals, strict input, peers, id, items, URL requests), and
/// what the file system and the network can do to a command, run through the real binary:
/// each ends with a non-zero status, exactly one error line, and no Swift artifact on
/// stderr (``ErrorWording``). `User.fails` applies the same check to every other refusal.
@Suite struct ErrorWordingTests {
    /// One bad input: who runs what, and a fragment the error line must contain.
    struct Case {
        let name: String
        let user: User
        let arguments: [String]
        var stdin = ""
        var expect: String?
    }

    @Test func everyBadInputEndsInOneLineOfWords() throws {
        let fixture = try Fixture()
        let cases = try fixture.cases()
        #expect(cases.count >= 60)
        for test in cases {
            let result = try test.user.vault.run(test.arguments, stdin: Array(test.stdin.utf8))
            check(result, test.name, expect: test.expect, typed: test.arguments)
        }
    }

    /// Pairing needs a terminal; an address where nothing listens was once reported as
    /// ArgumentParser's `Error: unreachable: …`.
    @Test func pairingWithNobodyIsOneLineOfWords() throws {
        let user = try User().initialize("alice")
        let session = try user.vault.interactive("pair", "--peer", "127.0.0.1:1")
        let result = session.finish()
        check(result, "pair with nobody", expect: "unreachable: 127.0.0.1:1: connection refused")
        #expect(result.stderr.contains("vault: hint: check the address"))
    }

    /// A peer that resets the connection (a program that is not vault serve) is told as a
    /// broken connection, on the peer's line, and never with NIO's description.
    @Test func aResetConnectionIsToldInWords() throws {
        let fixture = try Fixture()
        let listener = try LoopbackListener(resetting: true)
        let result = try fixture.circle["alice"].vault.run(["recover", fixture.id, "--peer", "bob=127.0.0.1:\(listener.port)",
                                                             "--peer", "carol=127.0.0.1:1", "--timeout", "5"])
        check(result, "recover from a resetting peer", expect: "only 1 verified piece, 2 needed")
        #expect(result.stderr.contains("  bob: the connection broke: "), "\(result.stderr)")
        #expect(result.stderr.contains("  carol: unreachable: 127.0.0.1:1: connection refused"), "\(result.stderr)")
        let share = try fixture.circle["alice"].vault.run(["share", fixture.note, "--to", "bob", "-k", "2",
                                                           "--peer", "bob=127.0.0.1:\(listener.port)"])
        check(share, "share to a resetting peer", expect: "1 holder did not receive a share: bob")
        #expect(share.stderr.contains("  bob: the connection broke: "), "\(share.stderr)")
    }

    /// Help and the version are not errors: they print to stdout and exit 0, however asked.
    @Test func helpIsNotAnError() throws {
        let vault = VaultBinary(home: "/nonexistent")
        for arguments in [["--help"], ["help"], ["help", "share"], ["share", "--help"], ["secrets", "import", "-h"],
                          ["help", "secrets", "import"]] {
            let result = try vault.run(arguments)
            #expect(result.status == 0 && result.stderr.isEmpty && result.stdout.contains("USAGE: vault"),
                    "\(arguments): \(result.status) \(result.stderr)")
        }
        let version = try vault.run("--version")
        #expect(version.status == 0 && !version.stdout.isEmpty && version.stderr.isEmpty)
    }

    /// Issue 19: every command that asks first takes `--yes` and says in its help what it
    /// asks; these are the commands Docs/CLI.md lists under "Confirmations".
    @Test func everyQuestionTakesYesAndIsDocumented() throws {
        let dump = try VaultBinary(home: "/nonexistent").run("--experimental-dump-help")
        struct Name: Decodable { let name: String }
        struct Argument: Decodable { let names: [Name]? }
        struct Command: Decodable { let commandName: String; let discussion: String?; let arguments: [Argument]?; let subcommands: [Command]? }
        struct Dump: Decodable { let command: Command }
        var asking: [String: String] = [:]
        func walk(_ command: Command, _ path: [String]) {
            if command.arguments?.contains(where: { $0.names?.contains { $0.name == "yes" } == true }) == true {
                asking[path.joined(separator: " ")] = command.discussion ?? ""
            }
            command.subcommands?.forEach { walk($0, path + [$0.commandName]) }
        }
        walk(try JSONDecoder().decode(Dump.self, from: Data(dump.stdoutBytes)).command, [])
        #expect(Set(asking.keys) == ["peer add", "peer remove", "scan", "secrets import", "secrets rm", "item rm", "item import", "relay add", "link rm"])
        for (command, discussion) in asking {
            #expect(discussion.lowercased().contains("asks") && discussion.contains("--yes"), "\(command): \(discussion)")
        }
    }

    /// The check itself: it finds what Swift prints for an error, and passes words.
    @Test func theCheckCatchesSwiftDescriptions() {
        let swift = [
            "vault: error: keystore error: forged",
            "vault: error: the share bundle is malformed: trailingData",
            "vault: error: invalid(\"x\")",
            "vault: error: Optional(\"bob\")",
            "Error: read(descriptor:pointer:size:): Connection reset by peer) (errno: 104)",
            "vault: error: Error Domain=NSCocoaErrorDomain Code=260 \"The file doesn’t exist.\"",
            "  bob: IOError: connection reset by peer",
            "vault: error: truncated(what: \"the item\")",
        ]
        for line in swift { #expect(!ErrorWording.artifacts(in: line).isEmpty, "\(line)") }
        let words = [
            "vault: error: /tmp/vault-cli-AbCdEf/x.vshare: No such file or directory",
            "vault: error: a parameter has an invalid value: scryptN is only valid with addPassword=1 (error code 10)",
            "need 1 piece besides yours; holders you trust: none",
            "piece 1 from your share: verified",
            "vault: error: the share bundle is damaged or altered: its sealed keys do not open",
        ]
        for line in words { #expect(ErrorWording.artifacts(in: line).isEmpty, "\(ErrorWording.artifacts(in: line))") }
    }

    /// Words that are the test's own choice: the users' labels.
    static let labels: Set<String> = ["alice", "bob", "carol", "dora", "stranger"]

    private func check(_ result: ProcessResult, _ name: String, expect: String?, typed: [String] = [],
                       sourceLocation: SourceLocation = #_sourceLocation) {
        let artifacts = ErrorWording.artifacts(in: result.stderr, allowing: Self.labels.union(ErrorWording.words(of: typed)))
        #expect(result.status != 0, "\(name): succeeded", sourceLocation: sourceLocation)
        let errors = result.stderr.split(separator: "\n").filter { $0.hasPrefix("vault: error: ") }
        #expect(errors.count == 1, "\(name): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(artifacts.isEmpty, "\(name): \(artifacts)", sourceLocation: sourceLocation)
        if let expect {
            #expect(errors.contains { $0.contains(expect) }, "\(name): expected '\(expect)' in \(result.stderr)",
                    sourceLocation: sourceLocation)
        }
    }
}

/// Three users who trust each other, a shared note, and the damaged, foreign and missing
/// files the cases feed them.
final class Fixture {
    let circle: Circle
    let files: TemporaryDirectory
    let note: String
    let id: String

    init() throws {
        circle = try Circle(["alice", "bob", "carol"])
        files = circle.files
        note = try files.write("note.txt", Array("the combination is 4-8-15-16".utf8))
        id = try circle.share(from: "alice", [note, "--to", "bob,carol", "-k", "2"])
    }

    func copy(_ path: String, _ name: String, edit: (inout [UInt8]) -> Void) throws -> String {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        edit(&bytes)
        return try files.write(name, bytes)
    }

    func cases() throws -> [ErrorWordingTests.Case] {
        let alice = circle["alice"], bob = circle["bob"]
        let directory = files.file("a-directory")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let missing = files.file("missing")

        // Bundles not yet imported, and their damaged copies.
        _ = try circle.share(from: "alice", [note, "--to", "bob,carol", "-k", "2"], import: false)
        let bundle = circle.lastOut + "/bob.vshare", foreign = circle.lastOut + "/carol.vshare"
        let truncated = try copy(bundle, "truncated.vshare") { $0.removeLast(100) }
        let pieceFlip = try copy(bundle, "piece-flip.vshare") { $0[$0.count - 5] ^= 1 }
        let headerFlip = try copy(bundle, "header-flip.vshare") { $0[12] ^= 1 }
        let longer = try copy(bundle, "longer.vshare") { $0.append(0) }
        let text = try files.write("text.vshare", Array("hello, world".utf8))

        // Pieces, and a secret with a password layer.
        let piece = try circle.release(id, from: "bob", to: "alice")
        let shortPiece = try copy(piece, "short.vpiece") { $0.removeLast(10) }
        let junkPiece = try files.write("junk.vpiece", Array("junk".utf8))
        let password = try files.write("password", Array("right\n".utf8))
        let wrong = try files.write("wrong", Array("wrong\n".utf8))
        let layered = try circle.share(from: "alice", [note, "--to", "bob", "-k", "2", "--password-file", password])
        let layeredPiece = try circle.release(layered, from: "bob", to: "alice")

        // Images.
        let blank = try files.write("blank.png", GrayImage(width: 50, height: 50, pixels: .init(repeating: 255, count: 2500)).png())
        let notACard = try files.write("url.png", QRCode(text: "https://example.org").png())
        let existing = try files.write("exists.png", [UInt8]())

        // Keystores: none, a directory in the file's place, garbage, a passphrase.
        let nobody = User()
        let folded = User()
        try FileManager.default.createDirectory(atPath: folded.vault.home + "/vault.sqlite", withIntermediateDirectories: true)
        let garbage = User()
        try FileManager.default.createDirectory(atPath: garbage.vault.home, withIntermediateDirectories: true)
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: garbage.vault.home + "/vault.sqlite"))
        let dora = try User().initialize("dora", "--passphrase-file", password)
        try dora.ok("peer", "add", alice.card(), "--label", "alice", "--yes")

        var card = Array(try alice.card())
        card[30] = card[30] == "q" ? "p" : "q"
        let busy = try LoopbackListener(resetting: false)
        listeners.append(busy)

        typealias Case = ErrorWordingTests.Case
        let url = "vault://x-callback-url/"
        return [
            // Key cards and peers.
            Case(name: "mistyped card", user: bob, arguments: ["peer", "add", String(card), "--label", "x", "--yes"], expect: "bad checksum"),
            Case(name: "foreign card", user: bob, arguments: ["peer", "add", "age1qqqqqqqqqqqqqqqq", "--label", "x", "--yes"]),
            Case(name: "not a card", user: bob, arguments: ["peer", "add", "hello", "--label", "x", "--yes"], expect: "invalid key card"),
            Case(name: "card on empty stdin", user: bob, arguments: ["peer", "add", "-", "--label", "x", "--yes"]),
            Case(name: "bad address", user: bob, arguments: ["peer", "add", try nobodyCard(), "--label", "x", "--addr", "nowhere", "--yes"],
                 expect: "invalid address"),
            Case(name: "own card", user: bob, arguments: ["peer", "add", try bob.card(), "--label", "me", "--yes"]),
            Case(name: "trusted twice", user: bob, arguments: ["peer", "add", try alice.card(), "--label", "again", "--yes"]),
            Case(name: "trust without terminal", user: bob, arguments: ["peer", "add", try nobodyCard(), "--label", "x"],
                 expect: "needs confirmation"),
            Case(name: "image missing", user: bob, arguments: ["peer", "add", "--image", missing, "--yes"], expect: "No such file or directory"),
            Case(name: "image is a directory", user: bob, arguments: ["peer", "add", "--image", directory, "--yes"], expect: "Is a directory"),
            Case(name: "image unreadable", user: bob, arguments: ["peer", "add", "--image", "/proc/self/mem", "--yes"]),
            Case(name: "image not an image", user: bob, arguments: ["peer", "add", "--image", note, "--yes"], expect: "not a PNG"),
            Case(name: "image without QR code", user: bob, arguments: ["peer", "add", "--image", blank, "--yes"], expect: "no QR code"),
            Case(name: "QR code not a card", user: bob, arguments: ["peer", "add", "--image", notACard, "--yes"]),
            Case(name: "unknown peer", user: bob, arguments: ["peer", "show", "nobody"], expect: "no peer named 'nobody'"),
            Case(name: "bad label", user: bob, arguments: ["peer", "rename", "alice", "bad,label"], expect: "invalid label"),
            Case(name: "remove unknown peer", user: bob, arguments: ["peer", "remove", "nobody", "--yes"]),

            // Identity and keystore.
            Case(name: "identity exists", user: bob, arguments: ["init", "--label", "bob", "--no-passphrase"]),
            Case(name: "no keystore", user: nobody, arguments: ["id"], expect: "no keystore"),
            Case(name: "keystore is a directory", user: folded, arguments: ["id"], expect: "Is a directory"),
            Case(name: "keystore is garbage", user: garbage, arguments: ["id"], expect: "the keystore is corrupt"),
            Case(name: "png over a file", user: bob, arguments: ["id", "--png", existing], expect: "already exists"),
            Case(name: "png in a missing directory", user: bob, arguments: ["id", "--png", missing + "/card.png"]),
            Case(name: "passphrase file is a directory", user: dora, arguments: ["secrets", "import", "--yes", bundle, "--passphrase-file", directory]),
            Case(name: "passphrase file missing", user: dora, arguments: ["secrets", "import", "--yes", bundle, "--passphrase-file", missing]),
            Case(name: "passphrase needed", user: dora, arguments: ["secrets", "import", "--yes", bundle], expect: "protected by a passphrase"),
            Case(name: "wrong passphrase", user: dora, arguments: ["passphrase", "--passphrase-file", wrong, "--remove"],
                 expect: "wrong passphrase"),

            // Share bundles.
            Case(name: "bundle truncated", user: bob, arguments: ["secrets", "import", "--yes", truncated], expect: "truncated"),
            Case(name: "bundle piece altered", user: bob, arguments: ["secrets", "import", "--yes", pieceFlip], expect: "does not match the dealer's commitment"),
            Case(name: "bundle header altered", user: bob, arguments: ["secrets", "import", "--yes", headerFlip], expect: "does not verify"),
            Case(name: "bundle too long", user: bob, arguments: ["secrets", "import", "--yes", longer], expect: "bytes follow the piece"),
            Case(name: "not a bundle", user: bob, arguments: ["secrets", "import", "--yes", text], expect: "not a vault share bundle"),
            Case(name: "foreign bundle", user: bob, arguments: ["secrets", "import", "--yes", foreign], expect: "sealed to another identity"),
            Case(name: "bundle missing", user: bob, arguments: ["secrets", "import", "--yes", missing], expect: "No such file or directory"),
            Case(name: "bundle is a directory", user: bob, arguments: ["secrets", "import", "--yes", directory], expect: "Is a directory"),
            Case(name: "bundle unreadable", user: bob, arguments: ["secrets", "import", "--yes", "/proc/self/mem"]),
            Case(name: "one bad bundle of two", user: bob, arguments: ["secrets", "import", "--yes", bundle, text],
                 expect: "\(text): the share bundle is malformed: not a vault share bundle"),
            Case(name: "no bundle", user: bob, arguments: ["secrets", "import", "--yes"]),

            // Secrets, release and recovery.
            Case(name: "unknown secret", user: bob, arguments: ["secrets", "show", "nothing-like-it"], expect: "no secret matches"),
            Case(name: "release to a stranger", user: bob, arguments: ["secrets", "release", id, "--for", "nobody", "-o", files.file("p")]),
            Case(name: "delete without terminal", user: bob, arguments: ["secrets", "rm", id], expect: "needs confirmation"),
            Case(name: "piece truncated", user: alice, arguments: ["recover", id, "--piece", shortPiece], expect: "only 1 verified piece"),
            Case(name: "piece is junk", user: alice, arguments: ["recover", id, "--piece", junkPiece], expect: "not a released vault piece"),
            Case(name: "piece is a directory", user: alice, arguments: ["recover", id, "--piece", directory], expect: "Is a directory"),
            Case(name: "piece missing", user: alice, arguments: ["recover", id, "--piece", missing], expect: "No such file or directory"),
            Case(name: "piece twice", user: alice, arguments: ["recover", id, "--piece", piece, piece], expect: "two pieces claim"),
            Case(name: "output exists", user: alice, arguments: ["recover", id, "--piece", piece, "-o", existing], expect: "already exists"),
            Case(name: "output in a missing directory", user: alice, arguments: ["recover", id, "--piece", piece, "-o", missing + "/x"]),
            Case(name: "no password", user: alice, arguments: ["recover", layered, "--piece", layeredPiece], expect: "no password was given"),
            Case(name: "wrong password", user: alice, arguments: ["recover", layered, "--piece", layeredPiece, "--password-file", wrong],
                 expect: "wrong password"),
            Case(name: "unreachable holders", user: alice, arguments: ["recover", id, "--peer", "bob=127.0.0.1:1", "--peer", "carol=127.0.0.1:1",
                                                                        "--timeout", "5"], expect: "only 1 verified piece"),
            Case(name: "threshold 1", user: alice, arguments: ["share", note, "--to", "bob", "-k", "1", "--out-dir", directory],
                 expect: "out of range"),
            Case(name: "threshold above holders", user: alice, arguments: ["share", note, "--to", "bob", "-k", "3", "--out-dir", directory],
                 expect: "out of range"),
            Case(name: "share unknown holder", user: alice, arguments: ["share", note, "--to", "nobody", "-k", "2", "--out-dir", directory]),
            Case(name: "share missing file", user: alice, arguments: ["share", missing, "--to", "bob", "-k", "2", "--out-dir", directory]),
            Case(name: "share a directory", user: alice, arguments: ["share", directory, "--to", "bob", "-k", "2", "--out-dir", directory]),
            Case(name: "share into a file", user: alice, arguments: ["share", note, "--to", "bob", "-k", "2", "--out-dir", note],
                 expect: "Not a directory"),
            Case(name: "share to nobody listening", user: alice, arguments: ["share", note, "--to", "bob", "-k", "2", "--peer", "bob=127.0.0.1:1"],
                 expect: "did not receive a share"),
            Case(name: "serve on a busy port", user: alice, arguments: ["serve", "--port", "\(busy.port)", "--no-mdns"],
                 expect: "address already in use"),

            // Keys and items.
            Case(name: "unknown key", user: alice, arguments: ["unlock", "nope"], expect: "no shared key matches 'nope'"),
            Case(name: "no agent", user: alice, arguments: ["lock"], expect: "no 'vault serve' runs"),
            Case(name: "unknown item", user: alice, arguments: ["item", "show", "abcd"], expect: "no item matches 'abcd'"),
            Case(name: "item add to unknown key", user: alice, arguments: ["item", "add", "--key", "nope"], stdin: "x"),
            Case(name: "item is a secret", user: alice, arguments: ["item", "add", "--key", id], stdin: "x"),
            Case(name: "item not an item", user: alice, arguments: ["item", "import", note, "--yes"], expect: "not a vault item"),
            Case(name: "item is a directory", user: alice, arguments: ["item", "import", directory, "--yes"], expect: "Is a directory"),
            Case(name: "armor not base64", user: alice, arguments: ["item", "import", "-", "--yes"],
                 stdin: "-----BEGIN VAULT ITEM-----\n!!!!\n-----END VAULT ITEM-----\n", expect: "not a vault item"),
            Case(name: "armor cut short", user: alice, arguments: ["item", "import", "-", "--yes"],
                 stdin: "-----BEGIN VAULT ITEM-----\nAAAA\n", expect: "no END line"),
            Case(name: "QR text damaged", user: alice, arguments: ["scan", "-", "--yes"], stdin: "VAULTITEM1QQQQ\n",
                 expect: "not a vault item"),
            Case(name: "scanned text is neither", user: alice, arguments: ["scan", "-"], stdin: "hello\n"),
            Case(name: "scanned image is a directory", user: alice, arguments: ["scan", "--image", directory], expect: "Is a directory"),

            // vault:// requests and their settings.
            Case(name: "URL not vault", user: alice, arguments: ["url", "http://example.org"], expect: "not a vault://x-callback-url/ request"),
            Case(name: "URL bad percent", user: alice, arguments: ["url", url + "encrypt?a=%zz"], expect: "bad percent-encoding"),
            Case(name: "URL parameter twice", user: alice, arguments: ["url", url + "encrypt?a=1&a=2"], expect: "given twice"),
            Case(name: "URL unknown action", user: alice, arguments: ["url", url + "frob?x-source=t"], expect: "(error code 3)"),
            Case(name: "URL unknown key", user: alice, arguments: ["url", url + "encrypt?plaintext=x&key=nokey&x-source=t"],
                 expect: "no shared key matches 'nokey'"),
            Case(name: "URL bad base64", user: alice, arguments: ["url", url + "decrypt?encryptedData=!!!&x-source=t"], expect: "base64"),
            Case(name: "URL not an item", user: alice, arguments: ["url", url + "decrypt?encryptedData=AAAA&x-source=t"],
                 expect: "decryption failed"),
            Case(name: "URL scrypt alone", user: alice, arguments: ["url", url + "encrypt?plaintext=x&scryptN=5&x-source=t"]),
            Case(name: "URL no key", user: alice, arguments: ["url", url + "encrypt?plaintext=x&x-source=t"], expect: "missing"),
            Case(name: "bad destination", user: alice, arguments: ["settings", "url-allow", "ftp://"], expect: "invalid destination"),

            // The command line itself.
            Case(name: "unknown command", user: alice, arguments: ["frobnicate"]),
            Case(name: "bad option value", user: alice, arguments: ["id", "--format", "bogus"]),
            Case(name: "missing argument", user: alice, arguments: ["recover"]),
        ]
    }

    /// A card nobody here trusts yet.
    private func nobodyCard() throws -> String {
        if let stranger { return stranger }
        let card = try User().initialize("stranger").card()
        stranger = card
        return card
    }

    private var stranger: String?
    /// Held for as long as the cases run.
    private var listeners: [LoopbackListener] = []
}

/// A TCP listener on loopback: it holds its port (so `vault serve` cannot bind it) and,
/// when `resetting`, resets every connection it accepts, as a program other than vault
/// might.
final class LoopbackListener: @unchecked Sendable {
    let port: UInt16
    private let fd: Int32

    init(resetting: Bool) throws {
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        fd = listening
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, length) == 0 && getsockname(listening, $0, &length) == 0 }
        }
        guard bound, listen(listening, 16) == 0 else {
            close(listening)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        port = UInt16(bigEndian: address.sin_port)
        guard resetting else { return }
        Thread {
            while true {
                let connection = accept(listening, nil, nil)
                if connection < 0 { return }
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                usleep(50_000)
                close(connection)
            }
        }.start()
    }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
