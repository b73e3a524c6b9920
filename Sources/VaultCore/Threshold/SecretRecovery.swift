import Foundation

/// What recovery did with each piece.
public struct PieceOutcome: Sendable {
    /// Where the piece came from: "your share" or a file.
    public let source: String
    /// The holder index it claims.
    public let index: Int?
    /// The holder who released it, by the card known for the key that signed it (the
    /// dealer's or a trusted peer's); nil for your own share and for a sender not known.
    public let sender: KeyCard?
    /// Nil if it verified; otherwise why it was set aside, starting "forged:" when its
    /// signer's own release contradicts the dealer's signed header, "damaged:" when it was
    /// altered or cut on the way (nobody is blamed for that).
    public let problem: String?
}

/// A recovered secret's type and encrypted fields; its content went to the output.
public struct RecoveredSecret: Sendable {
    /// The kind of secret.
    public let type: SecretType
    /// Its encrypted fields.
    public let metadata: SecretMetadata
    /// Every piece considered, with what became of it.
    public let pieces: [PieceOutcome]
}

/// Rebuilds a secret from this holder's share and pieces released by others.
public enum SecretRecovery {
    /// Verifies every piece against the dealer's signed header, then combines k good ones.
    ///
    /// A piece that fails (forged, or a damaged release) is reported and left out; recovery goes on while k good
    /// pieces remain. Output receives only authenticated plaintext; when it fails part way,
    /// the caller discards what it wrote.
    public static func recover(
        _ secret: StoredSecret, keystore: Keystore, identity: Identity, pieceFiles: [String],
        password: @escaping () throws -> SecureBytes, metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in },
        verified: (PieceOutcome) -> Void = { _ in }, progress: ProgressMeter? = nil,
        output: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> RecoveredSecret {
        let header = secret.header
        let own = try ShareBundle.openBox(secret.box, header: header, holder: identity)
        var candidates = [Candidate(index: header.holderIndex, keyShare: own, source: "your share", sender: nil, file: nil, release: nil)]
        var outcomes: [PieceOutcome] = []
        var claimed: Set<Int> = [header.holderIndex]
        let trusted = try keystore.peers().map(\.card)
        for path in pieceFiles {
            let reading = try ReleasedPiece.read(path: path, secret: header, identity: identity, trusted: trusted)
            let from: Int
            switch reading {
            case .opened(let opened): from = opened.header.from
            case .setAside(let release, _, _): from = release.from
            }
            guard claimed.insert(from).inserted else { throw VaultError.duplicateIndex(from) }
            switch reading {
            case .opened(let opened):
                candidates.append(Candidate(index: from, keyShare: opened.keyShare, source: path, sender: opened.sender,
                                            file: (path, opened.bodyOffset), release: opened.header))
            case .setAside(_, let sender, let problem):
                // One bad release costs its own piece only: recovery goes on with the others.
                let outcome = PieceOutcome(source: path, index: from, sender: sender, problem: problem)
                verified(outcome)
                outcomes.append(outcome)
            }
        }

        var good: [Candidate] = []
        // The work: every candidate piece read once to verify it, then the ciphertext rebuilt.
        progress?.expect(UInt64(candidates.count) * header.pieceLength + header.ciphertextLength)
        for candidate in candidates {
            let problem = try candidate.file == nil
                ? keystore.withPiece(secret) {
                    try verify(candidate, header: header, source: MeteredSource($0, meter: progress))
                }
                : verify(candidate, header: header,
                         source: MeteredSource(try FileSource.skipping(candidate.file!.offset, of: candidate.file!.path), meter: progress))
            let outcome = PieceOutcome(source: candidate.source, index: candidate.index, sender: candidate.sender, problem: problem)
            verified(outcome)
            outcomes.append(outcome)
            if problem == nil { good.append(candidate) }
        }
        guard good.count >= header.threshold else {
            let present = Set(good.map(\.index))
            let missing = (1...header.count).filter { !present.contains($0) }.map { index in
                header.labels.map { "\($0[index - 1]) (index \(index))" } ?? "index \(index)"
            }
            throw VaultError.tooFewPieces(have: good.count, need: header.threshold, missing: missing)
        }

        let chosen = Array(good.prefix(header.threshold))
        let dataKey = Shamir.combine(chosen.map { (x: UInt8($0.index), share: $0.keyShare) })
        // A key is exactly 32 bytes (FORMAT.md §10): a shorter or longer one is refused, never
        // handed on as a weaker key.
        var keyBytes = 0
        let content: (UnsafeRawBufferPointer) throws -> Void = header.type != .key ? output : { bytes in
            keyBytes += bytes.count
            guard keyBytes <= SharedKey.length else { throw VaultError.badKey }
            try output(bytes)
        }
        let payload = PayloadParser(expectedType: header.type.rawValue, metadataReady: metadataReady, content: content)
        let layer = PasswordLayerParser(payload: payload, expected: header.passwordProtected, password: password)
        let outer = PayloadOpener(key: dataKey, emit: layer.write)
        try keystore.withPiece(secret) { ownSource in
            let readers = try chosen.map { candidate -> PieceReader in
                let source: any ByteSource = try candidate.file.map { try FileSource.skipping($0.offset, of: $0.path) } ?? ownSource
                return PieceReader(source: source, length: header.pieceLength, trailer: candidate.release == nil ? 0 : 64)
            }
            let decoder = Dispersal.Decoder(xs: chosen.map { UInt8($0.index) })
            let layout = Dispersal.segments(dataLength: header.ciphertextLength, k: header.threshold)
            var stripe = [UInt8](repeating: 0, count: header.threshold * Dispersal.segmentLength)
            let stripes = Array(repeating: (Dispersal.segmentLength, header.threshold * Dispersal.segmentLength), count: Int(layout.full))
                + (layout.last > 0 ? [(layout.last, layout.lastData)] : [])
            for (segment, data) in stripes {
                let segments = try readers.map { try $0.read(segment) }
                try stripe.withUnsafeMutableBytes { target in
                    withBuffers(segments) { decoder.decode($0, into: target) }
                    // The dealer zero-pads the last stripe (FORMAT.md §8); other padding is a
                    // second encoding of the same ciphertext, so it is refused.
                    guard UnsafeRawBufferPointer(target)[data..<header.threshold * segment].allSatisfy({ $0 == 0 }) else {
                        throw VaultError.corruptSecret("the last stripe's padding is not zero")
                    }
                    progress?.advance(data)
                    do {
                        try outer.write(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(target)[0..<data]))
                    } catch let failure as SecretStream.Failure {
                        throw ciphertextError(failure)
                    }
                }
            }
            try readers.forEach { try $0.finish() }
        }
        do {
            try outer.finish()
        } catch let failure as SecretStream.Failure {
            throw ciphertextError(failure)
        }
        try layer.finish()
        guard header.type != .key || keyBytes == SharedKey.length else { throw VaultError.badKey }
        return RecoveredSecret(type: header.type, metadata: payload.metadata ?? SecretMetadata(), pieces: outcomes)
    }

    /// Checks one released piece as ``recover(_:keystore:identity:pieceFiles:password:metadataReady:verified:output:)``
    /// will: nil if it matches the dealer's commitment and proof key, else what is wrong
    /// with it ("damaged: …" for a release whose sealed keys do not open). Throws for a piece
    /// of another secret or for another holder.
    public static func check(piece path: String, of secret: StoredSecret, identity: Identity) throws -> String? {
        let header = secret.header
        let opened: ReleasedPiece.Opened
        switch try ReleasedPiece.read(path: path, secret: header, identity: identity, trusted: []) {
        case .opened(let piece): opened = piece
        case .setAside(_, _, let problem): return problem
        }
        let candidate = Candidate(index: opened.header.from, keyShare: opened.keyShare, source: path, sender: opened.sender,
                                  file: (path, opened.bodyOffset), release: opened.header)
        return try verify(candidate, header: header, source: FileSource.skipping(opened.bodyOffset, of: path))
    }

    private static func ciphertextError(_ failure: SecretStream.Failure) -> VaultError {
        failure == .truncated ? .truncated(what: "the ciphertext") : .corruptSecret("the ciphertext \(failure)")
    }

    private struct Candidate {
        let index: Int
        let keyShare: SecureBytes
        let source: String
        let sender: KeyCard?
        let file: (path: String, offset: Int)?
        /// For a released piece: its header, whose sender signed the piece as sent.
        let release: ReleasedPiece.Header?
    }

    /// Nil if the piece matches its commitment and the key share its proof key.
    private static func verify(_ candidate: Candidate, header: BundleHeader,
                               source: any ByteSource) throws -> String? {
        let hasher = BundleHeader.commitmentHasher()
        let reader = PieceReader(source: source, length: header.pieceLength, trailer: candidate.release == nil ? 0 : 64, observe: hasher.update)
        let trailer: [UInt8]
        do {
            trailer = try reader.drain()
        } catch VaultError.truncated {
            return "damaged: it is truncated"
        } catch VaultError.malformed(_, let detail) {
            return "damaged: \(detail)"
        }
        let pieceHash = hasher.finish()
        // A release's piece counts against its sender only if the sender signed it as it
        // arrived: bytes altered on the way are damage, and name nobody.
        if let release = candidate.release,
           !release.sender.verify(signature: trailer, of: ReleasedPiece.pieceSignatureMessage(release, pieceHash: pieceHash)) {
            return "damaged: its piece was altered after its sender signed it"
        }
        guard Sodium.equal(pieceHash, header.commitments[candidate.index - 1]) else {
            return "forged: it does not match the dealer's commitment"
        }
        guard header.keyShareMatches(index: candidate.index, keyShare: candidate.keyShare) else {
            return "forged: its key share does not match the dealer's proof key"
        }
        return nil
    }

    private static func withBuffers<T>(_ arrays: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) throws -> T) rethrows -> T {
        var pointers: [UnsafeRawBufferPointer] = []
        func nest(_ index: Int) throws -> T {
            if index == arrays.count { return try body(pointers) }
            return try arrays[index].withUnsafeBytes { buffer in
                pointers.append(buffer)
                defer { pointers.removeLast() }
                return try nest(index + 1)
            }
        }
        return try nest(0)
    }
}

