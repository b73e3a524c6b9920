/// One SLIP-39 share as words: their 10-bit values (indices into ``SLIP39Wordlist``), in
/// locked memory, since the words are the share. Text is made and read in locked memory
/// too, never as a `String`.
public final class Mnemonic {
    /// Two bytes a word, native order.
    let values: SecureBytes

    /// The number of words.
    public var count: Int { values.count / 2 }

    init(count: Int) { values = SecureBytes(count: 2 * count) }

    func withValues<R>(_ body: (UnsafeBufferPointer<UInt16>) throws -> R) rethrows -> R {
        try values.withUnsafeBytes { try body($0.bindMemory(to: UInt16.self)) }
    }

    func withMutableValues<R>(_ body: (UnsafeMutableBufferPointer<UInt16>) throws -> R) rethrows -> R {
        try values.withUnsafeMutableBytes { try body($0.bindMemory(to: UInt16.self)) }
    }

    /// The words separated by `separator` (a space), in locked memory.
    public func text(separator: UInt8 = 0x20) -> SecureBytes {
        withValues { words in
            let length = words.reduce(0) { $0 + SLIP39Wordlist.bytes[Int($1)].count } + max(0, words.count - 1)
            let out = SecureBytes(count: length)
            out.withUnsafeMutableBytes { out in
                var offset = 0
                for (position, word) in words.enumerated() {
                    if position > 0 { out[offset] = separator; offset += 1 }
                    for byte in SLIP39Wordlist.bytes[Int(word)] { out[offset] = byte; offset += 1 }
                }
            }
            return out
        }
    }

    /// The word at `position` (from 0), for a sheet that numbers its words. A word alone
    /// tells little; the caller prints it where the person asked for the share.
    public func word(at position: Int) -> String {
        withValues { SLIP39Wordlist.words[Int($0[position])] }
    }
}
