/// Reads mnemonics that a person typed or pasted: words separated by spaces, commas or new
/// lines, any case, a word's number before it allowed ("1. academic 2. acid"), lines that
/// start with '#' left out, each word
/// whole or by its first four letters or more, which the standard makes unique. The text
/// is in locked memory and read byte by byte, never as a `String`.
///
/// A mnemonic ends at an empty line, at the end of a line of 20 words or more (one
/// mnemonic a line, as pasted), or at the end of a line where the words gathered over
/// several lines (as copied from paper, a few a line) make a mnemonic whose checksum
/// verifies.
public enum MnemonicReader {
    /// The largest text read: 16 groups of 16 mnemonics, generously spaced, stay below it.
    public static let maximumText = 64 << 10

    /// A word that is not in the list, by its place (mnemonic and word, from 1).
    static func unknownWord(_ word: [UInt8], mnemonic: Int, position: Int) -> VaultError {
        let typed = String(decoding: word, as: UTF8.self)
        // A spelling suggestion (not a checksum correction, which the standard advises
        // against): the one word that starts as it does, by four letters, else three.
        let suggestion = [4, 3].lazy.compactMap { length -> Int? in
            guard word.count >= length else { return nil }
            let matches = SLIP39Wordlist.bytes.indices.filter { SLIP39Wordlist.bytes[$0].starts(with: word.prefix(length)) }
            return matches.count == 1 ? matches[0] : nil
        }.first
        return .invalidWords("mnemonic \(mnemonic), word \(position): '\(TerminalText.escaped(typed))' is not a SLIP-39 word"
            + (suggestion.map { "; did you mean '\(SLIP39Wordlist.words[$0])'?" } ?? ""))
    }

    /// The value of `word` (lowercase letters): the word itself, or the one word it starts
    /// with when it has four letters or more.
    static func value(of word: [UInt8]) -> UInt16? {
        // The list is sorted: a binary search for the first word not below it.
        var low = 0, high = SLIP39Wordlist.bytes.count
        while low < high {
            let middle = (low + high) / 2
            if SLIP39Wordlist.bytes[middle].lexicographicallyPrecedes(word) { low = middle + 1 } else { high = middle }
        }
        guard low < SLIP39Wordlist.bytes.count else { return nil }
        let candidate = SLIP39Wordlist.bytes[low]
        if candidate == word { return UInt16(low) }
        guard word.count >= 4, candidate.starts(with: word) else { return nil }
        return UInt16(low)
    }