/// Reads a piece of known length and hands it out on demand, segment by segment.
final class PieceReader {
    private var source: any ByteSource
    private var left: UInt64
    private let trailer: Int
    private let observe: ((UnsafeRawBufferPointer) -> Void)?

    /// `trailer` bytes follow the piece (a release's piece signature), and then nothing.
    init(source: any ByteSource, length: UInt64, trailer: Int = 0, observe: ((UnsafeRawBufferPointer) -> Void)? = nil) {
        self.source = source
        self.left = length
        self.trailer = trailer
        self.observe = observe
    }

    /// The next `count` bytes.
    func read(_ count: Int) throws -> [UInt8] {
        guard UInt64(count) <= left else { throw VaultError.malformed(what: "a piece", detail: "it is shorter than its stripes") }
        let bytes = try source.readFully(count)
        guard bytes.count == count else { throw VaultError.truncated(what: "a piece") }
        left -= UInt64(count)
        bytes.withUnsafeBytes { observe?($0) }
        return bytes
    }

    /// Reads to the end, and checks that nothing follows the trailer; returns the trailer.
    @discardableResult
    func drain() throws -> [UInt8] {
        while left > 0 { _ = try read(Int(min(left, UInt64(SecretStream.chunkLength)))) }
        return try finish()
    }

    /// Checks that the piece ended where its length says and that only its trailer
    /// follows; returns the trailer.
    @discardableResult
    func finish() throws -> [UInt8] {
        guard left == 0 else { throw VaultError.malformed(what: "a piece", detail: "it is longer than its stripes") }
        let bytes = try source.readFully(trailer)
        guard bytes.count == trailer else { throw VaultError.truncated(what: "a piece") }
        guard try source.readFully(1).isEmpty else { throw VaultError.malformed(what: "a piece", detail: "bytes follow it") }
        return bytes
    }
}

extension FileSource {
    /// A file read from `offset` on.
    static func skipping(_ offset: Int, of path: String) throws -> FileSource {
        let source = try FileSource(path: path)
        var skipped = 0
        var buffer = [UInt8](repeating: 0, count: min(max(offset, 1), 65536))
        while skipped < offset {
            let count = try buffer.withUnsafeMutableBytes { try source.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<min($0.count, offset - skipped)])) }
            guard count > 0 else { throw VaultError.truncated(what: path) }
            skipped += count
        }
        return source
    }
}
