import Foundation
import Testing
import VaultTestSupport

/// Resource exhaustion is an ordinary error: a full disk, a read-only one, a missing
/// directory and a file that changes while it is read each give one `vault: error:` line
/// and a hint, a non-zero exit, the keystore as it was, and no partial file.
///
/// The small disks are tmpfs mounts in mount namespaces of the tests' own (root, as CI has).
@Suite(.enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct ResourceTests {
    /// A file of `count` pseudo-random bytes.
    private static func file(_ directory: TemporaryDirectory, _ name: String, count: Int) -> String {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { SeededRandom(seed: name).fill($0) }
        let path = directory.file(name)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return path
    }

    /// Alice shares `count` random bytes with bob, who releases his piece to her: the
    /// secret's file, its id and the piece's file.
    static func sharedWithAPiece(_ c: Circle, count: Int) throws -> (secret: String, id: String, piece: String) {
        let secret = file(c.files, "secret", count: count)
        let id = try c.share(from: "alice", [secret, "--to", "bob", "-k", "2"])
        let piece = c.files.file("piece")
        try c["bob"].ok("secrets", "release", id, "--for", "alice", "-o", piece)
        return (secret, id, piece)
    }

    @Test func outputsOnAFullDisk() throws {
        let c = try Circle(["alice", "bob"])
        let (secret, id, piece) = try Self.sharedWithAPiece(c, count: 300_000)

        let disk = try SmallDisk(kibibytes: 512)
        try disk.fill()
        let (alice, bob) = (c["alice"], c["bob"])
        (alice.vault, bob.vault) = (alice.vault.inside(disk), bob.vault.inside(disk))
        for (user, arguments) in [
            (alice, ["share", secret, "--to", "bob", "-k", "2", "--out-dir", disk.path]),
            (alice, ["recover", id, "--piece", piece, "-o", disk.path + "/secret"]),
            (bob, ["secrets", "release", id, "--for", "alice", "-o", disk.path + "/piece"]),
            (alice, ["id", "--png", disk.path + "/card.png"]),
        ] {
            let stderr = try user.fails(arguments)
            #expect(stderr.contains("No space left on device") && stderr.contains("vault: hint: free some space"), "\(stderr)")
            #expect(disk.names().isEmpty, "\(arguments[0]) left \(disk.names())")
        }
        // The keystores still work: nothing was half stored.
        #expect(try alice.ok("secrets", "list").contains(String(id.prefix(16))))
    }

    @Test func keystoreOnAFullDisk() throws {
        let c = try Circle(["alice", "bob"])
        let disk = try SmallDisk(kibibytes: 4096)
        let carol = User()
        carol.vault = VaultBinary(home: disk.path + "/home").inside(disk)
        try carol.initialize("carol")
        try carol.ok("peer", "add", try c["alice"].card(), "--label", "alice", "--yes")
        try carol.ok("secrets", "auto-release", "--for", "alice")
        try c["alice"].ok("peer", "add", try carol.card(), "--label", "carol", "--yes")
        let secret = Self.file(c.files, "secret", count: 1 << 20)
        let out = c.files.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try c["alice"].ok("share", secret, "--to", "carol", "-k", "2", "--out-dir", out)
        let server = try carol.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"], log: c.files.file("carol.log"))
        defer { server.stop() }
        let port = try server.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
        try disk.fill(leaving: 64 << 10)

        // Importing, sharing (the own share and the outbox live in the keystore's directory).
        let imported = try carol.fails("secrets", "import", "--yes", out + "/carol.vshare")
        #expect(imported.contains("disk is full") || imported.contains("No space left on device"), "\(imported)")
        #expect(imported.contains("vault: hint: free some"), "\(imported)")
        let shared = try carol.fails("share", secret, "--to", "alice", "-k", "2", "--peer", "alice=127.0.0.1:9")
        #expect(shared.contains("the vault directory") && shared.contains("No space left on device"), "\(shared)")
        #expect(!shared.contains(".transient"), "internal file names stay inside: \(shared)")

        // A delivery to carol's serve is refused in words; serve goes on, and stores nothing.
        let before = carol.vault.keystoreBytes()
        let delivered = try c["alice"].vault.run(["share", secret, "--to", "carol", "-k", "2", "--peer", "carol=127.0.0.1:\(port)"])
        #expect(delivered.status == 1 && delivered.stderr.contains("carol: "), "\(delivered.stderr)")
        #expect(delivered.stderr.contains("No space left on device") || delivered.stderr.contains("disk is full"), "\(delivered.stderr)")
        #expect(carol.vault.keystoreBytes() == before)
        try carol.ok("secrets", "list")
        #expect(disk.names(in: disk.path + "/home").allSatisfy { $0.hasPrefix("vault.sqlite") || ["outbox", "pieces", "agent.sock", "serve.lock"].contains($0) },
                "\(disk.names(in: disk.path + "/home"))")
        #expect(disk.names(in: disk.path + "/home/outbox").isEmpty)
        #expect(disk.names(in: disk.path + "/home/pieces").isEmpty, "no share stored, no piece file left")
        #expect(try ProcessRunner.run("/bin/kill", ["-0", String(server.pid)]).status == 0, "serve still runs")
    }

    @Test func itemsOnAFullDisk() throws {
        let h = try SharedKeyTests.Holders(["alice", "bob", "carol"], serving: ["bob", "carol"])
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "2"])
        let item = SharedKeyTests.id(try h.ok("alice", ["item", "add", "--key", "family", "--title", "wifi"], stdin: "password: hunter2\n"))
        // Exported and shown onto a full disk.
        let disk = try SmallDisk(kibibytes: 8192)
        let alice = h["alice"]
        let home = alice.vault
        alice.vault = home.inside(disk)
        try disk.fill()
        for arguments in [["item", "export", item, "-o", disk.path + "/wifi.vitem"],
                          ["item", "show", item, "-o", disk.path + "/wifi.txt"] + h.reach(from: "alice", for: ["item", "show"])] {
            let stderr = try alice.fails(arguments)
            #expect(stderr.contains("No space left on device") && stderr.contains("vault: hint: free some space"), "\(stderr)")
        }
        #expect(disk.names().isEmpty)
        // Added to a keystore on a disk with too little room.
        #expect(unlink(disk.outside(disk.path + "/filler")) == 0)
        // Space held by what a refused command had open comes back when it is gone; on a
        // loaded machine that may be a moment after the command was reaped.
        for _ in 0..<100 where disk.available < 4 << 20 { usleep(50_000) }
        #expect(disk.available >= 4 << 20, "\(disk.available) bytes free after the filler went")
        try FileManager.default.copyItem(atPath: home.home, toPath: disk.outside(disk.path + "/home"))
        alice.vault = VaultBinary(home: disk.path + "/home").inside(disk)
        let photo = Self.file(h.circle.files, "photo", count: 1 << 20)
        try disk.fill(leaving: 64 << 10)
        let added = try alice.fails(["item", "add", "--key", "family", "--type", "file", photo] + h.reach(from: "alice", for: ["item", "add"]))
        #expect(added.contains("disk is full") && added.contains("vault: hint: free some"), "\(added)")
        #expect(try alice.ok("item", "list").contains(String(item.prefix(16))))
        #expect(disk.names(in: disk.path + "/home").allSatisfy { $0.hasPrefix("vault.sqlite") || $0 == "outbox" || $0 == "pieces" },
                "\(disk.names(in: disk.path + "/home"))")
        #expect(disk.names(in: disk.path + "/home/pieces").allSatisfy { !$0.hasPrefix(".") }, "\(disk.names(in: disk.path + "/home/pieces"))")
    }

    @Test func aReadOnlyDiskAndMissingDirectories() throws {
        let c = try Circle(["alice", "bob"])
        let (secret, id, piece) = try Self.sharedWithAPiece(c, count: 10_000)
        let disk = try SmallDisk(kibibytes: 256, readOnly: true)
        let alice = c["alice"]
        alice.vault = alice.vault.inside(disk)
        for arguments in [["share", secret, "--to", "bob", "-k", "2", "--out-dir", disk.path],
                          ["recover", id, "--piece", piece, "-o", disk.path + "/secret"]] {
            let stderr = try alice.fails(arguments)
            #expect(stderr.contains("Read-only file system") && stderr.contains("vault: hint: that file system is read-only"), "\(stderr)")
        }
        // A missing --out-dir is created (issue 32, InputFileTests.aMissingOutDirIsCreated).
        let missing = c.files.file("no/such/dir")
        for arguments in [["recover", id, "--piece", piece, "-o", missing + "/secret"],
                          ["share", missing + "/file", "--to", "bob", "-k", "2", "--out-dir", c.files.path]] {
            let stderr = try alice.fails(arguments)
            #expect(stderr.contains(missing) && stderr.contains("No such file or directory") && stderr.contains("vault: hint: check the path"),
                    "\(stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: c.files.file("no")))
    }

    /// A keystore on a read-only file system cannot even be read (SQLite's log and index
    /// beside it are written): said with its directory and what it needs.
    @Test func aKeystoreOnAReadOnlyDisk() throws {
        let c = try Circle(["alice", "bob"])
        let disk = try SmallDisk(kibibytes: 8192, readOnly: true, prepare: "cp -a '\(c["alice"].vault.home)' home")
        let stuck = VaultBinary(home: disk.path + "/home").inside(disk)
        let result = try stuck.run(["peer", "list"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("vault: error: cannot open or write the keystore in \(disk.path)/home: "), "\(result.stderr)")
        #expect(result.stderr.contains("vault: hint: vault writes its keystore's directory even to read it"), "\(result.stderr)")
    }

    @Test func aFileThatShrinksWhileItIsRead() throws {
        let c = try Circle(["alice", "bob"])
        // Sparse, so that it costs no disk, and large, so that the share is still reading it
        // when it is stopped (a 64 MiB file was sometimes read whole first).
        let secret = c.files.file("big")
        #expect(FileManager.default.createFile(atPath: secret, contents: nil) && truncate(secret, 1 << 30) == 0)
        let out = c.files.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let before = c["alice"].vault.keystoreBytes()
        // Stopped as soon as it has the file open, cut short, then let go: whatever it had
        // read by then, the rest is not the file it opened.
        let share = try c["alice"].vault.background(["share", secret, "--to", "bob", "-k", "2", "--out-dir", out],
                                                    log: c.files.file("share.log"))
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !Self.holdsOpen(share.pid, secret) { usleep(500) }
        kill(share.pid, SIGSTOP)
        #expect(Self.holdsOpen(share.pid, secret))
        #expect(truncate(secret, 1 << 20) == 0)
        kill(share.pid, SIGCONT)
        #expect(share.wait() != 0)
        #expect(share.log.contains("vault: error: \(secret): it changed size while it was being read"), "\(share.log)")
        #expect(c["alice"].vault.keystoreBytes() == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty)
    }

    /// Whether process `pid` has `path` open.
    private static func holdsOpen(_ pid: pid_t, _ path: String) -> Bool {
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return fds.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == target }
    }
}
