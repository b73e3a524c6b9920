import Foundation
import GRDB
import Testing
import VaultCore
import VaultTestSupport

/// What a SIGKILL leaves behind.
@Suite struct CrashSafetyTests {
    /// The descriptor of `pid` open on an unnamed file in `directory` (O_TMPFILE), once it
    /// has `minimum` bytes.
    static func waitForUnnamedOutput(of pid: pid_t, in directory: String, minimum: Int, timeout: Double = 60) -> Bool {
        let directory = URL(fileURLWithPath: directory).standardizedFileURL.resolvingSymlinksInPath().path
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [] {
                let link = "/proc/\(pid)/fd/\(fd)"
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link),
                      target.hasPrefix(directory + "/"), target.hasSuffix("(deleted)") else { continue }
                var info = stat()
                if stat(link, &info) == 0, info.st_size >= minimum { return true }
            }
            usleep(5_000)
        }
        return false
    }

    /// `recover -o` and `item show -o` killed part way through writing leave no file,
    /// partial or whole, and no temporary file either.
    @Test func killedOutputsLeaveNothing() throws {
        let circle = try Circle(["alice", "bob"])
        let input = circle.files.file("big.bin")
        let file = try OutputFile(path: input)
        var block = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<48 {
            block.withUnsafeMutableBytes { SecureRandom().fill($0) }
            try block.withUnsafeBytes { try file.write($0) }
        }
        try file.commit()
        let out = circle.files.file("bundles")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let id = try circle["alice"].ok("share", input, "--to", "bob", "-k", "2", "--out-dir", out).trimmingCharacters(in: .newlines)
        try circle["bob"].ok("secrets", "import", "--yes", out + "/bob.vshare")
        let piece = circle.files.file("bob-for-alice.vpiece")
        try circle["bob"].ok("secrets", "release", id, "--for", "alice", "-o", piece)

        let target = circle.files.file("target")
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        for round in 0..<3 {
            let recovering = try circle["alice"].vault.background(["recover", id, "--piece", piece, "-o", target + "/out-\(round).bin"],
                                                                 log: circle.files.file("recover-\(round).log"))
            #expect(Self.waitForUnnamedOutput(of: recovering.pid, in: target, minimum: (round + 1) << 20), "\(recovering.log)")
            #expect(recovering.stop(SIGKILL) != 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: target).isEmpty, "round \(round)")
        }
        // Unharmed, it writes the file whole.
        try circle["alice"].ok("recover", id, "--piece", piece, "-o", target + "/out.bin")
        #expect(FileManager.default.contents(atPath: target + "/out.bin") == FileManager.default.contents(atPath: input))
    }
}