    /// Every mnemonic in `text`.
    public static func mnemonics(in text: SecureBytes) throws(VaultError) -> [Mnemonic] {
        guard text.count <= maximumText else { throw .invalidWords("the text is longer than \(maximumText) bytes") }
        var mnemonics: [Mnemonic] = []
        // The words of the mnemonic being read, as values, in locked memory.
        let pending = Mnemonic(count: SLIP39Share.maximumWords)
        var count = 0
        var word: [UInt8] = []
        defer { word.wipe() }
        var failure: VaultError?

        func endWord() {
            defer { word.wipe(); word.removeAll(keepingCapacity: true) }
            guard failure == nil, !word.isEmpty else { return }
            // A word's number ("1.", "12)") is skipped.
            if word.allSatisfy({ (0x30...0x39).contains($0) }) { return }
            guard count < SLIP39Share.maximumWords else {
                failure = .invalidWords("mnemonic \(mnemonics.count + 1) has more than \(SLIP39Share.maximumWords) words")
                return
            }
            guard let value = value(of: word) else {
                failure = unknownWord(word, mnemonic: mnemonics.count + 1, position: count + 1)
                return
            }
            pending.withMutableValues { $0[count] = value }
            count += 1
        }
        func endMnemonic() {
            guard failure == nil, count > 0 else { return }
            let mnemonic = Mnemonic(count: count)
            mnemonic.withMutableValues { out in pending.withValues { for i in 0..<count { out[i] = $0[i] } } }
            mnemonics.append(mnemonic)
            count = 0
        }
        /// At a line's end: the words so far end a mnemonic if the line held one whole, or
        /// if they make one.
        func endLine(blank: Bool, words: Int) {
            guard failure == nil else { return }
            if blank || words >= SLIP39Share.minimumWords { endMnemonic(); return }
            guard count >= SLIP39Share.minimumWords else { return }
            let candidate = Mnemonic(count: count)
            candidate.withMutableValues { out in pending.withValues { for i in 0..<count { out[i] = $0[i] } } }
            if (try? SLIP39Share(candidate)) != nil { endMnemonic() }
        }

        var lineHasWords = false, lineStart = 0, comment = false, lineEmpty = true
        text.withUnsafeBytes { bytes in
            for byte in bytes {
                // A line that starts with '#' is a comment ('vault secrets export-words'
                // names each holder so), read as an empty line.
                if comment && byte != 0x0a { continue }
                if lineEmpty && byte == 0x23 { comment = true; continue }
                if byte != 0x20 && byte != 0x09 { lineEmpty = false }
                switch byte {
                case 0x61...0x7a: word.append(byte)
                case 0x41...0x5a: word.append(byte | 0x20)
                case 0x30...0x39: word.append(byte)
                case 0x0a:
                    endWord()
                    endLine(blank: !lineHasWords, words: count - lineStart)
                    lineHasWords = false
                    lineStart = count
                    comment = false
                    lineEmpty = true
                    continue
                case 0x20, 0x09, 0x0d, 0x2c, 0x2e, 0x29, 0x3a, 0x2d: endWord()
                default:
                    endWord()
                    if failure == nil { failure = .invalidWords("mnemonic \(mnemonics.count + 1) holds a character that is not a letter") }
                }
                if (0x61...0x7a).contains(byte | 0x20) { lineHasWords = true }
            }
        }
        endWord()
        endMnemonic()
        if let failure { throw failure }
        return mnemonics
    }

    /// What is wrong with `mnemonic`, after "mnemonic N ": for a checksum that fails, the
    /// one word whose change would make it verify, when there is one (the standard lets an
    /// implementation say where an error is, though not what the right word would be).
    static func words(for defect: SLIP39Share.Defect, in mnemonic: Mnemonic) -> String {
        switch defect {
        case .tooShort(let count):
            return "has \(count) words; a SLIP-39 mnemonic has \(SLIP39Share.minimumWords) or more (20 for a 16-byte secret, 33 for a 32-byte one)"
        case .tooLong(let count): return "has \(count) words, more than \(SLIP39Share.maximumWords)"
        case .length(let count): return "has \(count) words, a length no SLIP-39 mnemonic has: a word is missing or one too many"
        case .padding: return "is invalid: its share value has padding bits that are not zero"
        case .groupThreshold: return "is invalid: its group threshold is greater than its group count"
        case .checksum:
            guard let position = suspect(in: mnemonic) else {
                return "fails its checksum: two or more words are wrong, or a word is missing"
            }
            return "fails its checksum: word \(position + 1) ('\(mnemonic.word(at: position))') is wrong, or a word is missing"
        }
    }

    /// The one position where another word would make the checksum verify, if exactly one
    /// does. The code's distance makes two such positions impossible for a single error.
    static func suspect(in mnemonic: Mnemonic) -> Int? {
        let trial = Mnemonic(count: mnemonic.count)
        trial.withMutableValues { out in mnemonic.withValues { for i in 0..<$0.count { out[i] = $0[i] } } }
        var found: [Int] = []
        for position in 0..<mnemonic.count {
            let original = trial.withValues { $0[position] }
            for candidate in UInt16(0)..<1024 where candidate != original {
                trial.withMutableValues { $0[position] = candidate }
                let first = trial.withValues { UInt32($0[0]) << 10 | UInt32($0[1]) }
                if trial.withValues({ RS1024.verify($0, extendable: first >> 4 & 1 == 1) }) {
                    found.append(position)
                    break
                }
            }
            trial.withMutableValues { $0[position] = original }
        }
        return found.count == 1 ? found[0] : nil
    }
}
