import ArgumentParser
import Foundation
import VaultCore
import VaultNet
import VaultRelayClient

struct SecretsRelease: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "release",
        abstract: "Release your piece of a secret to another of its holders (offline recovery).")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Option(name: .customLong("for"), help: ArgumentHelp("The trusted peer, a holder of the same secret, who will recover it.", valueName: "label"), completion: Completions.peer)
    var recipient: String

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("The file to write.", valueName: "file"))
    var output: String

    @OptionGroup var progress: ProgressOption

    func validate() throws {
        // Elsewhere `-` is standard output; a released piece is a file to hand over.
        if output == "-" { throw ValidationError("-o takes a file to write the piece to, not -") }
    }

    func run() throws {
        let keystore = try home.openKeystore()
        let secret = try keystore.secret(matching: self.secret)
        let peer = try keystore.peer(named: recipient)
        let identity = try keys.unlock(keystore)
        let file = try OutputFile(path: output, hiddenUntilCommit: true)
        let meter = ProgressMeter("releasing")
        ProgressLine.show("releasing", [meter])
        try ReleasedPiece.release(secret, to: peer, keystore: keystore, identity: identity, output: file, progress: meter)
        try file.commit()
        ProgressLine.end()
        try keystore.recordRelease(secretID: secret.header.secretID, peer: peer,
                                   requester: secret.header.index(of: peer.card.agreementKey) ?? 0, decision: .manual)
        Terminal.standardError("released piece \(secret.header.holderIndex) of \(secret.header.secretIDHex.prefix(16)) for '\(peer.label)' in \(output)")
    }
}

struct SecretsPush: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Deliver again the bundles of a secret you shared that did not reach their holders.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Option(help: ArgumentHelp("The holders to send to, comma-separated.", valueName: "labels"), completion: Completions.peers)
    var to: String

    @OptionGroup var reach: PeerAddressOptions

    @Option(help: ArgumentHelp("Deliver through this group's relays only.", valueName: "group"), completion: Completions.group)
    var group: String?

    @OptionGroup var progress: ProgressOption

    func run() async throws {
        let keystore = try home.openKeystore()
        let secret = try keystore.secret(matching: self.secret)
        let outbox = try Outbox(home: keystore.home)
        let peers = try to.split(separator: ",").map { try keystore.peer(named: $0.trimmingCharacters(in: .whitespaces)) }
        let addresses = try await reach.addresses(for: try keystore.peers(), discovering: peers)
        let identity = try keys.unlock(keystore)
        var missed: [String] = []
        for peer in peers {
            let path = outbox.path(secret: secret.header.secretIDHex, label: peer.label)
            guard FileManager.default.fileExists(atPath: path) else {
                Terminal.standardError("  \(peer.label): no undelivered bundle of this secret")
                missed.append(peer.label.value)
                continue
            }
            if try await deliver(path, to: peer, secretRow: secret.header.rowID, address: addresses[peer.label.value],
                                 route: group.map { .group($0) } ?? .auto, keystore: keystore, identity: identity) {
                try? FileManager.default.removeItem(atPath: path)
            } else {
                missed.append(peer.label.value)
            }
        }
        guard missed.isEmpty else { throw CLIError.undelivered(secret: String(secret.header.secretIDHex.prefix(16)), labels: missed) }
    }
}
