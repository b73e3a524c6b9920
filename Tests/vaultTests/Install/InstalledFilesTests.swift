import Foundation
import Testing
import VaultTestSupport

/// Issue 19: what scripts/install puts under a prefix works with the tools that read it.
/// One install, shared by these checks, which only read it.
@Suite struct InstalledFilesTests {
    static let shared = Result(catching: { () throws -> Installation in
        let installation = try Installation()
        try installation.install(["--prefix", installation.directory.file("usr/local")])
        return installation
    })

    let installation: Installation
    let prefix: String

    init() throws {
        installation = try Self.shared.get()
        prefix = installation.directory.file("usr/local")
    }

    func text(_ path: String) throws -> String { try String(contentsOfFile: prefix + "/" + path, encoding: .utf8) }

    @Test func theInstalledBinaryRuns() throws {
        let installed = try installation.run(prefix + "/bin/vault", ["--version"])
        let built = try VaultBinary(home: "/nonexistent").run("--version")
        #expect(installed.status == 0 && installed.stdout == built.stdout && !built.stdout.isEmpty, "\(installed.stderr)")
    }

    @Test func everyCommandHasAPageThatManRenders() throws {
        let pages = try FileManager.default.contentsOfDirectory(atPath: prefix + "/share/man/man1")
        let expected = try commandPaths().map { $0.joined(separator: ".") + ".1" }
        #expect(expected.count > 40)
        #expect(Set(pages) == Set(expected))
        // Every page, rendered by man with groff's warnings on: none may warn or come out empty.
        for page in expected {
            let rendered = try installation.run("/usr/bin/man", ["--warnings", "-l", prefix + "/share/man/man1/" + page],
                                                environment: ["MANPAGER": "cat", "MANWIDTH": "80", "LC_ALL": "C.UTF-8"])
            #expect(rendered.status == 0 && rendered.stderr.isEmpty && rendered.stdout.contains("NAME"), "\(page): \(rendered.stderr)")
            // A help text never shows a backslash (a Swift "\\" where "\" continued the line).
            #expect(!rendered.stdout.contains("\\"), "\(page): a backslash in \(rendered.stdout)")
        }
        let top = try installation.run("/usr/bin/man", ["-l", prefix + "/share/man/man1/vault.1"], environment: ["MANPAGER": "cat"])
        #expect(top.stdout.contains("vault.share(1)") && top.stdout.contains("vault.serve(1)"), "\(top.stdout)")
        let serve = try installation.run("/usr/bin/man", ["-l", prefix + "/share/man/man1/vault.serve.1"], environment: ["MANPAGER": "cat"])
        #expect(serve.stdout.contains("--listen"), "\(serve.stdout)")
    }

    @Test func completionsLoadInBashZshAndFish() throws {
        let bash = prefix + "/share/bash-completion/completions/vault"
        let zsh = prefix + "/share/zsh/site-functions/_vault"
        let fish = prefix + "/share/fish/vendor_completions.d/vault.fish"
        for (shell, file) in [("/bin/bash", bash), ("/usr/bin/zsh", zsh), ("/usr/bin/fish", fish)] {
            let checked = try installation.run(shell, ["-n", file])
            #expect(checked.status == 0 && checked.stderr.isEmpty, "\(shell) -n \(file): \(checked.stderr)")
        }
        let registered = try installation.run("/bin/bash", ["-c", "source \"$0\" && complete -p vault", bash])
        #expect(registered.stdout.contains("-F _vault vault"), "\(registered.stdout) \(registered.stderr)")
        #expect(try text("share/zsh/site-functions/_vault").hasPrefix("#compdef vault\n"))
        // fish completes a subcommand from the installed script (which runs the installed binary).
        let offered = try installation.run("/usr/bin/fish", ["-c", "source $argv[1]; complete -C 'vault sh'", fish],
                                           environment: ["PATH": prefix + "/bin:/usr/bin:/bin"])
        #expect(offered.stdout.hasPrefix("share\t"), "\(offered.stdout) \(offered.stderr)")
    }

