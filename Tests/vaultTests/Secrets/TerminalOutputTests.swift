import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// Issue 32: what a secret holds reaches a terminal only as text that cannot drive it (L1),
/// a file's bytes never do (item 4), a file is saved under its own name made safe (L3),
/// and a note typed on the terminal is asked for in words (item 5).
@Suite struct TerminalOutputTests {
    /// No escape character, and no carriage return but before a line feed (the terminal
    /// writes each line feed as CR LF).
    static func inert(_ transcript: String) -> Bool {
        !transcript.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" || $0 == "\u{9B}" || $0 == "\u{202E}" }
            && !transcript.replacingOccurrences(of: "\r\r\n", with: "").replacingOccurrences(of: "\r\n", with: "").contains("\r")
    }

    /// Runs `vault ARGUMENTS` in `directory`, without a terminal.
    static func run(_ user: User, in directory: String, _ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run("/bin/sh", ["-c", "cd \"$1\" || exit 9; shift; exec \"$0\" \"$@\"", VaultBinary.path, directory] + arguments,
                              environment: user.vault.childEnvironment)
    }

    @Test func aRecoveredFileIsRefusedOnATerminalAndSavedUnderItsOwnSafeName() throws {
        let circle = try Circle(["alice", "bob"])
        let hostile = circle.files.file("invoice\u{202E}fdp\u{200B}.sh")
        try Data([0x00, 0x1B, 0x5B, 0x32, 0x4A, 0xFF, 0x0A]).write(to: URL(fileURLWithPath: hostile))
        let id = try circle.share(from: "alice", [hostile, "--to", "bob", "-k", "2"])
        let piece = try circle.release(id, from: "alice", to: "bob")
        // A one-character name (Foundation's path functions trap on those).
        let short = circle.files.file("x")
        try Data("x marks the spot".utf8).write(to: URL(fileURLWithPath: short))
        let second = try circle.share(from: "alice", [short, "--to", "bob", "-k", "2"])
        let piece2 = try circle.release(second, from: "alice", to: "bob")
        let bob = circle["bob"]
        let passphrase = try circle.files.write("bob-passphrase", Array("a long passphrase\n".utf8))
        try bob.ok("passphrase", "--new-passphrase-file", passphrase)

        // Refused before anything is asked, gathered or written: no passphrase prompt.
        let session = try bob.vault.atPrompt(["recover", id, "--piece", piece])
        let refused = session.finish(within: 10)
        session.readRest()
        #expect(refused.status == 1 && refused.stderr.contains("is a file, not text, and standard output is a terminal"), "\(refused.stderr)")
        #expect(refused.stderr.contains("vault: hint: save it under its own name with 'vault recover \(id) --save', or write it with -o FILE"))
        #expect(session.transcript.isEmpty, "\(session.transcript.debugDescription)")

        // --save: the name without its bidi and zero-width characters, never over a file.
        let here = circle.files.file("saved")
        try FileManager.default.createDirectory(atPath: here, withIntermediateDirectories: true)
        let saved = try Self.run(bob, in: here, ["recover", id, "--piece", piece, "--save", "--passphrase-file", passphrase])
        #expect(saved.status == 0 && saved.stdout.isEmpty, "\(saved.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: here) == ["invoicefdp.sh"])
        #expect(FileManager.default.contents(atPath: here + "/invoicefdp.sh") == Data([0x00, 0x1B, 0x5B, 0x32, 0x4A, 0xFF, 0x0A]))
        #expect(saved.stderr.contains("into invoicefdp.sh"), "\(saved.stderr)")
        let again = try Self.run(bob, in: here, ["recover", id, "--piece", piece, "-O", "--passphrase-file", passphrase])
        #expect(again.status == 1 && again.stderr.contains("invoicefdp.sh already exists"), "\(again.stderr)")
        #expect(FileManager.default.contents(atPath: here + "/invoicefdp.sh") == Data([0x00, 0x1B, 0x5B, 0x32, 0x4A, 0xFF, 0x0A]))

        #expect(try Self.run(bob, in: here, ["recover", second, "--piece", piece2, "--save", "--passphrase-file", passphrase]).status == 0)
        #expect(FileManager.default.contents(atPath: here + "/x") == Data("x marks the spot".utf8))

        // Through a pipe the bytes are exact; -o - asks for standard output even on a terminal.
        let piped = try bob.vault.run(["recover", id, "--piece", piece, "--passphrase-file", passphrase])
        #expect(piped.stdoutBytes == [0x00, 0x1B, 0x5B, 0x32, 0x4A, 0xFF, 0x0A])
        let forced = try bob.vault.atPrompt(["recover", id, "--piece", piece, "-o", "-", "--passphrase-file", passphrase])
        #expect(forced.finish().status == 0)
        forced.readRest()
        #expect(forced.transcript.hasPrefix("\\0\\u{1B}[2J\\x{FF}\r\n") && Self.inert(forced.transcript), "\(forced.transcript.debugDescription)")
    }