/// SIGKILL at random points of `vault serve` receiving deliveries and of `vault secrets
/// import`: after each kill the keystore passes SQLite's integrity check, holds every share
/// whose delivery or import was acknowledged, and every share it holds opens whole.
extension CrashSafetyTests {
    /// SQLite's check of the whole file, after the WAL is replayed as the next vault process
    /// would replay it.
    static func integrity(of user: User) throws -> String {
        let database = try DatabaseQueue.beside(user.vault.home + "/vault.sqlite")
        return try database.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }.joined(separator: "; ")
    }

    /// The ids of the shares `user` holds. Opening the keystore also sweeps transient files.
    static func held(by user: User) throws -> Set<String> {
        let json = try user.ok("secrets", "list", "--json")
        let list = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]] ?? []
        return Set(list.compactMap { $0["id"] as? String })
    }

    /// Checks what a kill may leave: a sound file, the acknowledged shares, every share whole
    /// (its piece opens and matches the dealer's commitment, which `secrets release` checks),
    /// no transient file, and one piece file per share, none without its share. Returns the
    /// ids held.
    static func checkAfterKill(_ user: User, acknowledged: Set<String>, opened: inout Set<String>, released: String,
                               context: String) throws -> Set<String> {
        #expect(try integrity(of: user) == "ok", "\(context)")
        let held = try held(by: user)
        #expect(acknowledged.isSubset(of: held), "acknowledged but missing: \(acknowledged.subtracting(held)), \(context)")
        for id in held.subtracting(opened) {
            let piece = released + "/\(id).vpiece"
            let result = try user.vault.run(["secrets", "release", id, "--for", "alice", "-o", piece])
            #expect(result.status == 0, "share \(id) does not open: \(result.stderr), \(context)")
            try? FileManager.default.removeItem(atPath: piece)
            opened.insert(id)
        }
        let pieces = try FileManager.default.contentsOfDirectory(atPath: user.vault.home + "/pieces")
        let left = try FileManager.default.contentsOfDirectory(atPath: user.vault.home).filter { $0.hasPrefix(".transient-") }
            + pieces.filter { $0.hasPrefix(".transient-") }
        #expect(left.isEmpty, "transient files left: \(left), \(context)")
        let rows = try DatabaseQueue.beside(user.vault.home + "/vault.sqlite").read { db in
            try Data.fetchAll(db, sql: "SELECT id FROM secret").map { $0.map { String(format: "%02x", $0) }.joined() + ".vshare" }
        }
        #expect(Set(pieces.filter { !$0.hasPrefix(".") }) == Set(rows) && rows.count == held.count,
                "piece files \(pieces.sorted()) for rows \(rows.sorted()), \(context)")
        return held
    }

    /// Files of random bytes, 1 KiB to 4 MiB: the larger take long enough to receive and
    /// store that kills land inside the transfer and the transaction.
    static func payloads(in circle: Circle) throws -> [String] {
        try [1 << 10, 1 << 16, 1 << 19, 1 << 21, 1 << 22].map { size in
            var bytes = [UInt8](repeating: 0, count: size)
            bytes.withUnsafeMutableBytes { SecureRandom().fill($0) }
            return try circle.files.write("payload-\(size)", bytes)
        }
    }

    /// Results gathered by the sender thread while the main thread picks the moment to kill.
    final class Deliveries: @unchecked Sendable {
        private let lock = NSLock()
        private var _acknowledged: Set<String> = []
        private var _undelivered: Set<String> = []
        private var _attempts = 0

        var acknowledged: Set<String> { lock.withLock { _acknowledged } }
        var undelivered: Set<String> { lock.withLock { _undelivered } }
        var attempts: Int { lock.withLock { _attempts } }

        /// Records one share or push: its id, and whether the holder acknowledged it.
        func record(_ id: String, acknowledged: Bool) {
            lock.withLock {
                _attempts += 1
                if acknowledged {
                    _acknowledged.insert(id)
                    _undelivered.remove(id)
                } else {
                    _undelivered.insert(id)
                }
            }
        }
    }

    /// A few hundred deliveries to a `vault serve` killed at random moments. Bundles not
    /// acknowledged stay in the dealer's outbox; `secrets push` delivers them once the
    /// server is back, including those stored just before a kill lost their acknowledgement.
    @Test func killedServeKeepsEveryAcknowledgedDelivery() throws {
        let circle = try Circle(["alice", "bob"])
        let alice = circle["alice"], bob = circle["bob"]
        let payloads = try Self.payloads(in: circle)
        let released = circle.files.file("released")
        try FileManager.default.createDirectory(atPath: released, withIntermediateDirectories: true)
        let deliveries = Deliveries()
        var opened: Set<String> = []
        var kills = 0
        var storedUnacknowledged: Set<String> = []

        func serve() throws -> (BackgroundProcess, [String]) {
            let server = try bob.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"],
                                                  log: circle.files.file("serve-\(kills).log"))
            let port = try server.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
            return (server, ["--peer", "bob=127.0.0.1:\(port)"])
        }

        while deliveries.attempts < 240 && kills < 120 {
            let (server, reach) = try serve()
            let done = DispatchSemaphore(value: 0)
            let vault = alice.vault
            let pending = deliveries.undelivered
            DispatchQueue.global().async {
                defer { done.signal() }
                // Pushes first, then new shares, until one fails: the server is gone.
                for id in pending {
                    guard let result = try? vault.run(["secrets", "push", id, "--to", "bob"] + reach) else { return }
                    deliveries.record(id, acknowledged: result.status == 0)
                    if result.status != 0 { return }
                }
                for round in 0... {
                    guard let result = try? vault.run(["share", payloads[round % payloads.count], "--to", "bob", "-k", "2",
                                                       "--type", "file"] + reach) else { return }
                    let id = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                    guard id.count == 32, id.allSatisfy(\.isHexDigit) else { return }
                    deliveries.record(id, acknowledged: result.status == 0)
                    if result.status != 0 { return }
                }
            }
            usleep(UInt32.random(in: 20_000...1_500_000))
            #expect(server.stop(SIGKILL) == 128 + SIGKILL)
            done.wait()
            kills += 1
            let held = try Self.checkAfterKill(bob, acknowledged: deliveries.acknowledged, opened: &opened, released: released,
                                               context: "after kill \(kills), \(deliveries.attempts) deliveries")
            storedUnacknowledged.formUnion(deliveries.undelivered.intersection(held))
        }

        // Back up for good: every bundle still in the outbox is delivered, or found already stored.
        print("crash safety: \(deliveries.attempts) deliveries, \(kills) kills of vault serve, \(storedUnacknowledged.count) stored but not acknowledged")
        let (server, reach) = try serve()
        for id in deliveries.undelivered {
            let result = try alice.vault.run(["secrets", "push", id, "--to", "bob"] + reach)
            #expect(result.status == 0, "\(result.stderr)")
            deliveries.record(id, acknowledged: result.status == 0)
        }
        server.stop()
        #expect(deliveries.undelivered.isEmpty)
        #expect(try Self.held(by: bob) == deliveries.acknowledged)
        #expect(deliveries.attempts >= 240 && kills >= 10, "\(deliveries.attempts) deliveries, \(kills) kills")
    }

    /// Imports of one to three bundles at a time, killed at random moments: each batch is
    /// stored whole or not at all, and one that exited 0 is there.
    @Test func killedImportsStoreWholeBatchesOrNone() throws {
        let holders = ["bob", "carol", "dave"]
        let circle = try Circle(["alice"] + holders)
        let payloads = try Self.payloads(in: circle)
        let released = circle.files.file("released")
        try FileManager.default.createDirectory(atPath: released, withIntermediateDirectories: true)
        var bundles: [String: [(id: String, path: String)]] = [:]
        for round in 0..<60 {
            let id = try circle.share(from: "alice", [payloads[round % payloads.count], "--to", holders.joined(separator: ","),
                                                      "-k", "2", "--type", "file"], import: false)
            for holder in holders { bundles[holder, default: []].append((id, circle.lastOut + "/\(holder).vshare")) }
        }
        var interrupted = 0, imports = 0
        for holder in holders {
            let user = circle[holder]
            var opened: Set<String> = []
            var acknowledged: Set<String> = []
            var queue = bundles[holder]!
            while !queue.isEmpty {
                let batch = Array(queue.prefix(Int.random(in: 1...3)))
                queue.removeFirst(batch.count)
                let ids = Set(batch.map(\.id))
                let importing = try user.vault.background(["secrets", "import", "--yes"] + batch.map(\.path),
                                                          log: circle.files.file("import-\(imports).log"))
                usleep(UInt32.random(in: 0...150_000))
                let status = importing.stop(SIGKILL)
                imports += batch.count
                if status == 0 { acknowledged.formUnion(ids) }
                let context = "\(holder), batch \(ids), status \(status)"
                let held = try Self.checkAfterKill(user, acknowledged: acknowledged, opened: &opened, released: released,
                                                   context: context)
                let stored = ids.intersection(held)
                #expect(stored.isEmpty || stored == ids, "a batch stored in part: \(context)")
                if stored.isEmpty {
                    #expect(status == 128 + SIGKILL, "\(context): \(importing.log)")
                    interrupted += 1
                    try user.ok(["secrets", "import", "--yes"] + batch.map(\.path))
                    acknowledged.formUnion(ids)
                }
            }
            #expect(try Self.held(by: user) == Set(bundles[holder]!.map(\.id)))
        }
        print("crash safety: \(imports) imports, \(interrupted) batches killed before their commit")
        #expect(imports == 180)
        #expect(interrupted >= 10, "too few kills landed before the commit to test anything")
    }

    /// The window a random kill rarely hits, made on purpose: the holder stored the bundle
    /// but the dealer never heard so. The retry is acknowledged, and nothing is stored twice.
    @Test func aStoredButUnacknowledgedDeliveryIsAcknowledgedOnRetry() throws {
        let circle = try Circle(["alice", "bob"])
        let note = try circle.files.write("note.txt", Array("once".utf8))
        // Nobody listens: the bundle waits in alice's outbox.
        let failed = try circle["alice"].vault.run(["share", note, "--to", "bob", "-k", "2", "--peer", "bob=127.0.0.1:1"])
        #expect(failed.status != 0)
        let id = failed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let outbox = circle["alice"].vault.home + "/outbox/\(id)-bob.vshare"
        // Bob stores it (as a server killed before its answer would have).
        try circle["bob"].ok("secrets", "import", "--yes", outbox)
        let server = try circle["bob"].vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"],
                                                        log: circle.files.file("serve.log"))
        let port = try server.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)")
        try circle["alice"].ok("secrets", "push", id, "--to", "bob", "--peer", "bob=127.0.0.1:\(port)")
        #expect(!FileManager.default.fileExists(atPath: outbox))
        try server.waitFor("is already stored")
        #expect(try Self.held(by: circle["bob"]) == [id])
        #expect(server.stop() == 0)
    }

    /// Transient files of a process that is gone are swept by the next command; those of a
    /// running process are left alone.
    @Test func transientFilesOfDeadProcessesAreSwept() throws {
        let user = try User().initialize("alice")
        let gone = try BackgroundProcess("/bin/true", [], environment: [:], logPath: user.directory.file("true.log"))
        #expect(gone.stop() == 0)
        let home = user.vault.home
        try FileManager.default.createDirectory(atPath: home + "/outbox", withIntermediateDirectories: true)
        let dead = [home + "/.transient-\(gone.pid)-A.vshare", home + "/outbox/.transient-\(gone.pid)-B.bob.vshare",
                    home + "/pieces/.transient-\(gone.pid)-D.vshare"]
        let live = [home + "/.transient-\(getpid())-C.vpiece", home + "/.transientish-\(gone.pid)", home + "/notes",
                    home + "/pieces/.transient-\(getpid())-E.vshare"]
        for path in dead + live { #expect(FileManager.default.createFile(atPath: path, contents: Data([1]))) }
        try user.ok("secrets", "list")
        #expect(dead.allSatisfy { !FileManager.default.fileExists(atPath: $0) })
        #expect(live.allSatisfy { FileManager.default.fileExists(atPath: $0) })
    }
}
