import ArgumentParser
import Foundation
import VaultCore

struct SecretsExportWords: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-words",
        abstract: "Write holders' shares of a small secret as SLIP-39 words, which any SLIP-39 tool recombines.",
        discussion: """
            For a key, or a note of 16 to 32 bytes (an even number), with at most 16 holders. \
            The secret is recovered first, as 'vault recover' does (your share and pieces from \
            other holders, or --piece files), and stays in locked memory; then the words are \
            made: by default one mnemonic a holder, any k of which recover the secret (one \
            SLIP-39 group, k of n). With --split T-of-M, each holder gets a group of M \
            mnemonics of which T rebuild its share, to keep in different places.

            The words are a function of the secret, its layout and the passphrase: exporting \
            again gives the same words, so holders may export theirs at different times and \
            their words still combine. The dealer may write every holder's words; a holder \
            only its own (Docs/DECISIONS.md, "SLIP-39 words").

            The words go to standard output, each holder's after a line starting with '#', \
            which 'vault recover-words' reads back as it is. Unlike vault's own shares, words \
            carry no dealer's signature and no commitments (Docs/SECURITY.md).
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Option(name: .customLong("holder"), help: ArgumentHelp("Write this holder's words only (repeatable; default: all the dealer may write, or your own).",
                                                           valueName: "label"), completion: Completions.peer)
    var holders: [String] = []

    @Option(help: ArgumentHelp("Two levels: each holder's share as T of M mnemonics (for example 2-of-3).", valueName: "T-of-M"))
    var split: String?

    @OptionGroup var passphrase: WordsPassphraseOption
    @OptionGroup var content: SecretContentOptions

    func validate() throws { _ = try WordsLayout.split(split) }

    func run() async throws {
        let keystore = try home.openKeystore()
        let stored = try keystore.secret(matching: self.secret)
        let header = stored.header
        let split = try WordsLayout.split(self.split)
        // Refused before anything is asked of anyone: the type, the holders' count, the layout.
        try SecretWords.checkType(header)
        _ = try SecretWords.scheme(for: header, split: split)
        let identity = try keys.unlock(keystore)
        let names = try WordsLayout.holderNames(header, keystore: keystore, identity: identity)
        let wanted = try WordsLayout.holders(holders, of: stored, names: names, keystore: keystore)
        let words = try passphrase.read(choosing: true)
        let value = try await content.recover(stored, keystore: keystore, identity: identity, limit: SecretWords.maximumLength)
        try SecretWords.checkContent(length: value.count)
        let sets = try SecretWords.deal(value, header: header, passphrase: words, split: split)
        let id = String(header.secretIDHex.prefix(16))
        var out = ["# secret \(id)" + (header.description.isEmpty ? "" : " (\(TerminalText.escaped(header.description)))") + ": "
            + WordsLayout.rule(header, split: split) + (words.count > 0 ? ", with a SLIP-39 passphrase" : "")]
        for index in wanted {
            out.append("# \(TerminalText.escaped(names[index - 1])) (holder \(index) of \(header.count))"
                + (split.map { ": any \($0.threshold) of these \($0.count)" } ?? ""))
            try writeStandardOutput(out.joined(separator: "\n") + "\n")
            out = []
            for mnemonic in sets[index - 1] {
                let text = mnemonic.text()
                try text.withUnsafeBytes { try writeStandardOutput($0) }
                try writeStandardOutput("\n")
            }
        }
        Terminal.standardError("wrote the SLIP-39 words of \(wanted.count == 1 ? "holder" : "holders") "
            + wanted.map { "'\(TerminalText.escaped(names[$0 - 1]))'" }.joined(separator: ", ") + " of secret \(id)")
        WordsLayout.warnIfGuessable(header)
    }
}

/// What 'vault secrets export-words' and 'vault secrets kit' share: the layout option,
/// holders' names, who may have whose words.
enum WordsLayout {
    /// `T-of-M` (or nil).
    static func split(_ text: String?) throws -> SLIP39Scheme.Group? {
        guard let text else { return nil }
        let parts = text.lowercased().split(separator: "-of-", omittingEmptySubsequences: false)
        guard parts.count == 2, let t = Int(parts[0]), let m = Int(parts[1]), (1...16).contains(m), (1...m).contains(t), t > 1 || m == 1 else {
            throw ValidationError("--split takes T-of-M with 2 ≤ T ≤ M ≤ 16 (or 1-of-1), for example 2-of-3")
        }
        return SLIP39Scheme.Group(threshold: t, count: m)
    }

    /// The rule in words: "any 2 of the 3 holders' mnemonics".
    /// Says when the words of `header`'s secret are only as strong as the secret is unguessable.
    static func warnIfGuessable(_ header: BundleHeader) {
        guard let warning = SecretWords.guessingWarning(header) else { return }
        Terminal.standardError("vault: warning: " + warning)
        Terminal.standardError("vault: hint: " + SecretWords.guessingHint)
    }

    static func rule(_ header: BundleHeader, split: SLIP39Scheme.Group?) -> String {
        guard let split else { return "any \(header.threshold) of these \(header.count) holders' mnemonics recover it" }
        return "any \(header.threshold) of the \(header.count) holders' groups recover it, each group with \(split.threshold) of its \(split.count) mnemonics"
    }

    /// Each holder's name (index i at i - 1): published in the header, else as this keystore
    /// knows the holder, else by index.
    static func holderNames(_ header: BundleHeader, keystore: Keystore, identity: Identity) throws -> [String] {
        let peers = try keystore.peers()
        return (1...header.count).map { index in
            if let label = header.labels?[index - 1].value { return label }
            if index == header.holderIndex { return identity.label.value }
            return peers.first { header.index(of: $0.card.agreementKey) == index }?.label.value ?? "holder \(index)"
        }
    }

    /// The holder indices `labels` name, or by default all the dealer may have, or this
    /// holder's own.
    ///
    /// The dealer chose the holders and hands out their shares: it may write anyone's words.
    /// A holder holds one share and may write that one only: writing another's would be
    /// dealing a share of a secret it did not deal, behind its dealer's back.
    static func holders(_ labels: [String], of secret: StoredSecret, names: [String], keystore: Keystore) throws -> [Int] {
        let header = secret.header
        let dealer = secret.role == .dealer
        guard !labels.isEmpty else { return dealer ? Array(1...header.count) : [header.holderIndex] }
        return try labels.map { label in
            let index = names.firstIndex { $0.lowercased() == label.lowercased() }.map { $0 + 1 }
                ?? (try? keystore.peer(named: label)).flatMap { header.index(of: $0.card.agreementKey) }
            guard let index else { throw VaultError.notAHolder(label: label) }
            guard dealer || index == header.holderIndex else {
                throw CLIError.unavailable("only the dealer writes other holders' words; you hold share \(header.holderIndex) of this secret",
                                           hint: "ask '\(names[index - 1])' to export its own words, or the dealer to export them")
            }
            return index
        }
    }
}

/// Writes text to standard output.
func writeStandardOutput(_ text: String) throws {
    try Array(text.utf8).withUnsafeBytes { try writeStandardOutput($0) }
}