    /// A note, a password and a contact's fields on a terminal show their control characters
    /// escaped (a clipboard write, a link, a screen clear, a carriage return); through a pipe
    /// every byte is as it was shared.
    @Test func notesPasswordsAndContactsAreEscapedOnATerminalAndExactThroughAPipe() throws {
        let circle = try Circle(["alice", "bob"])
        let note = "copy\u{1B}]52;c;cm0gLXJmIH4=\u{07} \u{1B}]8;;https://evil.example\u{1B}\\bank\u{1B}]8;;\u{1B}\\ \u{1B}[2J\u{9B}0m\rYou owe nothing\r\nend\n"
        let path = try circle.files.write("note", Array(note.utf8))
        let contact = circle.files.file("contact")
        try Data("call after 6\u{1B}[8m\n".utf8).write(to: URL(fileURLWithPath: contact))
        let shares = [
            (try circle.share(from: "alice", ["--type", "note", path, "--to", "bob", "-k", "2"]),
             "copy\\u{1B}]52;c;cm0gLXJmIH4=\\u{07} \\u{1B}]8;;https://evil.example\\u{1B}\\bank\\u{1B}]8;;\\u{1B}\\ \\u{1B}[2J\\u{009B}0m\\rYou owe nothing\r\r\nend\r\n"),
            (try circle.share(from: "alice", ["--type", "password", try circle.files.write("pw", Array("hunter\u{1B}[8m2\n".utf8)),
                                              "--username", "bob\u{1B}[31m", "--to", "bob", "-k", "2"]),
             "hunter\\u{1B}[8m2\r\n"),
            (try circle.share(from: "alice", ["--type", "contact", contact, "--contact-name", "Eve\u{1B}[2J", "--phone", "+1\u{9B}5",
                                              "--email", "e@x\u{202E}moc.", "--address", "1 Main St\nTown", "--to", "bob", "-k", "2"]),
             "name: Eve\\u{1B}[2J\r\nphone: +1\\u{009B}5\r\nemail: e@x\\u{202E}moc.\r\naddress: 1 Main St\\nTown\r\ncall after 6\\u{1B}[8m\r\n"),
        ]
        let exact = [Array(note.utf8), Array("hunter\u{1B}[8m2\n".utf8),
                     Array("name: Eve\u{1B}[2J\nphone: +1\u{9B}5\nemail: e@x\u{202E}moc.\naddress: 1 Main St\nTown\ncall after 6\u{1B}[8m\n".utf8)]
        for ((id, shown), bytes) in zip(shares, exact) {
            let piece = try circle.release(id, from: "alice", to: "bob")
            let session = try circle["bob"].vault.atPrompt(["recover", id, "--piece", piece])
            let result = session.finish()
            session.readRest()
            #expect(result.status == 0, "\(result.stderr)")
            #expect(session.transcript == shown, "\(session.transcript.debugDescription)")
            #expect(Self.inert(session.transcript) && Self.inert(result.stderr), "\(result.stderr.debugDescription)")
            #expect(try circle["bob"].vault.run(["recover", id, "--piece", piece]).stdoutBytes == bytes)
        }
    }

    /// Content reaches the terminal 64 KiB at a time: escapes and UTF-8 characters cut by a
    /// chunk's end come out as when whole.
    @Test func escapingHoldsAcrossChunks() throws {
        let circle = try Circle(["alice", "bob"])
        let unit = "é\u{1B}]52;c;x\u{07}日👩‍👧"
        let count = 200_000 / unit.utf8.count
        let path = try circle.files.write("long", Array((String(repeating: unit, count: count) + "END").utf8))
        let id = try circle.share(from: "alice", ["--type", "note", path, "--to", "bob", "-k", "2"])
        let piece = try circle.release(id, from: "alice", to: "bob")
        let session = try circle["bob"].vault.atPrompt(["recover", id, "--piece", piece])
        try session.expect("END")
        #expect(session.finish().status == 0)
        #expect(session.transcript == String(repeating: "é\\u{1B}]52;c;x\\u{07}日👩‍👧", count: count) + "END")
    }

