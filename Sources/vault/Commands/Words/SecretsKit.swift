import ArgumentParser
import Foundation
import VaultCore

struct SecretsKit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kit",
        abstract: "Print your share of a secret as a recovery kit: a PDF to keep on paper.",
        discussion: """
            The kit is a PDF of a few A4 pages: who holds it, what it opens and how many kits \
            recover it, the dealer's fingerprint, your share as QR codes (split over several \
            where needed), with --words your share as SLIP-39 words too, and instructions \
            that a person who has never heard of vault can follow, with vault ('vault scan \
            --image') and, from the words, without it.

            Each holder prints its own kit: the kit is the share in the clear (key share and \
            piece), which only its holder can open. Any k kits recover the secret with no \
            keystore at all. A secret whose piece does not fit in \(KitCodes.maximumCodes) QR \
            codes is too large for paper: its kit says so, carries no share, and names where \
            the pieces are kept.

            --words recovers the secret first, as 'vault secrets export-words' does (it needs \
            k - 1 other holders' pieces, from the LAN or --piece files), for a key or a note of \
            16 to 32 bytes.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The secret's name or id.", valueName: "id"), completion: Completions.secret)
    var secret: String

    @Option(name: [.customLong("out-dir"), .customLong("paper")], help: ArgumentHelp("Write the kit into this directory (made if missing).", valueName: "dir"))
    var outDir: String

    @Flag(help: "Print your SLIP-39 words on the kit too (recovers the secret first).")
    var words = false

    @Option(help: ArgumentHelp("With --words: two levels, your share as T of M word lists (for example 2-of-3).", valueName: "T-of-M"))
    var split: String?

    @Flag(help: "Replace an existing kit file.")
    var force = false

    @OptionGroup var passphrase: WordsPassphraseOption
    @OptionGroup var content: SecretContentOptions

    func validate() throws {
        _ = try WordsLayout.split(split)
        if split != nil && !words { throw ValidationError("--split is for --words") }
    }

    func run() async throws {
        let keystore = try home.openKeystore()
        let stored = try keystore.secret(matching: self.secret)
        let header = stored.header
        let split = try WordsLayout.split(self.split)
        if words {
            try SecretWords.checkType(header)
            _ = try SecretWords.scheme(for: header, split: split)
        }
        let identity = try keys.unlock(keystore)
        let names = try WordsLayout.holderNames(header, keystore: keystore, identity: identity)
        let name = names[header.holderIndex - 1]
        let dealer = header.dealer == identity.card ? identity.label.value
            : try keystore.peers().first { $0.card == header.dealer }?.label.value ?? "unknown"
        let id = String(header.secretIDHex.prefix(16))
        let directory = try OutputDirectory(outDir, announce: false)
        let path = outDir + "/" + ReceivedFileName.safeName(for: "\(id)-\(name).pdf", fallback: "\(id)-holder-\(header.holderIndex).pdf")
        let file = try OutputFile(path: path, replace: force, hiddenUntilCommit: true)
        let share = KitShare.fitsOnPaper(stored, name: name) ? try KitShare.own(stored, keystore: keystore, identity: identity, name: name) : nil
        var mnemonics: [Mnemonic] = []
        var withPassphrase = false
        if words {
            let phrase = try passphrase.read(choosing: true)
            withPassphrase = phrase.count > 0
            let value = try await content.recover(stored, keystore: keystore, identity: identity, limit: SecretWords.maximumLength)
            try SecretWords.checkContent(length: value.count)
            mnemonics = try SecretWords.deal(value, header: header, passphrase: phrase, split: split)[header.holderIndex - 1]
        }
        let rule = "the words of any \(header.threshold) of the \(header.count) holders"
            + (split.map { ", each with \($0.threshold) of its \($0.count) word lists" } ?? "")
        let kit = KitContent(header: header, share: share, holderName: name, holderNames: names, dealerName: dealer, words: mnemonics,
                             wordsRule: rule, wordsGroupThreshold: split?.threshold ?? 1, wordsPassphrase: withPassphrase,
                             noWordsReason: words ? nil : "it was printed without them")
        do {
            try KitPage.write(kit, to: file)
            try file.commit()
        } catch {
            directory.removeIfEmpty()
            throw error
        }
        directory.announce()
        if share == nil {
            Terminal.standardError("vault: warning: secret \(id)'s piece of \(KitShare.pieceLength(of: stored)) bytes is too large for paper: the kit carries no share, and says where the pieces are kept")
        }
        Terminal.standardError("wrote the recovery kit of holder '\(TerminalText.escaped(name))' (\(header.holderIndex) of \(header.count)) into \(TerminalText.escaped(path))"
            + (mnemonics.isEmpty ? "" : ", with its SLIP-39 words"))
        if !mnemonics.isEmpty { WordsLayout.warnIfGuessable(header) }
    }
}
