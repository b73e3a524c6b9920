import ArgumentParser
import Foundation
import VaultCore
import VaultHolders
import VaultNet

struct SecretsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secrets",
        abstract: "Manage the shares this machine holds.",
        subcommands: [SecretsImport.self, SecretsList.self, SecretsShow.self, SecretsRename.self, SecretsRemove.self, SecretsRelease.self, SecretsPush.self, SecretsAutoRelease.self, SecretsEmergency.self, SecretsExportWords.self, SecretsKit.self]
    )
}

struct SecretsImport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Store share bundles received from their dealer (all or none).",
        discussion: """
            Checks each bundle's header first (signed by a trusted dealer, sealed to you, not \
            held yet), lists the shares, and asks: "Keep this share for its dealer?" (or "Keep \
            these N shares…"); --yes answers yes. Then checks each piece in full and stores \
            all the shares, or none.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("Bundle files (.vshare).", valueName: "file"))
    var files: [String]

    @OptionGroup var confirmation: ConfirmOption
    @OptionGroup var progress: ProgressOption

    func run() throws {
        guard !files.isEmpty else { throw ValidationError("give at least one bundle file") }
        let keystore = try home.openKeystore()
        // The files are read first: a missing or damaged one is refused before the passphrase is asked for.
        for file in files { _ = try BundleHeader.read(bundleAt: file) }
        let identity = try keys.unlock(keystore)
        let peers = try keystore.peers()
        // Keeping a share is a commitment to its dealer: the holder sees what each one is
        // before agreeing, as `vault serve --confirm` shows a delivered one.
        let headers = try keystore.bundleHeaders(files, identity: identity)
        let details = headers.map { header in
            let dealer = peers.first { $0.card == header.dealer }.map { "'\($0.label)'" } ?? "yourself"
            let about = header.description.isEmpty ? "" : " (\(TerminalText.escaped(header.description)))"
            return "  \(header.type) \(header.secretIDHex.prefix(16)) from \(dealer)\(about): share \(header.holderIndex) of \(header.count), \(header.threshold) needed"
        }
        let question = headers.count == 1 ? "Keep this share for its dealer?" : "Keep these \(headers.count) shares for their dealers?"
        try confirmation.confirm(question, details: details, what: "storing a share")
        let meter = ProgressMeter("importing")
        ProgressLine.show("importing", [meter])
        let imported = try keystore.importBundles(files, identity: identity, progress: meter)
        ProgressLine.end()
        for secret in imported {
            let header = secret.header
            let dealer = peers.first { $0.card == header.dealer }?.label.value ?? "yourself"
            Terminal.standardError("imported \(header.type) \(header.secretIDHex.prefix(16)) from \(dealer): share \(header.holderIndex) of \(header.count), \(header.threshold) needed")
        }
    }
}

struct SecretsList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the shares this machine holds.")

    @OptionGroup var home: HomeOption

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let keystore = try home.openKeystore()
        let secrets = try keystore.secrets()
        let peers = try keystore.peers()
        // Shares whose rows are gone (a lost or older keystore database): kept, and said.
        let unlisted = try keystore.unlistedPieceFiles()
        if !unlisted.isEmpty {
            Terminal.standardError("vault: warning: \(unlisted.count) share file\(unlisted.count == 1 ? "" : "s") in \(keystore.home.directory)/pieces "
                                   + "\(unlisted.count == 1 ? "is" : "are") not in this keystore (its database was lost, emptied or restored from an older backup)")
            Terminal.standardError("vault: hint: each is a share bundle, which vault never deletes: copy one out of pieces/ and "
                                   + "'vault secrets import COPY' takes it back if it is sealed to this identity (first: \(ShellWord.quoted(unlisted[0])))")
        }
        if json { return try printJSON(secrets.map { SecretJSON($0, peers: peers) }) }
        guard !secrets.isEmpty else {
            Terminal.standardError("no shares yet; 'vault share' makes some, 'vault secrets import' stores received ones")
            return
        }
        print("ID                NAME            TYPE      K/N    INDEX  FROM            DESCRIPTION")
        for secret in secrets {
            let h = secret.header
            let from = secret.role == .dealer ? "you" : peers.first { $0.card == h.dealer }?.label.value ?? "unknown"
            print([String(h.secretIDHex.prefix(16)) + "  ", pad(secret.name ?? "-", 16), pad(h.type.description, 10),
                   pad("\(h.threshold)/\(h.count)", 7), pad("\(h.holderIndex)", 7), pad(TerminalText.escaped(from), 16),
                   TerminalText.escaped(h.description)].joined())
        }
    }
}

struct SecretsShow: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show a share's public header.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The secret's name or id (at least 4 hex digits).", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let keystore = try home.openKeystore()
        let secret = try keystore.secret(matching: self.secret)
        let info = try SecretJSON(secret, peers: try keystore.peers(), keystore: keystore)
        if json { return try printJSON(info) }
        print("id           \(info.id)")
        print("name         \(info.name ?? "-")")
        print("type         \(info.type)")
        print("description  \(info.description.isEmpty ? "-" : TerminalText.escaped(info.description))")
        print("threshold    \(info.threshold) of \(info.count)")
        print("your index   \(info.index) (\(info.role))")
        if let protection = info.keyProtection { print("your keys    \(protection)") }
        print("dealer       \(info.dealerText)")
        print("password     \(info.passwordLayer ? "yes" : "no")")
        print("size         \(info.ciphertextBytes) bytes of ciphertext")
        print("created      \(ISO8601DateFormatter().string(from: info.createdAt))")
        if let labels = info.labels { print("labels       \(labels.joined(separator: ", "))") }
        if info.holders.isEmpty { print("holders      none you trust besides you") }
        for (number, holder) in info.holders.enumerated() {
            let state = holder.state.map { "  \($0)" + (holder.via.map { " (\($0))" } ?? "") } ?? ""
            print("\(number == 0 ? "holders      " : "             ")\(TerminalText.escaped(holder.label)) (index \(holder.index))\(state)")
        }
        let unreached = info.holders.filter { $0.state == ShareDelivery.State.notYetReached.rawValue }.map(\.label)
        if !unreached.isEmpty {
            print("             ('vault secrets push \(info.id.prefix(16)) --to \(ShellWord.quoted(unreached.joined(separator: ",")))' "
                  + "delivers the shares not yet reached)")
        }
        if let replaces = info.replaces { print("replaces     \(replaces)") }
        if let keyID = info.keyID { print("key id       \(keyID)") }
        print("auto-release \(info.autoRelease.isEmpty ? "nobody: every request waits for your consent" : info.autoRelease.joined(separator: ", "))")
        for (number, line) in try EmergencyLines.lines(for: secret, keystore: keystore).enumerated() {
            print("\(number == 0 ? "emergency    " : "             ")\(line)")
        }
        if info.releases.isEmpty { print("releases     none") }
        for (number, release) in info.releases.enumerated() {
            print("\(number == 0 ? "releases     " : "             ")\(ISO8601DateFormatter().string(from: release.at))  "
                + "\(TerminalText.escaped(release.peer)) (index \(release.index))  \(release.decision)"
                + (release.detail.map { " (\(TerminalText.escaped($0)))" } ?? ""))
        }
    }
}

struct SecretsRename: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rename",
        abstract: "Give a secret (or a shared key) a local name; names are yours alone, never sent.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Argument(help: ArgumentHelp("The new name; - removes the name.", valueName: "name"))
    var name: String

    func run() throws {
        let keystore = try home.openKeystore()
        let secret = try keystore.secret(matching: self.secret)
        let label = name == "-" ? nil : try Label(name)
        try keystore.renameSecret(secret, to: label)
        Terminal.standardError("secret \(secret.header.secretIDHex.prefix(16)) is now " + (label.map { "'\($0)'" } ?? "unnamed"))
    }
}

struct SecretsRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete a share from this machine.",
        discussion: """
            Asks: "Delete your share of ID? Recovery will then need K other holders.", adding, \
            for the last share of a shared key, how many items are deleted with it (--yes \
            answers yes).
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @OptionGroup var confirmation: ConfirmOption

    func run() throws {
        let keystore = try home.openKeystore()
        let secret = try keystore.secret(matching: self.secret)
        let id = String(secret.header.secretIDHex.prefix(16))
        // The last share of a shared key takes its items with it: they could never open again.
        let items = try keystore.itemsOrphaned(byRemoving: secret)
        let itemNote = items == 0 ? "" : " Its \(items) item\(items == 1 ? "" : "s") can then never open again and will be deleted too."
        try confirmation.confirm("Delete your share of \(id)? Recovery will then need \(secret.header.threshold) other holders.\(itemNote)",
                                 what: "deleting a share")
        try keystore.removeSecret(secret)
        Terminal.standardError("deleted your share of \(id)" + (items == 0 ? "" : " and the \(items) item\(items == 1 ? "" : "s") of its key"))
    }
}

