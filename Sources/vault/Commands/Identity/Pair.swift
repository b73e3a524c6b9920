import ArgumentParser
import Foundation
import VaultCore
import VaultNet

struct Pair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Trust a nearby machine by comparing a short code, without scanning its card.",
        discussion: """
            The other person runs 'vault serve --pairing'. Both screens then show the same \
            8-digit code if, and only if, nobody sits between the two machines: compare them \
            aloud. Each side stores the other only when both people confirm.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Option(help: ArgumentHelp("Where the other machine's 'vault serve --pairing' listens.", valueName: "host:port"))
    var peer: String

    @Option(help: ArgumentHelp("The local name for the other machine (default: the label it suggests).", valueName: "name"))
    var label: String?

    func run() async throws {
        let address = try PeerAddress(peer)
        let keystore = try home.openKeystore()
        let chosen = try label.map { try Label($0) }
        guard Terminal.isAvailable else { throw CLIError.confirmationRequired(what: "pairing") }
        let identity = try keys.unlock(keystore)
        let (card, suggested) = try await Pairing.pair(with: address, identity: identity) { code, card, offered in
            confirmPairing(code: code, card: card, label: chosen ?? offered, keystore: keystore)
        }
        let peer = try keystore.addPeer(card, label: chosen ?? suggested, address: address)
        Terminal.standardError("paired: trusted '\(peer.label)' at \(address) (fingerprint \(card.fingerprint))")
    }
}

/// Shows the code and asks; refuses at once a key or label already trusted. No terminal, no.
func confirmPairing(code: String, card: KeyCard, label: Label, keystore: Keystore) -> Bool {
    do {
        try keystore.checkNewPeer(card, label: label)
    } catch {
        Terminal.standardError("vault: cannot pair with '\(label)': \(Report.words(for: error))")
        return false
    }
    return (try? Terminal.confirm(
        "Does the other screen show the same code? Trust '\(label)'?",
        details: ["pairing code  \(code)", "peer          \(label)", "fingerprint   \(card.fingerprint)"],
        what: "pairing")) ?? false
}
