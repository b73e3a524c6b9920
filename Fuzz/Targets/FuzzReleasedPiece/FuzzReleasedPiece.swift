import Foundation
import FuzzSupport
@testable import VaultCore

/// A released piece, opened by holder 1 of a fixed 2-of-3 secret (the input is written to a
/// file, as `recover --piece` reads one). Seeds carry the right magic, ids and keys, so the
/// fuzzer starts past the first checks.
let path = NSTemporaryDirectory() + "/vault-fuzz-piece-\(getpid())"
let holder = Identity.generate(label: try! Label("fuzz"), random: SeededRandom()).0
let secret = BundleHeader(
    secretID: Array(repeating: 7, count: 16), createdAt: 0, type: .note, description: "", threshold: 2, count: 3, holderIndex: 1,
    ciphertextLength: 100, dealer: holder.card, holderKey: holder.card.agreementKey, senderKey: Array(repeating: 9, count: 32),
    passwordProtected: false, replaces: nil,
    keyID: nil, labels: nil, commitments: Array(repeating: Array(repeating: 0, count: 32), count: 3),
    possessionKeys: Array(repeating: Array(repeating: 0, count: 32), count: 3),
    holderTags: (1...3).map { BundleHeader.holderTag(secretID: Array(repeating: 7, count: 16), agreementKey: Array(repeating: UInt8($0), count: 32)) })

/// Deterministic, so a crash reproduces.
struct SeededRandom: RandomSource {
    func fill(_ buffer: UnsafeMutableRawBufferPointer) { for i in buffer.indices { buffer[i] = UInt8(truncatingIfNeeded: i &* 131 &+ 7) } }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FileManager.default.createFile(atPath: path, contents: Data(bytes: data, count: size))
    _ = try? ReleasedPiece.open(path: path, secret: secret, identity: holder)
    return 0
}
