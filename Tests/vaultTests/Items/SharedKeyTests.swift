import Foundation
import Testing
import VaultTestSupport

/// Shared keys, the agent and items, end to end: holders run `vault serve` on loopback.
@Suite struct SharedKeyTests {
    /// A circle with `vault serve` running for `serving`; `reach` addresses them all.
    final class Holders {
        let circle: Circle
        var servers: [String: (process: BackgroundProcess, address: String)] = [:]

        init(_ labels: [String], serving: [String], autoRelease: Bool = true) throws {
            circle = try Circle(labels, autoRelease: autoRelease)
            for label in serving { try start(label) }
        }

        func start(_ label: String, _ extra: [String] = []) throws {
            let process = try circle[label].vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"] + extra,
                                                             log: circle.files.file("\(label)-\(UUID().uuidString).log"))
            let port = try process.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
            try process.waitFor("agent listening on")
            servers[label] = (process, "127.0.0.1:\(port)")
        }

        subscript(_ label: String) -> User { circle[label] }

        /// `--peer` for every running server but `label`'s own, for the commands that reach
        /// holders.
        func reach(from label: String, for arguments: [String]) -> [String] {
            let reaches = ["key", "unlock", "scan", "reshare", "share", "recover"].contains(arguments[0])
                || (arguments[0] == "item" && ["add", "show", "copy", "import"].contains(arguments[1]))
            guard reaches else { return [] }
            return servers.filter { $0.key != label }.flatMap { ["--peer", "\($0.key)=\($0.value.address)"] }
        }

        func run(_ label: String, _ arguments: [String], stdin: String = "") throws -> ProcessResult {
            try circle[label].vault.run(arguments + reach(from: label, for: arguments), stdin: Array(stdin.utf8))
        }

        /// Runs a command that must succeed; returns stdout.
        @discardableResult
        func ok(_ label: String, _ arguments: [String], stdin: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
            let result = try run(label, arguments, stdin: stdin)
            #expect(result.status == 0, "\(label): vault \(arguments.joined(separator: " ")): \(result.stderr)", sourceLocation: sourceLocation)
            return result.stdout
        }

        func fails(_ label: String, _ arguments: [String], stdin: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
            try circle[label].fails(arguments + reach(from: label, for: arguments), stdin: stdin, sourceLocation: sourceLocation)
        }

