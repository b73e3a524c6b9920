import ArgumentParser
import Foundation
import VaultCore
import VaultNet
import VaultRelayClient

struct Share: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Encrypt a secret and split it among trusted holders.",
        discussion: """
            The secret is encrypted under a fresh key; the key is split with Shamir's scheme and \
            the ciphertext dispersed so that any K of the holders' pieces rebuild it. You are \
            always one of the holders: n is the number of --to peers plus one, and your own share \
            stays in your keystore. Each other holder gets one sealed, signed bundle: delivered \
            over an encrypted channel to its 'vault serve' (at the address stored with the peer, \
            or given with --peer); else, or with --group, through the relays of a group you and \
            that holder are both members of, where the holder is asked before keeping it; or \
            written to --out-dir as LABEL.vshare. 'vault secrets show' says where each went. \
            With --emergency, a trusted person you name may recover the secret alone after a \
            wait, unless you deny it meanwhile (see 'vault secrets emergency').
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The file to share, or - for standard input (default for notes).", valueName: "file"))
    var file: String?

    @Option(help: ArgumentHelp("The holders besides you: trusted peers' labels, comma-separated.", valueName: "labels"), completion: Completions.peers)
    var to: String

    @Option(name: [.customShort("k"), .long], help: ArgumentHelp("How many pieces rebuild the secret (2 ≤ K ≤ n).", valueName: "k"))
    var threshold: Int

    @Option(help: ArgumentHelp("note, file, password, contact or key (default: file for a FILE, else note).", valueName: "type"))
    var type: String?

    @Option(help: ArgumentHelp("Public text stored in the clear in every bundle.", valueName: "text"))
    var description: String = ""

    @Flag(help: "Publish every holder's label in each bundle. Anyone who sees a bundle then learns who the other holders are.")
    var labels = false

    @OptionGroup var passwordLayer: PasswordLayerOptions

    @Option(help: ArgumentHelp("A local, public name for the secret in your keystore.", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Write the other holders' bundles into this directory instead of delivering them.", valueName: "dir"))
    var outDir: String?

    @Option(help: ArgumentHelp("Deliver through this group's relays, even to holders whose serve answers on the LAN.", valueName: "group"), completion: Completions.group)
    var group: String?

    @Option(help: ArgumentHelp("Let a trusted peer recover the secret alone after a wait that you can cut short: LABEL:WAIT, for example dave:7d (1s to 90d).",
                               discussion: "Each holder is asked to take the role; see 'vault secrets emergency'.",
                               valueName: "label:wait"), completion: Completions.peer)
    var emergency: String?

    @OptionGroup var reach: PeerAddressOptions

    @OptionGroup var fields: SecretFieldOptions

    @OptionGroup var progress: ProgressOption

    func run() async throws { try await share() }

    /// Shares as the options say; `then` runs once it is done, with the keys opened for it
    /// (`vault key create --group` ties the new key to its group without asking again).
    func share(then: ((Keystore, Identity) async throws -> Void)? = nil) async throws {
        let secretType = try resolvedType()
        let keystore = try home.openKeystore()
        let names = to.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard Set(names.map { $0.lowercased() }).count == names.count else {
            throw CLIError.invalidInput("--to names a holder twice")
        }
        let peers = try names.map { try keystore.peer(named: $0) }
        let holders = peers.map { (label: $0.label, card: $0.card) }
        if outDir != nil && group != nil { throw ValidationError("--out-dir and --group exclude each other") }
        let choice = try emergency.map { try EmergencyChoice($0) }
        if choice != nil && outDir != nil {
            throw ValidationError("--emergency needs the holders reached: with --out-dir, set it with 'vault secrets emergency' once they hold their shares")
        }
        let trustee = try choice.map { try keystore.peer(named: $0.label) }
        // The holders nearby are looked for (mDNS, up to 2 s) while the passphrase is typed,
        // not before it is asked.
        let everyone = try keystore.peers(), browsing = outDir == nil && group == nil, reach = self.reach
        async let found = browsing ? reach.addresses(for: everyone, discovering: peers) : [:]
        if description.isEmpty == false {
            Terminal.standardError("vault: note: the description is public: every holder's bundle carries it in the clear")
        }
        let localName = try name.map { try Label($0) }
        // The group too: a misspelt one once failed only after the secret was dealt, leaving
        // it stored, named, and its bundles in the outbox.
        if let group { _ = try keystore.group(named: group) }
        // Input files first: one that is missing or unreadable fails before anything is asked.
        let input = try SecretInput(type: secretType, file: file, passwordLayer: passwordLayer)
        let identity = try keys.unlock(keystore)
        if let group {
            for peer in peers
            where try HolderMail.sharedGroup(with: peer.card, keystore: keystore, identity: identity, named: group) == nil {
                throw CLIError.invalidInput("'\(peer.label)' is not a member of group \(group)")
            }
        }
        let layerPassword = try input.password(prompt: "Password for the secret: ")
        let addresses = try await found
        let request = ShareRequest(type: secretType, metadata: try fields.metadata(for: secretType, file: file),
                                   description: description, threshold: threshold, holders: holders,
                                   publishLabels: labels, password: layerPassword, scrypt: try passwordLayer.scrypt.parameters())

        var source = try input.content()
        let route: DeliveryRoute = group.map { .group($0) } ?? .auto
        var undelivered: Error?
        let stored: StoredSecret
        do {
            stored = try await distribute(request, content: &source, peers: peers, keystore: keystore, identity: identity, name: localName,
                                          outDir: outDir, addresses: addresses, route: route)
        } catch CLIError.undelivered(let secret, let labels) {
            // The secret is dealt; a holder not reached yet gets its rule with
            // 'vault secrets emergency' once it holds its share.
            guard choice != nil else { throw CLIError.undelivered(secret: secret, labels: labels) }
            undelivered = CLIError.undelivered(secret: secret, labels: labels)
            stored = try keystore.secret(matching: secret)
        }
        if let trustee, let choice {
            let missed = try await EmergencyDelivery.set(trustee: trustee, wait: choice.wait, secret: stored, holders: peers, addresses: addresses,
                                                         route: route, keystore: keystore, identity: identity)
            if undelivered == nil, !missed.isEmpty {
                throw CLIError.unavailable("the emergency rule did not reach \(missed.joined(separator: ", "))",
                                           hint: "send it again once they can be reached: 'vault secrets emergency \(stored.header.secretIDHex.prefix(16)) "
                                               + "--for \(ShellWord.quoted(trustee.label.value)) --after \(EmergencyChoice.option(choice.wait))'")
            }
        }
        if let undelivered { throw undelivered }
        try await then?(keystore, identity)
    }

    private func resolvedType() throws -> SecretType {
        guard let type else { return file != nil && file != "-" ? .file : .note }
        guard let resolved = SecretType(name: type) else {
            throw ValidationError("--type takes note, file, password, contact or key")
        }
        if resolved == .key && file != nil { throw ValidationError("a key is generated: give no FILE with --type key") }
        if resolved == .file && (file == nil || file == "-") { throw ValidationError("--type file needs a FILE") }
        return resolved
    }
}

/// What a new secret or item holds: a fresh key, a password (the first line of the file or
/// of standard input, or asked on the terminal), nothing for a bare contact, or the bytes
/// of FILE or standard input. This is where every command that takes a secret from standard
/// input reads it (`share`, `send`, `item add`, `item edit`).
///
/// Standard input that is a terminal is a person typing: a password is then asked for
/// without echo, as when no FILE is given, and a note is read whole after a line that says
/// how to end it (``Terminal/typedNote(_:)``).
func secretContent(type: SecretType, file: String?) throws -> any ByteSource {
    let typing = file == "-" || file == nil ? isatty(STDIN_FILENO) == 1 : false
    switch type {
    case .key:
        let key = SecureBytes(count: 32)
        key.withUnsafeMutableBytes { SecureRandom().fill($0) }
        return SecureBytesSource(key)
    case .password:
        // The first line of the file or of standard input, without its line ending.
        guard let file, !typing else {
            do {
                return SecureBytesSource(try Terminal.passphrase(prompt: "Password to store: ", confirm: true))
            } catch CLIError.noTerminal {
                throw CLIError.unavailable("no password to store was given, and there is no terminal to ask for it on",
                                           hint: "give it as the first line of a FILE, or of standard input with -")
            }
        }
        return SecureBytesSource(try PassphraseFile.read(file == "-" ? "/dev/stdin" : file, what: "password",
                                                         shownAs: file == "-" ? "standard input" : nil))
    case .contact where file == nil:
        return BytesSource([])
    default:
        if let file, file != "-" { return try FileSource(path: file) }
        if typing { return SecureBytesSource(try Terminal.typedNote(type == .contact ? "the contact's note" : "the note")) }
        return FileSource(standardInput: ())
    }
}

/// A new secret's or item's input, with its files opened (and a password file read) before
/// the command asks for anything: a FILE that is missing fails at once, not after the
/// passphrase. Standard input, which may be a person typing, is read only when it is time,
/// but for a password to store, which is one line.
struct SecretInput {
    private let type: SecretType
    private let file: String?
    private let passwordLayer: PasswordLayerOptions?
    private let opened: (any ByteSource)?
    private let filePassword: SecureBytes?

    /// `passwordLayer` is nil for a command that has none (`vault send`).
    init(type: SecretType, file: String?, passwordLayer: PasswordLayerOptions?) throws {
        self.type = type
        self.file = file
        self.passwordLayer = passwordLayer
        // A password to store is one line, read (or asked for) now too: standard input
        // without one must fail before a locked key is recovered or a passphrase asked.
        opened = type == .password || (file != nil && file != "-") ? try secretContent(type: type, file: file) : nil
        filePassword = passwordLayer?.passwordFile != nil ? try passwordLayer?.read(prompt: "") : nil
    }

    /// The content (``secretContent(type:file:)``).
    func content() throws -> any ByteSource {
        try opened ?? secretContent(type: type, file: file)
    }

    /// The password layer's password, if one was asked for: from its file, else on the terminal.
    func password(prompt: String) throws -> SecureBytes? {
        try filePassword ?? passwordLayer?.read(prompt: prompt)
    }
}

/// Deals `content` as `request` says, stores the dealer's own share (under `name`), and
/// delivers the other bundles to `peers` (or writes them to `outDir`). `check` runs after
/// dealing and before anything is kept: a failure there discards every bundle.
@discardableResult
func distribute(_ request: ShareRequest, content: inout some ByteSource, peers: [Peer], keystore: Keystore, identity: Identity,
                name: Label?, outDir: String?, addresses: [String: PeerAddress], route: DeliveryRoute = .auto,
                check: () throws -> Void = {}) async throws -> StoredSecret {
    let holders = request.holders
    let own = try keystore.newBundleFile()
    let outbox = try Outbox(home: keystore.home)
    let directory = try outDir.map { try OutputDirectory($0, announce: false) }
    let headers: [BundleHeader]
    let others: [OutputFile]
    do {
        others = try holders.map { holder in
            try outDir.map { try OutputFile(path: $0 + "/\(holder.label).vshare", hiddenUntilCommit: true) }
                ?? OutputFile(path: outbox.pendingPath(for: holder.label), shownAs: "the vault directory \(outbox.directory)")
        }
        let meter = ProgressMeter("sharing", total: (content as? FileSource)?.size ?? 0)
        let metered = MeteredSource(content, meter: meter)
        ProgressLine.show("sharing", [meter])
        headers = try SecretDealer.share(request, content: metered, dealer: identity, outputs: [own] + others)
        ProgressLine.end()
        try check()
    } catch {
        directory?.removeIfEmpty()
        throw error
    }
    // All or nothing: every bundle takes its final name (which the file system may refuse:
    // too long, taken) before the dealer's share is stored, and is removed if anything fails.
    var named: [String] = []
    let stored: StoredSecret
    do {
        for (holder, file) in zip(holders, others) {
            try file.commit()
            named.append(file.path)
            if outDir == nil {
                named[named.count - 1] = try outbox.keep(file.path, secret: headers[0].secretIDHex, label: holder.label)
            }
        }
        stored = try keystore.storeOwnBundle(at: own.path, identity: identity, name: name)
    } catch {
        for path in named { unlink(path) }
        directory?.removeIfEmpty()
        throw error
    }

    let header = stored.header
    print(header.secretIDHex)
    directory?.announce()
    Terminal.standardError("shared \(request.type) \(header.secretIDHex.prefix(16)) as \(header.threshold) of \(header.count); your share is in the keystore")
    guard outDir == nil else {
        for (holder, file) in zip(holders, others) {
            Terminal.standardError("  \(holder.label): \(file.path)")
            try keystore.setDelivery(secretRow: header.rowID, holderKey: holder.card.agreementKey, label: holder.label.value,
                                     state: .notYetReached, via: "file \(file.path)")
        }
        return stored
    }
    var missed: [String] = []
    // A bundle that cannot be delivered now stays in the outbox for `vault secrets push`:
    // the share is complete, only its delivery waits.
    for (peer, kept) in zip(peers, named) {
        try keystore.setDelivery(secretRow: header.rowID, holderKey: peer.card.agreementKey, label: peer.label.value,
                                 state: .notYetReached, via: "outbox")
        if try await deliver(kept, to: peer, secretRow: header.rowID, address: addresses[peer.label.value], route: route,
                             keystore: keystore, identity: identity) {
            try? FileManager.default.removeItem(atPath: kept)
        } else {
            missed.append(peer.label.value)
        }
    }
    guard missed.isEmpty else { throw CLIError.undelivered(secret: String(header.secretIDHex.prefix(16)), labels: missed) }
    return stored
}

/// How a bundle reaches a holder who is not on the LAN.
enum DeliveryRoute {
    /// Over the LAN where the holder's serve answers, else through a group both are in.
    case auto
    /// Through this group's relays only (`--group`).
    case group(String)
}

/// Delivers one bundle: over the LAN when the holder's serve answers there (unless
/// `route` names a group), else through the relays of a group that the dealer and the
/// holder share, whose holder then asks its person. Reports the outcome and records it for
/// `vault secrets show`; true if the holder stored it or the relays hold it for them.
func deliver(_ path: String, to peer: Peer, secretRow: [UInt8], address: PeerAddress?, route: DeliveryRoute, keystore: Keystore,
             identity: Identity) async throws -> Bool {
    var lanFailure: String?
    if case .auto = route, let address {
        let meter = ProgressMeter(peer.label.value, total: (try? FileSource(path: path).size) ?? 0)
        ProgressLine.show("delivering to \(peer.label)", [meter])
        defer { ProgressLine.end() }
        do {
            try await PeerClient.deliver(bundleAt: path, to: peer, at: address, identity: identity, progress: meter)
            Terminal.standardError("  \(peer.label): delivered to \(address)")
            try keystore.setDelivery(secretRow: secretRow, holderKey: peer.card.agreementKey, label: peer.label.value, state: .delivered,
                                     via: "LAN \(address)")
            return true
        } catch {
            lanFailure = Report.words(for: error)
        }
    }
    let named: String? = if case .group(let name) = route { name } else { nil }
    guard let group = try HolderMail.sharedGroup(with: peer.card, keystore: keystore, identity: identity, named: named) else {
        if let named { throw CLIError.invalidInput("'\(peer.label)' is not a member of group \(named)") }
        Terminal.standardError("  \(peer.label): " + (lanFailure ?? "unreachable: not found nearby and no address known (use --peer \(peer.label)=HOST:PORT)")
            + "; no group of yours has '\(peer.label)' as a member, to deliver through relays")
        return false
    }
    // Recorded first: the holder's answer can come back before the slowest relay took it.
    try keystore.setDelivery(secretRow: secretRow, holderKey: peer.card.agreementKey, label: peer.label.value, state: .sent,
                             via: "relays of \(group.name)")
    do {
        let stored = try await HolderMail.offer(bundle: path, to: peer, in: group, keystore: keystore, identity: identity)
        if let shortfall = stored.shortfall(HolderMail.minimumRelays(group), of: group) {
            throw CLIError.invalidInput(shortfall)
        }
        Terminal.standardError("  \(peer.label): " + (lanFailure.map { "\($0); " } ?? "")
            + "sent through the relays of \(group.name) (\(stored.count) of \(group.relays.count) stored it); \(peer.label) is asked to keep it")
        return true
    } catch {
        _ = try? keystore.answerDelivery(secretRow: secretRow, holderKey: peer.card.agreementKey, state: .notYetReached)
        Terminal.standardError("  \(peer.label): " + (lanFailure.map { "\($0); " } ?? "") + "through the relays of \(group.name): \(Report.words(for: error))")
        return false
    }
}
