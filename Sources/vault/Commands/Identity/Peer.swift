import ArgumentParser
import Foundation
import VaultCore

struct PeerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peer",
        abstract: "Manage the peers this machine trusts.",
        subcommands: [PeerAdd.self, PeerList.self, PeerShow.self, PeerRename.self, PeerSetAddress.self, PeerRemove.self]
    )
}

struct PeerAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Trust a peer's key card, from text, standard input or a QR code image.",
        discussion: """
            Compare the fingerprint shown with the one on the other person's screen before you \
            confirm: that comparison is what makes the trust face to face.

            Asks: "Does this fingerprint match the one on the other screen? Trust this key?" \
            (--yes answers yes).
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The card (vault1…, optionally followed by #label), or - to read it from standard input.",
                                 valueName: "card"))
    var card: String?

    @Option(help: ArgumentHelp("Read the card from the QR code in a PNG, JPEG or PGM image.", valueName: "file"))
    var image: String?

    @Option(help: ArgumentHelp("The peer's local name (default: the label the card suggests).", valueName: "name"))
    var label: String?

    @Option(help: ArgumentHelp("Where to reach the peer when discovery does not work.", valueName: "host:port"))
    var addr: String?

    @OptionGroup var confirmation: ConfirmOption

    // Where the card comes from is part of the command line: without one, or with two, it
    // is a usage error (64), as a missing argument is.
    func validate() throws {
        switch (card, image) {
        case (nil, nil): throw ValidationError("no key card given: give it as an argument, - for standard input, or --image FILE")
        case (.some, .some): throw ValidationError("give the card either as text or as --image, not both")
        default: break
        }
    }

    func run() throws {
        let offer = try readOffer()
        let address = try addr.map { try PeerAddress($0) }
        guard let label = try label.map({ try Label($0) }) ?? offer.suggestedLabel else {
            throw CLIError.missingLabel
        }
        let keystore = try home.openKeystore()
        do {
            try keystore.checkNewPeer(offer.card, label: label)
        } catch {
            // Someone who gives an address for a key already trusted most likely wants the new one.
            guard case .duplicatePeerKey(let known) = error, let address else { throw error }
            throw CLIError.unavailable(error.description,
                                       hint: "to change where it is reached, run 'vault peer set-addr \(ShellWord.quoted(known)) \(address)'")
        }
        try confirmation.confirm(
            "Does this fingerprint match the one on the other screen? Trust this key?",
            details: ["peer         \(label)", "fingerprint  \(offer.card.fingerprint)"],
            what: "trusting a key")
        let peer = try keystore.addPeer(offer.card, label: label, address: address)
        Terminal.standardError("trusted '\(peer.label)' (fingerprint \(peer.card.fingerprint))")
    }

    private func readOffer() throws -> CardOffer {
        switch (card, image) {
        case (nil, nil), (.some, .some):
            throw CLIError.cardSource("no key card given")
        case (nil, let path?):
            return try QRScanner.scanCard(imageAt: path)
        case ("-"?, nil):
            var input = FileSource(standardInput: ())
            guard let text = String(validating: try input.readFully(4096), as: UTF8.self) else {
                throw VaultError.invalidCard(.invalidCharacter)
            }
            guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw CLIError.cardSource("standard input holds no key card")
            }
            return try CardOffer(text: text)
        case (let text?, nil):
            return try CardOffer(text: text)
        }
    }
}

struct PeerList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the trusted peers.")

    @OptionGroup var home: HomeOption

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let peers = try home.openKeystore().peers()
        if json { return try printJSON(peers.map(PeerJSON.init)) }
        guard !peers.isEmpty else {
            Terminal.standardError("no trusted peers yet; add one with 'vault peer add'")
            return
        }
        let width = max(5, peers.map { $0.label.value.count }.max() ?? 0)
        func pad(_ text: String) -> String { text + String(repeating: " ", count: width - text.count) }
        print("\(pad("LABEL"))  FINGERPRINT                          ADDRESS")
        for peer in peers {
            print("\(pad(peer.label.value))  \(peer.card.fingerprint)  \(peer.address?.description ?? "-")")
        }
    }
}

struct PeerShow: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one peer's card and fingerprint.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The peer's label.", valueName: "name"), completion: Completions.peer)
    var name: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let peer = try home.openKeystore().peer(named: name)
        if json { return try printJSON(PeerJSON(peer)) }
        print("label        \(peer.label)")
        print("card         \(peer.card.text)")
        print("fingerprint  \(peer.card.fingerprint)")
        print("address      \(peer.address?.description ?? "-")")
        print("added        \(ISO8601DateFormatter().string(from: peer.addedAt))")
    }
}

struct PeerRename: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "Give a peer a new label.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The current label.", valueName: "old"))
    var old: String

    @Argument(help: ArgumentHelp("The new label.", valueName: "new"))
    var new: String

    func run() throws {
        let label = try Label(new)
        try home.openKeystore().renamePeer(old, to: label)
        Terminal.standardError("renamed '\(old)' to '\(label)'")
    }
}

struct PeerSetAddress: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-addr",
        abstract: "Change where a peer is reached, or forget its address (-).",
        discussion: """
            The address is used when discovery by mDNS cannot find the peer ('--peer \
            LABEL=HOST:PORT' overrides it for one command). Addresses change, with DHCP or a \
            new network; the key, and so the trust, stays the same.
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The peer's label.", valueName: "name"), completion: Completions.peer)
    var name: String

    @Argument(help: ArgumentHelp("The new address, or - to forget it.", valueName: "host:port"))
    var address: String

    func run() throws {
        let address = self.address == "-" ? nil : try PeerAddress(self.address)
        let keystore = try home.openKeystore()
        let peer = try keystore.setPeerAddress(name, to: address)
        Terminal.standardError(address.map { "'\(peer.label)' is reached at \($0)" }
            ?? "'\(peer.label)' has no address: it is looked for nearby (mDNS), or given with --peer")
    }
}

struct PeerRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Stop trusting a peer.",
        discussion: "Asks: \"Stop trusting 'LABEL'?\" (--yes answers yes).")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The peer's label.", valueName: "name"), completion: Completions.peer)
    var name: String

    @OptionGroup var confirmation: ConfirmOption

    func run() throws {
        let keystore = try home.openKeystore()
        let peer = try keystore.peer(named: name)
        try confirmation.confirm("Stop trusting '\(peer.label)'?", what: "removing a peer")
        try keystore.removePeer(named: name)
        Terminal.standardError("removed '\(peer.label)'")
    }
}

struct PeerJSON: Encodable {
    let label: String
    let card: String
    let fingerprint: String
    let address: String?
    let addedAt: Date

    init(_ peer: Peer) {
        label = peer.label.value
        card = peer.card.text
        fingerprint = peer.card.fingerprint
        address = peer.address?.description
        addedAt = peer.addedAt
    }
}
