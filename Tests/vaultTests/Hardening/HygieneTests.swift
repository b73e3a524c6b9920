import Foundation
import Testing
import VaultCore
import VaultTestSupport

/// Secret hygiene: no plaintext at rest or in temporary files, none in error messages or
/// logs, and no way for another process of the same user to read a running vault's memory.
@Suite struct HygieneTests {
    /// Every file under `directory` that contains `marker`.
    static func files(under directory: String, containing marker: String) -> [String] {
        let needle = Data(marker.utf8)
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var found: [String] = []
        while let relative = enumerator?.nextObject() as? String {
            let path = directory + "/" + relative
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            if data.range(of: needle) != nil { found.append(path) }
        }
        return found
    }

    static func marker(_ name: String) -> String { "MARKER-\(name)-\(UUID().uuidString)" }

    @Test func noPlaintextAtRestOrInTemporaryFiles() throws {
        let temporary = TemporaryDirectory("vault-tmpdir")
        let holders = try SharedKeyTests.Holders(["alice", "bob"], serving: [])
        for label in ["alice", "bob"] { holders[label].vault.environment["TMPDIR"] = temporary.path }
        try holders.start("bob")
        defer { holders.stopAll() }
        let outside = TemporaryDirectory("vault-outside")
        let secret = Self.marker("share"), item = Self.marker("item"), file = Self.marker("file")

        // share and recover, over the LAN and offline
        let id = Self.id(try holders.ok("alice", ["share", "-", "--to", "bob", "-k", "2"], stdin: secret + "\n"))
        #expect(try holders.ok("alice", ["recover", id]) == secret + "\n")
        try holders.ok("alice", ["recover", id, "-o", outside.file("recovered")])
        // item add and show, with the key recovered per command
        try holders.ok("alice", ["key", "create", "family", "--to", "bob", "-k", "2"])
        let note = Self.id(try holders.ok("alice", ["item", "add", "--key", "family"], stdin: item))
        let input = try outside.write("input.bin", Data((file + "\n").utf8))
        let blob = Self.id(try holders.ok("alice", ["item", "add", "--key", "family", input]))
        #expect(try holders.ok("alice", ["item", "show", note]) == item)
        try holders.ok("alice", ["item", "show", blob, "-o", outside.file("shown.bin")])
        #expect(FileManager.default.contents(atPath: outside.file("shown.bin")) == Data((file + "\n").utf8))
        try holders.ok("alice", ["item", "export", note, "--armor", "-o", outside.file("note.asc")])
        try holders.start("alice")
        try holders.ok("bob", ["item", "import", outside.file("note.asc"), "--yes"])
        #expect(try holders.ok("bob", ["item", "show", note]) == item)

        for marker in [secret, item, file] {
            for directory in [holders["alice"].vault.home, holders["bob"].vault.home, temporary.path] {
                #expect(Self.files(under: directory, containing: marker).isEmpty, "\(marker) found under \(directory)")
            }
        }
    }

    @Test func errorsAndLogsNeverCarrySecrets() throws {
        let holders = try SharedKeyTests.Holders(["alice", "bob"], serving: ["bob"])
        defer { holders.stopAll() }
        let files = holders.circle.files
        let secret = Self.marker("secret"), password = Self.marker("password"), wrong = Self.marker("wrong")
        var stderr = ""
        func failing(_ label: String, _ arguments: [String], stdin: String = "") throws {
            let result = try holders.run(label, arguments, stdin: stdin)
            #expect(result.status != 0, "vault \(arguments.joined(separator: " ")) succeeded")
            stderr += result.stderr + result.stdout
        }
        let right = try files.write("right", Data((password + "\n").utf8))
        let bad = try files.write("bad", Data((wrong + "\n").utf8))
        let id = Self.id(try holders.ok("alice", ["share", "-", "--to", "bob", "-k", "2", "--password-file", right], stdin: secret))
        try failing("alice", ["recover", id, "--password-file", bad])
        try failing("alice", ["recover", id, "--password-file", bad, "-o", files.file("out")])
        // a share that cannot be delivered
        let undelivered = try holders["alice"].vault.run(["share", "-", "--to", "bob", "-k", "2", "--peer", "bob=127.0.0.1:1"],
                                                         stdin: Array(secret.utf8))
        #expect(undelivered.status == 1)
        stderr += undelivered.stderr
        // a passphrase-protected identity opened with the wrong passphrase
        let carol = try User().initialize("carol", "--passphrase-file", right)
        let refused = try carol.vault.run(["passphrase", "--passphrase-file", bad, "--remove"])
        #expect(refused.status != 0)
        stderr += refused.stderr
        // items and URL requests that fail
        try holders.ok("alice", ["key", "create", "family", "--to", "bob", "-k", "2"])
        try failing("alice", ["item", "add", "--key", "nokey"], stdin: secret)
        try failing("alice", ["item", "add", "--key", "family", "--password-file", files.file("missing")], stdin: secret)
        let url = CallbackURL.appending([("plaintext", secret), ("key", "nokey"), ("x-error", "a://e")], to: "vault://x-callback-url/encrypt")
        try failing("alice", ["url", "-"], stdin: url)
        let withPassword = CallbackURL.appending([("plaintext", secret), ("key", "family"), ("addPassword", "1")], to: "vault://x-callback-url/encrypt")
        try failing("alice", ["url", "-"], stdin: withPassword)

        stderr += holders.servers["bob"]!.process.log
        #expect(!stderr.isEmpty)
        for marker in [secret, password, wrong] {
            #expect(!stderr.contains(marker), "\(marker) leaked: \(stderr)")
        }
    }

    /// `vault serve` runs non-dumpable with no core limit: another process of the same user
    /// can neither attach to it nor read /proc/PID/mem. Shown by running it as an ordinary
    /// user, whose /proc files the kernel then gives to root.
    @Test func serveIsNotDumpable() throws {
        guard getuid() == 0 else { return }  // needs another uid to run as, as CI has
        let directory = TemporaryDirectory("vault-nobody")
        chown(directory.path, 65534, 65534)
        let environment = ["VAULT_HOME": directory.file("home"), "PATH": "/usr/bin:/bin"]
        let setpriv = ["--reuid=65534", "--regid=65534", "--clear-groups", VaultBinary.path]
        let initialized = try ProcessRunner.run("/usr/bin/setpriv", setpriv + ["init", "--label", "nobody", "--no-passphrase"], environment: environment)
        #expect(initialized.status == 0, "\(initialized.stderr)")
        let serve = try BackgroundProcess("/usr/bin/setpriv", setpriv + ["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"],
                                          environment: environment, logPath: directory.file("serve.log"))
        defer { serve.stop() }
        try serve.waitFor("listening on")
        var info = stat()
        #expect(stat("/proc/\(serve.pid)/mem", &info) == 0)
        #expect(info.st_uid == 0, "a dumpable process's /proc files belong to its own uid")
        let limits = try String(contentsOfFile: "/proc/\(serve.pid)/limits", encoding: .utf8)
        #expect(limits.split(separator: "\n").contains { $0.hasPrefix("Max core file size") && $0.split(separator: " ").contains("0") })
        // A process of the same user is refused.
        let reader = try ProcessRunner.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/cat",
                                                                "/proc/\(serve.pid)/environ"])
        #expect(reader.status != 0 && reader.stderr.contains("Permission denied"), "\(reader.stdout)\(reader.stderr)")
    }

    static func id(_ output: String) -> String { output.trimmingCharacters(in: .whitespacesAndNewlines) }
}
