import Foundation

/// What a recovery kit says, in plain words for a person who has never heard of vault:
/// who holds it, what it opens, and how to recover, with vault and, where the kit has
/// SLIP-39 words, without it.
public struct KitContent {
    /// The secret's header, as this holder's share signs it.
    public let header: BundleHeader
    /// The share to print; nil when it does not fit on paper.
    public let share: KitShare?
    /// This holder's name.
    public let holderName: String
    /// Every holder's name, index i at i - 1 (where the pieces are kept when too large).
    public let holderNames: [String]
    /// The dealer's name as the kit's maker knows it.
    public let dealerName: String
    /// This holder's SLIP-39 mnemonics (none, one, or a group's).
    public let words: [Mnemonic]
    /// Whose words rebuild the secret ("the words of any 2 of the 3 holders").
    public let wordsRule: String
    /// With a split, the group's threshold (T of M).
    public let wordsGroupThreshold: Int
    /// Whether the words were made under a SLIP-39 passphrase.
    public let wordsPassphrase: Bool
    /// Why the kit has no words, when it has none.
    public let noWordsReason: String?
    /// When the kit was made.
    public let made: Date

    public init(header: BundleHeader, share: KitShare?, holderName: String, holderNames: [String], dealerName: String,
                words: [Mnemonic], wordsRule: String, wordsGroupThreshold: Int, wordsPassphrase: Bool, noWordsReason: String?,
                made: Date = VaultClock.now()) {
        self.header = header
        self.share = share
        self.holderName = holderName
        self.holderNames = holderNames
        self.dealerName = dealerName
        self.words = words
        self.wordsRule = wordsRule
        self.wordsGroupThreshold = wordsGroupThreshold
        self.wordsPassphrase = wordsPassphrase
        self.noWordsReason = noWordsReason
        self.made = made
    }

    var id: String { String(header.secretIDHex.prefix(16)) }

    /// "a note", "a key".
    var what: String {
        let article = header.type == .key ? "an encryption key" : "a \(header.type)"
        return header.description.isEmpty ? article : "\(article), \"\(header.description)\""
    }

    /// The facts at the top of the first page.
    var facts: [(String, String)] {
        var out: [(String, String)] = [
            ("Held by", "\(holderName) (holder \(header.holderIndex) of \(header.count))"),
            ("Opens", "\(what), secret \(id)"),
            ("Needs", "any \(header.threshold) of the \(header.count) holders' kits (fewer tell nothing)"),
            ("Dealt by", "\(dealerName), fingerprint \(header.dealer.fingerprint)"),
        ]
        if header.passwordProtected { out.append(("Password", "the secret is also locked by a password, which the dealer keeps")) }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        out.append(("Printed", formatter.string(from: made)))
        return out
    }

    /// The instructions: headings and paragraphs, in order. A line starting with "$ " is a
    /// command to type.
    var instructions: [(heading: String, paragraphs: [String])] {
        var out: [(String, [String])] = []
        out.append(("What this paper is", [
            "A secret (\(what)) was split into \(header.count) parts, one for each of \(header.count) people or places, with a program called vault. "
                + "This paper is the part held by \(holderName). Any \(header.threshold) of the \(header.count) parts together rebuild the secret; "
                + "fewer than \(header.threshold) reveal nothing about it.",
            "Keep this paper private and safe, like a key: whoever gathers \(header.threshold) of the parts can read the secret. "
                + "A photo of it is a copy of the part: take one only to recover, and delete it afterwards.",
        ]))
        if share != nil {
            out.append(("How to recover with vault", [
                "1. On any computer, install vault (it is free software). You need no account and no keystore.",
                "2. Gather the pages with QR codes of \(header.threshold) holders, this one among them. Take a clear photo of each page, "
                    + "or scan it. For a PDF file, make an image of each page first:",
                "$ pdftoppm -r 150 -png kit.pdf page",
                "3. Give all the images at once, in any order:",
                "$ vault scan --image page-1.png --image page-2.png -o secret",
                "4. vault checks the dealer's signature on every code and shows the dealer's fingerprint: "
                    + "it must be the one printed on this page (\(header.dealer.fingerprint)).",
            ] + (header.passwordProtected ? ["5. vault then asks for the secret's password, which the dealer set and keeps apart from the kits."] : [])))
        } else {
            out.append(("This secret is too large for paper", [
                "Its pieces are too long to print as QR codes, so this kit carries no share. Each holder's part is kept by vault, "
                    + "in that holder's keystore (on Linux, ~/.local/share/vault, or where VAULT_HOME points): "
                    + holderNames.enumerated().map { "\($0.element) (holder \($0.offset + 1))" }.joined(separator: ", ") + ".",
                "To recover, a holder runs, on its own machine, while the others run 'vault serve' or release their pieces:",
                "$ vault recover \(id) -o secret",
            ]))
        }
        if !words.isEmpty {
            var paragraphs = [
                "The words on this paper are the same part in SLIP-39, an open standard for splitting a secret into words "
                    + "(github.com/satoshilabs/slips, slip-0039.md). Any program that implements SLIP-39 can rebuild the secret from "
                    + "\(wordsRule), with no vault at all.",
                "For example with Trezor's free reference program, on a computer with Python:",
                "$ pip install 'shamir-mnemonic[cli]'",
                // The reference asks for a passphrase only when told to (-p), and wants whole words.
                wordsPassphrase ? "$ shamir recover -p" : "$ shamir recover",
                "It asks for each holder's words in turn (type every word in full, in order)"
                    + (wordsPassphrase ? ", then for the passphrase," : "") + " and prints the secret in hexadecimal. "
                    + (header.type == .key ? "For this key, the hexadecimal is the key itself."
                        : "For this note, turn the hexadecimal back into text, for example with:"),
            ]
            if header.type != .key { paragraphs.append("$ echo HEX | xxd -r -p") }
            if words.count > 1 {
                paragraphs.append("This holder's part is split in turn: any \(wordsGroupThreshold) of its \(words.count) word lists rebuild it.")
            }
            paragraphs.append(wordsPassphrase
                ? "These words were made with a SLIP-39 passphrase, which the dealer keeps apart; -p makes the program ask for it. A wrong passphrase gives a wrong secret without any warning."
                : "These words were made without a passphrase: if a program asks for one, give none (press Enter).")
            if header.passwordProtected {
                paragraphs.append("The password that locks the secret in vault does not lock the words: they open it with the SLIP-39 passphrase alone.")
            }
            paragraphs.append("vault reads the words back too: 'vault recover-words', then type or paste them (there, the first four letters of a word are enough).")
            out.append(("How to recover without vault, from the words", paragraphs))
        } else if let noWordsReason {
            out.append(("Without vault", [
                "This kit has no SLIP-39 words (\(noWordsReason)). Without vault, the QR codes can be read by any QR reader; "
                    + "their format is published with vault (FORMAT.md, \"Recovery kits\"), in enough detail for a programmer "
                    + "to rebuild the secret from \(header.threshold) kits.",
            ]))
        }
        return out
    }
}
