import Foundation

/// A message share a recipient holds in a file and has checked: the sender's signature,
/// the piece against the sender's commitment, and its own sealed key share.
public struct ReceivedShare {
    /// The share's verified header.
    public let header: MessageHeader
    /// Where the share is.
    public let path: String
    let keyShare: SecureBytes
    let pieceOffset: UInt64

    /// A share that `incoming` checked while it was written to `path`, whole and unchanged.
    public init(checked incoming: IncomingMessageShare, path: String, recipient: Identity) throws(VaultError) {
        guard let header = incoming.header else { throw .truncated(what: "the message share") }
        self.header = header
        self.path = path
        keyShare = try MessageShare.openBox(boxes: incoming.boxes, header: header, recipient: recipient)
        pieceOffset = UInt64(incoming.prefixLength + incoming.boxes.count)
    }

    /// Reads and checks the share in `path`.
    public init(path: String, recipient: Identity, maximumLength: UInt64 = IncomingMessageShare.largest) throws {
        var incoming = IncomingMessageShare(maximumLength: maximumLength)
        let source = try FileSource(path: path)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            let count = try source.read(into: buffer)
            if count == 0 { break }
            try incoming.take(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
        try incoming.finish()
        try self.init(checked: incoming, path: path, recipient: recipient)
    }
}

/// What a message held besides its content.
public struct OpenedMessage: Sendable {
    /// The header its shares agree on (the first share's).
    public let header: MessageHeader
    /// The payload's fields (a file's name).
    public let metadata: SecretMetadata
}

/// Rebuilds a message from k checked shares.
public enum MessageOpening {
    /// Combines k of `shares` (shares of one message with distinct indices; any k of them
    /// will do, as each was checked on receipt) and streams the content into `output`, in
    /// order. Output receives only authenticated plaintext; when it fails part way, the
    /// caller discards what it wrote.
    public static func open(
        _ shares: [ReceivedShare], metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in },
        output: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> OpenedMessage {
        guard let first = shares.first else { throw VaultError.tooFewPieces(have: 0, need: 2, missing: []) }
        let header = first.header
        if let foreign = shares.first(where: { !$0.header.agrees(with: header) }) {
            throw VaultError.mixedSecrets(file: foreign.path, secretID: header.messageIDHex)
        }
        var chosen: [ReceivedShare] = []
        for share in shares {
            guard !chosen.contains(where: { $0.header.index == share.header.index }) else { throw VaultError.duplicateIndex(share.header.index) }
            chosen.append(share)
        }
        guard chosen.count >= header.threshold else {
            let present = Set(chosen.map(\.header.index))
            throw VaultError.tooFewPieces(have: chosen.count, need: header.threshold,
                                          missing: (1...header.count).filter { !present.contains($0) }.map { "share \($0)" })
        }
        chosen = Array(chosen.prefix(header.threshold))
        let opening = PayloadOpening(type: header.type, passwordProtected: false, password: { throw VaultError.passwordRequired },
                                     metadataReady: metadataReady, output: output)
        let dataKey = opening.start(keyShares: chosen.map { (x: UInt8($0.header.index), share: $0.keyShare) })
        let pieces = try chosen.map { RecoveryLanes.Piece(x: UInt8($0.header.index), file: try FileSource(path: $0.path), offset: $0.pieceOffset) }
        try opening.open(ciphertextLength: header.ciphertextLength, pieces: pieces, key: dataKey)
        return OpenedMessage(header: header, metadata: opening.metadata)
    }
}