        func stopAll() { servers.values.forEach { $0.process.stop() } }
    }

    static func id(_ output: String) -> String { output.trimmingCharacters(in: .whitespacesAndNewlines) }

    @Test func unlocksAddsEveryTypeAndLocks() throws {
        let h = try Holders(["alice", "bob", "carol"], serving: ["alice", "bob", "carol"])
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "2", "--description", "for the family"])
        #expect(try h.ok("alice", ["keys", "list"]).contains("family  locked  0 items  2 of 3  for the family"))

        // serve runs, so a locked key is an error, not a silent recovery.
        let locked = try h.fails("alice", ["item", "add", "--key", "family"], stdin: "too early")
        #expect(locked.contains("key 'family' is locked") && locked.contains("vault unlock family"))

        try h.ok("alice", ["unlock", "family", "--for", "10m"])
        #expect(try h.ok("alice", ["keys", "list"]).contains("family  unlocked until "))
        try h.servers["alice"]!.process.waitFor("agent: key [0-9a-f]{16} unlocked for 600 s")

        let files = h.circle.files
        let binary = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) }
        let file = try files.write("data.bin", binary)
        let photo = try files.write("photo.png", [0x89, 0x50, 0x4E, 0x47] + binary.prefix(5000))
        let note = Self.id(try h.ok("alice", ["item", "add", "--key", "family", "--title", "groceries"], stdin: "milk\neggs\n"))
        let fileItem = Self.id(try h.ok("alice", ["item", "add", "--key", "family", file, "--description", "a blob"]))
        let password = Self.id(try h.ok("alice", ["item", "add", "--key", "family", "--type", "password", "-", "--username", "ann",
                                                  "--url", "https://example.org"], stdin: "s3cret\n"))
        let contact = Self.id(try h.ok("alice", ["item", "add", "--key", "family", "--type", "contact", "-", "--contact-name", "Ann Lee",
                                                 "--phone", "+1 555 0100", "--email", "ann@example.org"], stdin: "met at the fair\n"))
        let photoItem = Self.id(try h.ok("alice", ["item", "add", "--key", "family", "--type", "photo", photo, "--title", "the cat"]))

        let list = try JSONSerialization.jsonObject(with: Data(try h.ok("alice", ["item", "list", "--json"]).utf8)) as! [[String: Any]]
        #expect(Set(list.map { $0["type"] as! String }) == ["note", "file", "password", "contact", "photo"])
        #expect(list.first { $0["id"] as? String == fileItem }?["size"] as? Int == 200_000)
        #expect(list.allSatisfy { $0["key"] as? String == "family" && $0["new"] as? Bool == false })
        #expect(try h.ok("alice", ["keys", "list"]).contains("5 items"))

        #expect(try h.ok("alice", ["item", "show", note]) == "milk\neggs\n")
        let shown = try h.run("alice", ["item", "show", password])
        #expect(shown.stdout == "s3cret\n" && shown.stderr.contains("username: ann") && shown.stderr.contains("url: https://example.org"))
        #expect(try h.ok("alice", ["item", "show", contact])
                == "name: Ann Lee\nphone: +1 555 0100\nemail: ann@example.org\nmet at the fair\n")
        let notText = try h.fails("alice", ["item", "show", photoItem])
        #expect(notText.contains("is a photo, not text") && notText.contains("-o FILE"))
        try h.ok("alice", ["item", "show", fileItem, "-o", files.file("out.bin")])
        #expect(FileManager.default.contents(atPath: files.file("out.bin")) == Data(binary))
        #expect(try h.run("alice", ["item", "show", photoItem, "-o", "-"]).stdout.utf8.count > 0)

        // After lock, show fails until the next unlock.
        #expect(try h.ok("alice", ["lock", "family"]).isEmpty)
        #expect(try h.fails("alice", ["item", "show", note]).contains("key 'family' is locked"))
        // Time enough for the show on a loaded machine.
        try h.ok("alice", ["unlock", "family", "--for", "8s"])
        #expect(try h.ok("alice", ["item", "show", note]) == "milk\neggs\n")
        // The agent forgets the key when its time runs out.
        try h.servers["alice"]!.process.waitFor("locked \\(its time ran out\\)", timeout: 15)
        #expect(try h.fails("alice", ["item", "show", note]).contains("is locked"))
        #expect(try h.ok("alice", ["keys", "list"]).contains("family  locked"))
    }

    @Test func exportsAndImportsBetweenHolders() throws {
        let h = try Holders(["alice", "bob", "carol", "dave"], serving: ["bob", "carol"])
        defer { h.stopAll() }
        let key = Self.id(try h.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "2"]))
        // No serve for alice: the key is recovered for this one command.
        let added = try h.run("alice", ["item", "add", "--key", "family", "--title", "wifi"], stdin: "password: hunter2\n")
        #expect(added.status == 0 && added.stderr.contains("recovering key 'family' from its holders"), "\(added.stderr)")
        let item = Self.id(added.stdout)
        let files = h.circle.files
        try h.ok("alice", ["item", "export", item, "-o", files.file("wifi.vitem")])
        try h.ok("alice", ["item", "export", item, "--armor", "-o", files.file("wifi.asc")])
        let armor = try String(contentsOfFile: files.file("wifi.asc"), encoding: .utf8)
        let lines = armor.split(separator: "\n")
        #expect(lines.first == "-----BEGIN VAULT ITEM-----" && lines.last == "-----END VAULT ITEM-----")
        #expect(lines.dropFirst().dropLast().dropLast().allSatisfy { $0.count == 64 })
        #expect(!armor.contains("hunter2"))

        // Bob's serve runs an agent, and his key is locked: asking first, and no terminal here.
        let asks = try h.fails("bob", ["item", "import", files.file("wifi.vitem")])
        #expect(asks.contains("needs confirmation"))
        let imported = try h.run("bob", ["item", "import", files.file("wifi.vitem"), "--yes"])
        #expect(imported.status == 0 && imported.stderr.contains("unlocked key"), "\(imported.stderr)")
        #expect(try h.ok("bob", ["item", "list"]).contains("  new"))
        // Names are local: Bob names the key he received, and uses the name.
        try h.ok("bob", ["secrets", "rename", String(key.prefix(8)), "home"])
        #expect(try h.ok("bob", ["keys", "list"]).contains("\(key.prefix(16))  home  unlocked until"))
        try h.ok("bob", ["share", "-", "--name", "taken", "--to", "carol", "-k", "2", "--out-dir", h.circle.files.path], stdin: "x")
        #expect(try h.fails("bob", ["secrets", "rename", "home", "Taken"]).contains("a secret named 'Taken' exists already"))
        #expect(try h.ok("bob", ["item", "show", item]) == "password: hunter2\n")
        #expect(!(try h.ok("bob", ["item", "list"]).contains("  new")))

        // Carol takes the armored form from standard input.
        let armored = try h.run("carol", ["item", "import", "-", "--yes"], stdin: armor.replacingOccurrences(of: "\n", with: "\r\n"))
        #expect(armored.status == 0, "\(armored.stderr)")
        #expect(try h.ok("carol", ["item", "show", item]) == "password: hunter2\n")

        // Refusals, each with its own error; nothing is stored.
        #expect(try h.fails("carol", ["item", "import", files.file("wifi.asc"), "--yes"]).contains("already holds item"))
        try h.ok("carol", ["item", "rm", item, "--yes"])
        var bytes = [UInt8](FileManager.default.contents(atPath: files.file("wifi.vitem"))!)
        bytes[bytes.count - 20] ^= 1
        let tampered = try files.write("tampered.vitem", bytes)
        #expect(try h.fails("carol", ["item", "import", tampered, "--yes"]).contains("does not open under its key"))
        bytes[bytes.count - 20] ^= 1
        let cut = try files.write("cut.vitem", bytes.dropLast(30))
        #expect(try h.fails("carol", ["item", "import", cut, "--yes"]).contains("is truncated"))
        let cutArmor = try files.write("cut.asc", Data(armor.utf8.dropLast(30)))
        #expect(try h.fails("carol", ["item", "import", cutArmor, "--yes"]).contains("no END line"))
        // With the key locked, a damaged file is refused before its holders are asked.
        try h.ok("carol", ["lock"])
        for (file, refusal) in [(cut, "is truncated"), (cutArmor, "no END line"), (tampered + ".long", "bytes follow its stream")] {
            if file.hasSuffix(".long") { _ = try files.write("tampered.vitem.long", bytes + [0]) }
            let refused = try h.fails("carol", ["item", "import", file, "--yes"])
            #expect(refused.contains(refusal) && !refused.contains("recovering") && !refused.contains("unlocked"), "\(refused)")
        }
        #expect(try h.ok("carol", ["keys", "list"]).contains("locked"))
        var joined = lines.map(String.init)
        joined[1] += joined.remove(at: 2)
        let wide = try files.write("wide.asc", Data((joined.joined(separator: "\n") + "\n").utf8))
        #expect(try h.fails("carol", ["item", "import", wide, "--yes"]).contains("not a vault item"))
        let notDaves = try h.fails("dave", ["item", "import", files.file("wifi.vitem"), "--yes"])
        #expect(notDaves.contains("\(files.file("wifi.vitem")): you hold no share of key \(key.prefix(32)), which encrypts this item"), "\(notDaves)")
        #expect(try h.fails("dave", ["item", "import", "/etc/hostname"]).contains("not a vault item"))
    }

    @Test func qrItemsAndScannedCards() throws {
        let h = try Holders(["alice", "bob", "carol"], serving: ["bob", "carol"])
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "2"])
        let item = Self.id(try h.ok("alice", ["item", "add", "--key", "family"], stdin: "door code 4711\n"))
        let png = h.circle.files.file("item.png")
        try h.ok("alice", ["item", "export", item, "--png", png])
        // libzbar's own tool reads it back as the item's QR text.
        let decoded = try ProcessRunner.run("/usr/bin/zbarimg", ["-q", "--raw", png])
        #expect(decoded.stdout.hasPrefix("VAULTITEM1"))
        let scanned = try h.run("bob", ["scan", "--image", png, "--yes"])
        #expect(scanned.status == 0 && scanned.stderr.contains("imported note"), "\(scanned.stderr)")
        #expect(try h.ok("bob", ["item", "show", item]) == "door code 4711\n")
        // The text a phone's scanner produced works as well.
        try h.ok("carol", ["scan", "-", "--yes"], stdin: decoded.stdout)
        #expect(try h.ok("carol", ["item", "show", item]) == "door code 4711\n")

        let big = Self.id(try h.ok("alice", ["item", "add", "--key", "family"], stdin: String(repeating: "x", count: 300)))
        let refused = try h.fails("alice", ["item", "export", big, "--qr"])
        #expect(refused.contains("300 bytes; a QR code carries at most 256") && refused.contains("vault item export"))

        // A key card's PNG is offered as a peer, as 'peer add' does.
        let dave = try User().initialize("dave")
        let card = h.circle.files.file("bob-card.png")
        try h["bob"].ok("id", "--png", card)
        try dave.ok("scan", "--image", card, "--yes")
        #expect(try dave.ok("peer", "list").contains("bob"))
        #expect(try dave.fails("scan", "--image", card, "--yes").contains("already trusted"))
    }

    @Test func copiesAnItemToAnotherKey() throws {
        let h = try Holders(["alice", "bob", "carol"], serving: ["alice", "bob", "carol"])
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "2"])
        let work = Self.id(try h.ok("alice", ["key", "create", "work", "--to", "carol", "-k", "2"]))
        try h.ok("alice", ["unlock", "family"])
        let item = Self.id(try h.ok("alice", ["item", "add", "--key", "family"], stdin: "shared twice\n"))
        #expect(try h.fails("alice", ["item", "copy", item, "--to-key", "work"]).contains("key 'work' is locked"))
        try h.ok("alice", ["unlock", "work"])
        let copy = Self.id(try h.ok("alice", ["item", "copy", item, "--to-key", "work"]))
        #expect(copy != item)
        #expect(try h.ok("alice", ["item", "show", copy]) == "shared twice\n")
        // Bob holds a share of family only: the copy, under work, is not his to open.
        try h.ok("alice", ["item", "export", copy, "-o", h.circle.files.file("copy.vitem")])
        #expect(try h.fails("bob", ["item", "import", h.circle.files.file("copy.vitem"), "--yes"]).contains("no share of key \(work.prefix(16))"))
        let imported = try h.run("carol", ["item", "import", h.circle.files.file("copy.vitem"), "--yes"])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try h.ok("carol", ["item", "show", copy]) == "shared twice\n")
    }

    /// Even with the keystore directory and the socket opened to everyone, the agent answers
    /// only its own uid (SO_PEERCRED).
    @Test func agentRefusesOtherUsers() throws {
        guard getuid() == 0 else { return }  // switching to another uid needs root, as CI has
        let h = try Holders(["alice", "bob"], serving: ["alice"])
        defer { h.stopAll() }
        let home = h["alice"].vault.home
        let socket = home + "/agent.sock"
        let attributes = try FileManager.default.attributesOfItem(atPath: socket)
        #expect((attributes[.posixPermissions] as! Int) & 0o777 == 0o600)
        for path in [h["alice"].directory.path, home] { chmod(path, 0o755) }
        chmod(socket, 0o666)
        let probe = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
            try:
                s.sendall(bytes([0, 1, 4]))
                answer = s.recv(100)
            except (ConnectionResetError, BrokenPipeError):  # closed unread (or before the send): no answer either way
                answer = b""
            print("answer", len(answer))
            """
        let stranger = try ProcessRunner.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                                  "/usr/bin/python3", "-c", probe, socket])
        #expect(stranger.stdout == "answer 0\n", "\(stranger.stdout)\(stranger.stderr)")
        try h.servers["alice"]!.process.waitFor("agent: refused a connection from uid 65534")
        let owner = try ProcessRunner.run("/usr/bin/python3", ["-c", probe, socket])
        #expect(owner.stdout == "answer 4\n", "\(owner.stderr)")  // length 2, status ok, no keys
    }

    @Test func reshareHandsTheKeyToNewHolders() throws {
        let h = try Holders(["alice", "bob", "carol", "dave"], serving: ["bob", "carol", "dave"])
        defer { h.stopAll() }
        let old = Self.id(try h.ok("alice", ["key", "create", "family", "--to", "bob,carol", "-k", "3"]))
        let item = Self.id(try h.ok("alice", ["item", "add", "--key", "family"], stdin: "old item\n"))
        try h.ok("alice", ["item", "export", item, "-o", h.circle.files.file("old.vitem")])
        #expect(try h.fails("dave", ["item", "import", h.circle.files.file("old.vitem"), "--yes"]).contains("no share of key"))

        let reshared = try h.run("alice", ["reshare", "family", "--to", "dave", "-k", "2"])
        #expect(reshared.status == 0, "\(reshared.stderr)")
        #expect(reshared.stderr.contains("dave: delivered") && reshared.stderr.contains("old shares stay valid"))
        let new = Self.id(reshared.stdout)
        #expect(new != old)
        let show = try h.ok("alice", ["secrets", "show", "family"])
        #expect(show.contains(new) && show.contains("replaces") && show.contains(old))

        // The new set (alice, dave) opens the old item; bob and carol are not needed.
        h.servers["bob"]!.process.stop()
        h.servers["carol"]!.process.stop()
        try h.start("alice")
        let imported = try h.run("dave", ["item", "import", h.circle.files.file("old.vitem"), "--yes"])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try h.ok("dave", ["item", "show", item]) == "old item\n")

        // --rotate: a new key value, and alice's items re-encrypted under it.
        h.servers["alice"]!.process.stop()
        let rotated = try h.run("alice", ["reshare", "family", "--rotate", "--to", "dave", "-k", "2"])
        #expect(rotated.status == 0 && rotated.stderr.contains("re-encrypted 1 item"), "\(rotated.stderr)")
        let items = try JSONSerialization.jsonObject(with: Data(try h.ok("alice", ["item", "list", "--json"]).utf8)) as! [[String: Any]]
        #expect(items.count == 1 && items[0]["id"] as? String != item && items[0]["keyID"] as? String == Self.id(rotated.stdout))
        #expect(try h.ok("alice", ["item", "show", items[0]["id"] as! String]) == "old item\n")
    }

    @Test func removingTheLastShareOfAKeyRemovesItsItems() throws {
        let h = try Holders(["alice", "bob"], serving: ["bob"])
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob", "-k", "2"])
        try h.ok("alice", ["item", "add", "--key", "family"], stdin: "one\n")
        try h.ok("alice", ["item", "add", "--key", "family"], stdin: "two\n")
        #expect(try h.fails("alice", ["secrets", "rm", "family"]).contains("needs confirmation"))
        let removed = try h.run("alice", ["secrets", "rm", "family", "--yes"])
        #expect(removed.status == 0 && removed.stderr.contains("and the 2 items of its key"), "\(removed.stderr)")
        let left = try JSONSerialization.jsonObject(with: Data(try h.ok("alice", ["item", "list", "--json"]).utf8)) as! [Any]
        #expect(left.isEmpty)
    }

    @Test func itemsCanCarryAPasswordLayer() throws {
        let h = try Holders(["alice", "bob"], serving: ["alice", "bob"])
        defer { h.stopAll() }
        try h.ok("alice", ["key", "create", "family", "--to", "bob", "-k", "2"])
        try h.ok("alice", ["unlock", "family"])
        let right = try h.circle.files.write("right", Data("open sesame\n".utf8))
        let wrong = try h.circle.files.write("wrong", Data("open barley\n".utf8))
        let item = Self.id(try h.ok("alice", ["item", "add", "--key", "family", "--password-file", right], stdin: "inner secret\n"))
        #expect(try h.ok("alice", ["item", "list"]).contains("note (password)"))
        #expect(try h.fails("alice", ["item", "show", item]).contains("has a password layer and no password was given"))
        #expect(try h.fails("alice", ["item", "show", item, "--password-file", wrong]).contains("wrong password"))
        #expect(try h.ok("alice", ["item", "show", item, "--password-file", right]) == "inner secret\n")
        // The same options as share's, with the same rules.
        for command in [["item", "add", "--key", "family"], ["share", "-", "--to", "bob", "-k", "2"]] {
            #expect(try h["alice"].fails(command + ["--password", "--password-file", right], status: 64).contains("exclude each other"))
            #expect(try h["alice"].fails(command + ["--scrypt-n", "65536"], status: 64).contains("--scrypt-n needs --password"))
        }
    }

    @Test func unlockNeedsServe() throws {
        let alice = try User().initialize("alice")
        let bob = try User().initialize("bob")
        try alice.ok("peer", "add", try bob.card(), "--label", "bob", "--yes")
        try alice.ok("share", "--type", "key", "--name", "k", "--to", "bob", "-k", "2", "--out-dir", alice.directory.path)
        let refused = try alice.fails("unlock", "k")
        #expect(refused.contains("no 'vault serve' runs") && refused.contains("start 'vault serve'"))
        #expect(try alice.fails("lock").contains("no 'vault serve' runs"))
        #expect(try alice.fails("unlock", "nope").contains("no shared key matches 'nope'"))
        try FileManager.default.createDirectory(atPath: alice.directory.file("n"), withIntermediateDirectories: true)
        try alice.ok("share", "-", "--name", "note", "--to", "bob", "-k", "2", "--out-dir", alice.directory.file("n"), stdin: "x")
        #expect(try alice.fails("item", "add", "--key", "note", stdin: "x").contains("'note' is a secret, not a shared key"))
    }
}
