import ArgumentParser
import Foundation
import VaultCore
import VaultNet

struct KeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Create shared encryption keys, and keep their items in sync.",
        subcommands: [KeyCreate.self, KeySync.self])
}

struct KeyCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a random 32-byte key and share it, as 'vault share --type key' does.",
        discussion: """
            The key exists whole only while it is being shared; afterwards each holder keeps one \
            share. 'vault unlock NAME' recovers it into the agent of 'vault serve'; items are then \
            encrypted with it ('vault item add --key NAME').
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("A local, public name for the key.", valueName: "name"))
    var name: String

    @Option(help: ArgumentHelp("The holders besides you: trusted peers' labels, comma-separated.", valueName: "labels"), completion: Completions.peers)
    var to: String

    @Option(name: [.customShort("k"), .long], help: ArgumentHelp("How many holders' pieces rebuild the key.", valueName: "k"))
    var threshold: Int

    @Option(help: ArgumentHelp("Public text stored in the clear in every bundle.", valueName: "text"))
    var description: String = ""

    @Option(help: ArgumentHelp("Write the other holders' bundles into this directory instead of delivering them.", valueName: "dir"))
    var outDir: String?

    @OptionGroup var reach: PeerAddressOptions

    @OptionGroup var sync: KeySyncOptions

    func run() async throws {
        // A group is checked before anything is shared.
        let group = try sync.group.map { try home.openKeystore().group(named: $0) }
        var arguments = ["--type", "key", "--name", name, "--to", to, "--threshold", String(threshold), "--description", description]
        if let home = home.home { arguments += ["--home", home] }
        if let file = keys.passphraseFile { arguments += ["--passphrase-file", file] }
        if let file = keys.pinFile { arguments += ["--pin-file", file] }
        if let outDir { arguments += ["--out-dir", outDir] }
        arguments += reach.peers.flatMap { ["--peer", $0] }
        let share = try Share.parse(arguments)
        // The keys opened for the share tie the key to its group: the passphrase is asked once.
        try await share.share { [name, sync] keystore, identity in
            guard let group else { return }
            try await sync.tie(try keystore.sharedKey(matching: name), group: group.name.value, keystore: keystore, identity: identity)
        }
    }
}

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List shared keys.",
        subcommands: [KeysList.self],
        defaultSubcommand: KeysList.self)
}

struct KeysList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the shared keys you hold a share of: id, name, description, lock state, items.")

    @OptionGroup var home: HomeOption

    @Flag(help: "Print JSON.")
    var json = false

    struct Entry: Encodable {
        let keyID: String
        let name: String?
        let description: String
        let unlockedUntil: Date?
        let items: Int
        let secretID: String
        let threshold: Int
        let holders: Int
    }

    func run() async throws {
        let keystore = try home.openKeystore()
        let held = try keystore.sharedKeys()
        let agent = await AgentClient.connect(home: keystore.home)
        let unlocked = try await agent?.status() ?? []
        let entries = held.map { key in
            Entry(keyID: key.keyID.hex, name: key.secret.name, description: key.secret.header.description,
                  unlockedUntil: unlocked.first { $0.keyID == key.keyID }?.until, items: key.itemCount,
                  secretID: key.secret.header.secretIDHex, threshold: key.secret.header.threshold, holders: key.secret.header.count)
        }
        if json { return try printJSON(entries) }
        guard !entries.isEmpty else {
            return Terminal.standardError("no shared keys yet; 'vault key create NAME --to LABELS -k K' makes one")
        }
        if agent == nil { Terminal.standardError("no 'vault serve' runs for this keystore: every key is locked") }
        let time = DateFormatter()
        time.dateFormat = "yyyy-MM-dd HH:mm"
        for entry in entries {
            let state = entry.unlockedUntil.map { "unlocked until \(time.string(from: $0))" } ?? "locked"
            print("\(entry.keyID.prefix(16))  \(entry.name ?? "-")  \(state)  \(entry.items) item\(entry.items == 1 ? "" : "s")"
                + "  \(entry.threshold) of \(entry.holders)" + (entry.description.isEmpty ? "" : "  \(TerminalText.escaped(entry.description))"))
        }
    }
}

struct Unlock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Recover a shared key from nearby holders and hand it to the agent of 'vault serve'.",
        discussion: """
            The serve recovers it, with the identity it opened when it started: no passphrase is \
            asked. Until then the key exists nowhere whole. The agent keeps it in locked memory until the \
            time runs out, 'vault lock', or serve stops, and then zeroes it. It never hands the key \
            out: commands get only the key of the one item they open.
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The key's name or id.", valueName: "name"), completion: Completions.secret)
    var key: String

    @Option(name: .customLong("for"), help: ArgumentHelp("How long it stays unlocked: 90s, 15m, 2h (at most 24h).", valueName: "time"))
    var duration: String = "15m"

    @OptionGroup var recovery: KeyRecoveryOptions

    func run() async throws {
        let seconds = try parseDuration(duration)
        let keystore = try home.openKeystore()
        let holding = try keystore.sharedKey(matching: key)
        guard let agent = await AgentClient.connect(home: keystore.home) else { throw CLIError.noAgent }
        try recovery.checkNoDealer()
        // The serve's identity recovers it (no passphrase asked here), and its agent keeps
        // it: the key never crosses the socket. A password layer is read here, first.
        let password = holding.secret.header.passwordProtected ? try recovery.keyPassword(for: holding)() : nil
        let until = try await agent.recover(keyID: holding.keyID, seconds: seconds, password: password, options: recovery.agentOptions,
                                            line: Terminal.standardError)
        Terminal.standardError("unlocked key '\(holding.displayName)' until \(ISO8601DateFormatter().string(from: until))")
        // Items that a sync stored while the key was locked are opened now.
        var problems: [String] = []
        let opened = await SyncRun.openUnopened(keystore: keystore, only: holding.keyID, problems: &problems)
        for problem in problems { Terminal.standardError("vault: warning: \(problem)") }
        if opened > 0 { Terminal.standardError("opened \(opened) item\(opened == 1 ? "" : "s") received while the key was locked") }
    }
}

struct Lock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Make the agent forget a shared key now, or every key.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The key's name or id (default: every key).", valueName: "name"), completion: Completions.secret)
    var key: String?

    func run() async throws {
        let keystore = try home.openKeystore()
        let holding = try key.map { try keystore.sharedKey(matching: $0) }
        guard let agent = await AgentClient.connect(home: keystore.home) else { throw CLIError.noAgent }
        let count = try await agent.lock(keyID: holding?.keyID)
        if let holding {
            Terminal.standardError(count == 0 ? "key '\(holding.displayName)' was not unlocked" : "locked key '\(holding.displayName)'")
        } else {
            Terminal.standardError("locked \(count) key\(count == 1 ? "" : "s")")
        }
    }
}

/// `90s`, `15m`, `2h` or plain seconds, from 1 s to the agent's maximum.
func parseDuration(_ text: String) throws -> UInt32 {
    let units: [Character: UInt32] = ["s": 1, "m": 60, "h": 3600]
    var digits = Substring(text), unit: UInt32 = 1
    if let last = text.last, let scale = units[last] {
        digits = text.dropLast()
        unit = scale
    }
    guard let value = UInt32(digits), value > 0, value <= AgentLimits.maximumSeconds / unit else {
        throw ValidationError("--for takes a time such as 90s, 15m or 2h, at most 24h")
    }
    return value * unit
}
