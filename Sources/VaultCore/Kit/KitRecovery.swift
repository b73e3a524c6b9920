import CVaultFile
import Foundation

/// Rebuilds a secret from k recovery kits alone: no keystore, no identity, no network.
public enum KitRecovery {
    /// What recovery used, for the person to compare with the paper.
    public struct Outcome {
        /// The dealer's card, whose signature every kit's header carries.
        public let dealer: KeyCard
        /// The secret's type and fields.
        public let recovered: RecoveredSecret
        /// The holders whose kits were combined.
        public let used: [KitShare]
    }

    /// Checks every share (the dealer's signature when parsed; here its key share and
    /// piece, and that all are of one secret and one dealer) and combines k of them into
    /// `output`, as ``SecretRecovery`` does with released pieces.
    public static func recover(
        _ shares: [KitShare], password: @escaping () throws -> SecureBytes,
        metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in },
        output: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Outcome {
        guard let first = shares.first else { throw VaultError.invalidKit("no kit was read") }
        let header = first.header
        var chosen: [KitShare] = []
        for share in shares {
            guard agree(share.header, header) else {
                throw VaultError.invalidKit("the kits are of different secrets or dealers (\(header.secretIDHex.prefix(16)) and \(share.header.secretIDHex.prefix(16)))")
            }
            if let problem = share.problem() {
                throw VaultError.invalidKit("holder \(share.header.holderIndex)'s kit is forged or damaged: \(problem)")
            }
            if !chosen.contains(where: { $0.header.holderIndex == share.header.holderIndex }) { chosen.append(share) }
        }
        guard chosen.count >= header.threshold else {
            let need = header.threshold - chosen.count
            throw VaultError.invalidKit("read \(chosen.count) kit\(chosen.count == 1 ? "" : "s") of the \(header.threshold) needed (holder"
                + "\(chosen.count == 1 ? "" : "s") \(chosen.map { String($0.header.holderIndex) }.joined(separator: ", "))): \(need) more needed")
        }
        chosen = Array(chosen.sorted { $0.header.holderIndex < $1.header.holderIndex }.prefix(header.threshold))
        let opening = PayloadOpening(type: header.type, passwordProtected: header.passwordProtected, password: password,
                                     metadataReady: metadataReady, output: output)
        let dataKey = opening.start(keyShares: chosen.map { (x: UInt8($0.header.holderIndex), share: $0.keyShare) })
        // The pieces, ciphertext, are read as from piece files: from files in memory only.
        let pieces = try chosen.map { share -> RecoveryLanes.Piece in
            let fd = vault_memory_file("vault-kit-piece")
            guard fd >= 0 else { throw VaultError.fileSystem(path: "a memory file", reason: String(cString: strerror(errno))) }
            let file = FileSource(fileDescriptor: fd, path: "holder \(share.header.holderIndex)'s kit")
            try share.piece.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let count = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { throw VaultError.fileSystem(path: "a memory file", reason: String(cString: strerror(errno))) }
                    offset += count
                }
            }
            return RecoveryLanes.Piece(x: UInt8(share.header.holderIndex), file: file, offset: 0)
        }
        try opening.open(ciphertextLength: header.ciphertextLength, pieces: pieces, key: dataKey)
        return Outcome(dealer: header.dealer, recovered: RecoveredSecret(type: header.type, metadata: opening.metadata, pieces: []),
                       used: chosen)
    }

    /// Whether two holders' headers are of one secret: all that is not the holder's own.
    static func agree(_ a: BundleHeader, _ b: BundleHeader) -> Bool {
        a.secretID == b.secretID && a.dealer == b.dealer && a.createdAt == b.createdAt && a.type == b.type && a.description == b.description
            && a.threshold == b.threshold && a.count == b.count && a.ciphertextLength == b.ciphertextLength
            && a.passwordProtected == b.passwordProtected && a.commitments == b.commitments && a.possessionKeys == b.possessionKeys
    }
}