    /// A note typed on the terminal is asked for, with how to end it, and no progress line
    /// is drawn over the typing; the same for every command that reads a note from stdin.
    @Test func aNoteTypedOnTheTerminalIsAskedForWithoutAProgressLine() throws {
        let circle = try Circle(["alice", "bob"])
        let out = circle.files.file("typed")
        let session = try TerminalSession("/bin/sh", ["-c", "exec \"$0\" \"$@\" </dev/tty", VaultBinary.path,
                                                      "share", "--to", "bob", "-k", "2", "--out-dir", out],
                                          environment: circle["alice"].vault.childEnvironment, standardErrorOnTerminal: true)
        try session.expect("Type the note, then press Ctrl-D at the start of a line:", timeout: 10)
        // The old line appeared after half a second of waiting for input.
        usleep(1_200_000)
        session.send("meet at the old mill")
        session.sendEndOfInput()
        let result = session.finish()
        #expect(result.status == 0, "\(session.transcript)")
        #expect(!session.transcript.contains("sharing"), "\(session.transcript.debugDescription)")
        let id = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try circle["bob"].ok("secrets", "import", "--yes", out + "/bob.vshare")
        let piece = try circle.release(id, from: "alice", to: "bob")
        #expect(try circle["bob"].ok("recover", id, "--piece", piece) == "meet at the old mill\n")
    }

    /// A group member's note and a link's note reach bob's terminal escaped; a received
    /// file's name loses its bidi and zero-width characters; a missing --out-dir is created.
    @Test func receivedNotesAreEscapedAndReceivedNamesAreSafe() throws {
        let world = try RelayWorld()
        let sent = try world.alice.vault.run(["send", "--group", "team", "-"], stdin: Array("paste this\u{1B}]52;c;cm0gLXJmIH4=\u{07}\n".utf8))
        #expect(sent.status == 0, "\(sent.stderr)")
        let session = try world.bob.vault.atPrompt(["receive"])
        try session.expect("paste this")
        #expect(session.finish().status == 0)
        session.readRest()
        #expect(session.transcript == "paste this\\u{1B}]52;c;cm0gLXJmIH4=\\u{07}\r\n", "\(session.transcript.debugDescription)")

        let file = world.alice.directory.file("invoice\u{202E}fdp\u{2066}.sh")
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: file))
        try world.alice.ok("send", file, "--group", "team")
        let out = world.bob.directory.file("inbox/new")
        let received = try world.bob.vault.run(["receive", "--out-dir", out])
        #expect(received.status == 0 && received.stderr.contains("created directory \(world.bob.directory.file("inbox")) (mode 0700)"),
                "\(received.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: out) == ["invoicefdp.sh"])
    }

    @Test func aLinksNoteIsEscapedOnATerminalAndItsFileNameIsSafe() throws {
        let world = try LinkWorld()
        let link = try world.create(["--views", "2"], stdin: "bank\u{1B}]8;;https://evil.example\u{1B}\\here\u{1B}]8;;\u{1B}\\\n")
        let session = try world.reader.vault.atPrompt(["link", "open", link])
        try session.expect("bank")
        #expect(session.finish().status == 0)
        session.readRest()
        #expect(session.transcript == "bank\\u{1B}]8;;https://evil.example\\u{1B}\\here\\u{1B}]8;;\\u{1B}\\\r\n", "\(session.transcript.debugDescription)")
        #expect(try world.reader.vault.run(["link", "open", link]).stdout.contains("\u{1B}]8;;https://evil.example"))

        let file = world.alice.directory.file("pass\u{200B}port\u{202E}fdp.exe")
        try Data("MZ".utf8).write(to: URL(fileURLWithPath: file))
        let fileLink = try world.create([file])
        let here = world.reader.directory.file("downloads")
        try FileManager.default.createDirectory(atPath: here, withIntermediateDirectories: true)
        #expect(try Self.run(world.reader, in: here, ["link", "open", fileLink]).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: here) == ["passportfdp.exe"])
    }

    @Test func anItemsNoteIsEscapedOnATerminal() throws {
        let h = try SharedKeyTests.Holders(["alice", "bob", "carol"], serving: ["bob", "carol"])
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "2"])
        let item = SharedKeyTests.id(try h.ok("alice", ["item", "add", "--key", "family"], stdin: "door\u{1B}[2J\u{1B}[Hcode 4711\n"))
        let arguments = ["item", "show", item]
        let session = try h["alice"].vault.atPrompt(arguments + h.reach(from: "alice", for: arguments))
        try session.expect("code 4711")
        #expect(session.finish().status == 0)
        session.readRest()
        #expect(session.transcript == "door\\u{1B}[2J\\u{1B}[Hcode 4711\r\n", "\(session.transcript.debugDescription)")
        #expect(try h.ok("alice", arguments) == "door\u{1B}[2J\u{1B}[Hcode 4711\n")
    }
}