struct SecretJSON: Encodable {
    let id: String
    let name: String?
    let type: String
    let description: String
    let threshold: Int
    let count: Int
    let index: Int
    let role: String
    let dealer: Dealer
    let passwordLayer: Bool
    let ciphertextBytes: UInt64
    let createdAt: Date
    /// The labels the dealer published in the bundle (`share --labels`).
    let labels: [String]?
    /// Every other holder this keystore knows (a trusted peer whose key the bundle's holder
    /// tags name), with how its share went for a dealer.
    let holders: [Holder]
    let replaces: String?
    let keyID: String?
    let autoRelease: [String]
    /// The emergency rule, where one was set or received.
    let emergency: EmergencyJSON?
    let releases: [Release]
    /// How the private keys that open your share are protected (`vault secrets show`).
    var keyProtection: String?

    /// Who dealt it: yourself, a trusted peer by its label, or a card not trusted here.
    struct Dealer: Encodable {
        let label: String?
        let fingerprint: String
        let you: Bool
    }

    struct Holder: Encodable {
        let label: String
        let index: Int
        /// For the dealer: delivered, sent, waiting for consent, refused, not yet reached.
        let state: String?
        let via: String?
        let updatedAt: Date?
    }

    struct Release: Encodable {
        let peer: String
        let index: Int
        let at: Date
        let decision: String
        let detail: String?
    }

