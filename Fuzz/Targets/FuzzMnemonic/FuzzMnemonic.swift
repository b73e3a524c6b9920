import FuzzSupport
@testable import VaultCore

/// Mnemonics as a person types or pastes them: the reader, then each share's parser, whose
/// every accepted share must write back to the same words.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = SecureBytes(copying: UnsafeBufferPointer(start: data, count: size))
    guard let mnemonics = try? MnemonicReader.mnemonics(in: text) else { return 0 }
    for mnemonic in mnemonics {
        guard let share = try? SLIP39Share(mnemonic) else { continue }
        let again = share.mnemonic()
        fuzzCheck(again.count == mnemonic.count && again.values.constantTimeEquals(mnemonic.values), "mnemonic round trip")
    }
    var progress = SLIP39Progress()
    for (number, mnemonic) in mnemonics.enumerated() where (try? progress.add(mnemonic, number: number + 1)) == nil { return 0 }
    if progress.isComplete { _ = try? progress.combine(passphrase: SecureBytes(count: 0)) }
    return 0
}