    /// Issue 32: completion offers what the keystore names, not only commands: peer labels
    /// (the last item of a list too), secrets by name and id, groups and relays.
    @Test func completionsOfferWhatTheKeystoreNames() throws {
        let alice = try User("alice").initialize("alice")
        for label in ["bob", "carol"] {
            let other = try User(label).initialize(label)
            try alice.ok("peer", "add", try other.card(), "--label", label, "--yes")
        }
        let id = try alice.ok(["share", "-", "--to", "bob", "-k", "2", "--name", "garden", "--out-dir", alice.directory.file("out")], stdin: "x")
        // As bash calls the installed script's function for the word under the cursor (fish
        // and zsh call the same `vault ---completion` back; fish cannot outside a terminal).
        let script = """
            source "$1"
            COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}
            read -ra COMP_WORDS <<< "$COMP_LINE"
            [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
            COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            _vault vault "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        func offered(_ line: String) throws -> [String] {
            let result = try installation.run("/bin/bash", ["-c", script, "complete", prefix + "/share/bash-completion/completions/vault", line],
                                              environment: ["PATH": prefix + "/bin:/usr/bin:/bin", "VAULT_HOME": alice.vault.home])
            return result.stdout.split(separator: "\n").map(String.init)
        }
        let peer = try offered("vault peer show c"), listed = try offered("vault share - --to bob,")
        #expect(peer == ["carol"])
        #expect(listed == ["bob,carol"])
        // A name that no hex id can start with: "d" would also offer an id that starts with d.
        let named = try offered("vault recover g")
        #expect(named == ["garden"])
        let byID = try offered("vault recover \(id.prefix(3))")
        #expect(byID.contains(String(id.prefix(16))))
    }

    @Test func theServiceUnitVerifiesAndIsHardened() throws {
        let unit = prefix + "/lib/systemd/user/vault-serve.service"
        let runtime = installation.directory.file("runtime")
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // MANPATH: verify also checks that Documentation= names a page that man finds.
        let verified = try installation.run("/usr/bin/systemd-analyze", ["--user", "verify", unit],
                                            environment: ["XDG_RUNTIME_DIR": runtime, "MANPATH": prefix + "/share/man"])
        // systemd-analyze exits 0 on a setting it cannot parse, so any output fails too.
        #expect(verified.status == 0 && verified.stderr.isEmpty && verified.stdout.isEmpty, "\(verified.stderr)\(verified.stdout)")
        let lines = Set(try text("lib/systemd/user/vault-serve.service").split(separator: "\n").map(String.init))
        #expect(lines.contains("ExecStart=\(prefix)/bin/vault serve"))
        for setting in ["NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes", "LockPersonality=yes",
                        "MemoryDenyWriteExecute=yes", "ReadWritePaths=-%h/.local/share/vault",
                        "Environment=VAULT_HOME=%h/.local/share/vault"] {
            #expect(lines.contains(setting), "missing \(setting)")
        }
    }

    /// The unit fixes VAULT_HOME to %h/.local/share/vault: that must stay the directory the
    /// binary itself uses when neither VAULT_HOME nor XDG_DATA_HOME is set.
    @Test func theUnitsKeystoreIsTheBinarysDefault() throws {
        let home = installation.directory.file("default-home")
        let created = try installation.run(prefix + "/bin/vault", ["init", "--label", "svc", "--no-passphrase"], environment: ["HOME": home])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(FileManager.default.fileExists(atPath: home + "/.local/share/vault/vault.sqlite"))
    }

    @Test func theDesktopEntryValidatesAndRunsTheInstalledBinary() throws {
        let entry = prefix + "/share/applications/vault-url.desktop"
        let validated = try installation.run("/usr/bin/desktop-file-validate", [entry])
        #expect(validated.status == 0 && validated.stdout.isEmpty && validated.stderr.isEmpty, "\(validated.stdout)\(validated.stderr)")
        let lines = try text("share/applications/vault-url.desktop").split(separator: "\n").map(String.init)
        #expect(lines.contains("Exec=\(prefix)/bin/vault url --open %u"))
        #expect(lines.contains("MimeType=x-scheme-handler/vault;") && lines.contains("Terminal=true"))
    }
}