    init(_ secret: StoredSecret, peers: [Peer], keystore: Keystore) throws {
        self.init(secret, peers: peers,
                  deliveries: try keystore.deliveries(secretRow: secret.header.rowID),
                  autoRelease: try keystore.autoReleasePeers(secretID: secret.header.secretID)
                      .map { "\($0.peer.label)" + ($0.everySecret ? " (every secret)" : "") },
                  emergency: try EmergencyJSON(secret, keystore: keystore),
                  releases: try keystore.releaseRecord(secretID: secret.header.secretID)
                      .map { Release(peer: $0.peerLabel, index: $0.requester, at: $0.at, decision: $0.decision.rawValue, detail: $0.detail) })
        keyProtection = try keystore.identityInfo().protection.description
    }

    init(_ secret: StoredSecret, peers: [Peer], deliveries: [ShareDelivery] = [], autoRelease: [String] = [], emergency: EmergencyJSON? = nil,
         releases: [Release] = []) {
        self.autoRelease = autoRelease
        self.emergency = emergency
        self.releases = releases
        let h = secret.header
        id = h.secretIDHex
        name = secret.name
        type = h.type.description
        description = h.description
        threshold = h.threshold
        count = h.count
        index = h.holderIndex
        role = secret.role == .dealer ? "dealer" : "holder"
        dealer = Dealer(label: secret.role == .dealer ? nil : peers.first { $0.card == h.dealer }?.label.value,
                        fingerprint: h.dealer.fingerprint, you: secret.role == .dealer)
        passwordLayer = h.passwordProtected
        ciphertextBytes = h.ciphertextLength
        createdAt = Date(timeIntervalSince1970: TimeInterval(h.createdAt))
        labels = h.labels?.map(\.value)
        holders = peers.compactMap { peer -> Holder? in
            guard let index = h.index(of: peer.card.agreementKey), index != h.holderIndex else { return nil }
            let delivery = deliveries.first { $0.holderKey == peer.card.agreementKey }
            // A dealer's share with no word of its delivery (a share stopped before it went
            // out) is one not yet reached, as `vault secrets push` sees it.
            let state = delivery?.state.rawValue ?? (secret.role == .dealer ? ShareDelivery.State.notYetReached.rawValue : nil)
            return Holder(label: peer.label.value, index: index, state: state, via: delivery?.via, updatedAt: delivery?.updated)
        }.sorted { $0.index < $1.index }
        replaces = h.replaces?.hex
        keyID = h.keyID?.hex
    }

    /// The dealer as a line says it.
    var dealerText: String {
        dealer.you ? "you" : "\(dealer.label.map { "'\(TerminalText.escaped($0))'" } ?? "a card you do not trust") (\(dealer.fingerprint))"
    }
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
}
