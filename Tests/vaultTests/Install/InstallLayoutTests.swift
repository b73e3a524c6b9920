import Foundation
import Testing
import VaultTestSupport

/// Issue 19: where scripts/install puts things for each kind of install, and that
/// `--uninstall` takes away exactly what it put there.
@Suite struct InstallLayoutTests {
    @Test func uninstallRemovesExactlyWhatWasInstalled() throws {
        let installation = try Installation()
        let root = installation.directory.path, prefix = installation.directory.file("usr/local")
        // Files of others in directories the install shares: they must survive it.
        try FileManager.default.createDirectory(atPath: prefix + "/share/man/man1", withIntermediateDirectories: true)
        try installation.directory.write("usr/local/share/man/man1/other.1", Data("other\n".utf8))
        try installation.directory.write("usr/local/bin-other", Data())
        let before = Installation.tree(root)

        try installation.install(["--prefix", prefix])
        // Installing again replaces the first install and lists the same files.
        let manifestPath = prefix + "/share/vault/install-manifest"
        let first = try String(contentsOfFile: manifestPath, encoding: .utf8)
        try installation.install(["--prefix", prefix])
        let manifest = try String(contentsOfFile: manifestPath, encoding: .utf8)
        #expect(manifest == first)

        let listed = manifest.split(separator: "\n").map(String.init)
        #expect(listed.allSatisfy { $0.hasPrefix(root + "/") })
        let added = Installation.tree(root).subtracting(before).map { root + "/" + $0 }
        // The manifest lists every file and directory the install made, and nothing else.
        #expect(Set(listed + [manifestPath]) == Set(added))
        #expect(listed.contains(prefix + "/bin/vault") && listed.contains(prefix + "/share/man/man1/vault.1"))
        #expect(!listed.contains(prefix + "/share/man/man1/") && !listed.contains(prefix + "/share/man/man1/other.1"))

        try installation.install(["--prefix", prefix, "--uninstall"])
        #expect(Installation.tree(root) == before)
        let again = try ProcessRunner.run("/bin/bash", [Installation.script, "--prefix", prefix, "--uninstall"],
                                          environment: installation.environment)
        #expect(again.status == 1 && again.stderr.contains("nothing to uninstall"), "\(again.stderr)")
    }

    @Test func userInstallGoesWhereEachToolLooksAndUninstalls() throws {
        let installation = try Installation()
        let home = installation.home
        try installation.install(["--user"])
        for file in [".local/bin/vault", ".local/share/man/man1/vault.1", ".local/share/man/man1/vault.serve.1",
                     ".local/share/bash-completion/completions/vault", ".local/share/zsh/site-functions/_vault",
                     ".config/fish/completions/vault.fish", ".config/systemd/user/vault-serve.service",
                     ".local/share/applications/vault-url.desktop", ".local/state/vault/install-manifest"] {
            #expect(FileManager.default.fileExists(atPath: home + "/" + file), "missing ~/\(file)")
        }
        let unit = try String(contentsOfFile: home + "/.config/systemd/user/vault-serve.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=\(home)/.local/bin/vault serve\n"))
        let entry = try String(contentsOfFile: home + "/.local/share/applications/vault-url.desktop", encoding: .utf8)
        #expect(entry.contains("\nExec=\(home)/.local/bin/vault url --open %u\n"))
        // The keystore's directory is not the install's: ~/.local/share/vault stays untouched.
        #expect(!FileManager.default.fileExists(atPath: home + "/.local/share/vault"))

        try installation.install(["--user", "--uninstall"])
        #expect(Installation.tree(home).isEmpty, "left: \(Installation.tree(home).sorted())")
    }

    /// What scripts/package uses: files staged under --destdir with the paths of the final
    /// prefix inside them, and no manifest (the package manager keeps the list).
    @Test func destdirStagesForThePrefixWithoutAManifest() throws {
        let installation = try Installation()
        let stage = installation.directory.file("stage")
        try installation.install(["--destdir", stage, "--prefix", "/usr"])
        for file in ["usr/bin/vault", "usr/share/man/man1/vault.1", "usr/share/bash-completion/completions/vault",
                     "usr/share/zsh/vendor-completions/_vault", "usr/share/fish/vendor_completions.d/vault.fish",
                     "usr/lib/systemd/user/vault-serve.service", "usr/share/applications/vault-url.desktop"] {
            #expect(FileManager.default.fileExists(atPath: stage + "/" + file), "missing \(file)")
        }
        #expect(!Installation.tree(stage).contains { $0.hasSuffix("install-manifest") })
        let entry = try String(contentsOfFile: stage + "/usr/share/applications/vault-url.desktop", encoding: .utf8)
        #expect(entry.contains("\nExec=/usr/bin/vault url --open %u\n"))
        let unit = try String(contentsOfFile: stage + "/usr/lib/systemd/user/vault-serve.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=/usr/bin/vault serve\n"))
        #expect(Installation.tree(installation.home).isEmpty)
    }

    /// Issue 32: installing a given binary needs no Swift toolchain and builds nothing: the
    /// man pages come from the tree.
    @Test func aGivenBinaryInstallsWithoutAToolchain() throws {
        let installation = try Installation()
        let prefix = installation.directory.file("usr/local")
        var environment = installation.environment
        environment["PATH"] = "/usr/local/bin:/usr/bin:/bin"
        let withoutSwift = try ProcessRunner.run("/bin/bash", ["-c", "command -v swift"], environment: environment)
        #expect(withoutSwift.status != 0, "swift is on \(environment["PATH"]!): \(withoutSwift.stdout)")
        let result = try ProcessRunner.run("/bin/bash", [Installation.script, "--prefix", prefix, "--binary", VaultBinary.path],
                                           environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stderr.contains("building"), "\(result.stderr)")
        let page = try String(contentsOfFile: prefix + "/share/man/man1/vault.share.1", encoding: .utf8)
        #expect(page.contains("threshold"))
    }

    /// The pages in Docs/man are what generate-manual makes of this binary's help: a command
    /// or option changed without `scripts/man` fails here.
    @Test func theManPagesInTheTreeMatchTheBinary() throws {
        guard Installation.manualToolBuilt else { throw Installation.Failure("generate-manual is not built: run scripts/test, which builds it") }
        let script = ForeignNoiseTests.root.appendingPathComponent("scripts/man").path
        let result = try ProcessRunner.run("/bin/bash", [script, "--check", "--binary", VaultBinary.path])
        #expect(result.status == 0, "\(result.stderr)")
    }
}
