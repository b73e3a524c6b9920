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
    /// Verifies every piece against the dealer's signed header and combines k good ones.
    /// With exactly k pieces, each is read once and checked while it is combined; the
    /// checks end before the last chunk's plaintext goes out, so output may have received
    /// the (authenticated) plaintext before it when a check fails.
    ///
    /// A piece that fails (forged, or a damaged release) is reported and left out; recovery goes on while k good
    /// pieces remain. Output receives only authenticated plaintext; when it fails part way,
    /// the caller discards what it wrote.
    ///
    /// `output`, `password`, `metadataReady` and `progress` are called one at a time and
    /// in stream order, but from whichever core's lane holds the next stripe, not
    /// necessarily the caller's thread.
    /// Pieces released through relays are sealed to the one-time keys of their requests
    /// (`replyKeys`) rather than to `identity`; each release names the key it is sealed to.
    public static func recover(
        _ secret: StoredSecret, keystore: Keystore, identity: Identity, pieceFiles: [String], replyKeys: [ReplyKey] = [],
        password: @escaping () throws -> SecureBytes, metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in },
        verified: (PieceOutcome) -> Void = { _ in }, progress: ProgressMeter? = nil,
        output: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> RecoveredSecret {
        try recover(header: secret.header, own: secret, keystore: keystore, identity: identity, pieceFiles: pieceFiles, replyKeys: replyKeys,
                    password: password, metadataReady: metadataReady, verified: verified, progress: progress, output: output)
    }

    /// Rebuilds a secret this identity holds no share of, from k released pieces alone (a
    /// new machine recovering through the holders, Docs/SECURITY.md "Social recovery").
    /// `header` is one holder's signed header, whose dealer the caller checked; every piece
    /// is checked against its commitments, as always.
    public static func recover(
        header: BundleHeader, keystore: Keystore, identity: Identity, pieceFiles: [String], replyKeys: [ReplyKey],
        password: @escaping () throws -> SecureBytes, metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in },
        verified: (PieceOutcome) -> Void = { _ in }, progress: ProgressMeter? = nil,
        output: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> RecoveredSecret {
        try recover(header: header, own: nil, keystore: keystore, identity: identity, pieceFiles: pieceFiles, replyKeys: replyKeys,
                    password: password, metadataReady: metadataReady, verified: verified, progress: progress, output: output)
    }

    /// Who the releases may be sealed to: this identity (as its own index), or one of the
    /// reply keys of its requests through relays.
    /// The index of the holder whose release the piece at `path` is, once it opens for
    /// `identity` (its share `index`, or a reply key): nil when it does not open. A requester
    /// through relays checks it is its sender's own (a holder passing on another's would
    /// stand in for that holder's consent).
    package static func releasingIndex(ofPiece path: String, secret: BundleHeader, identity: Identity, index: Int,
                                       replyKeys: [ReplyKey]) throws -> Int? {
        let recipients = recipients(identity: identity, index: index, replyKeys: replyKeys)
        guard case .opened(let opened) = try ReleasedPiece.read(path: path, secret: secret, recipients: recipients, trusted: []) else { return nil }
        return opened.header.from
    }

    static func recipients(identity: Identity, index: Int, replyKeys: [ReplyKey]) -> [ReleasedPiece.Recipient] {
        [ReleasedPiece.Recipient(identity, index: index)]
            + replyKeys.map { ReleasedPiece.Recipient(index: index, agreementKey: $0.publicKey, secretKey: $0.secretKey) }
    }

    private static func recover(
        header: BundleHeader, own secret: StoredSecret?, keystore: Keystore, identity: Identity, pieceFiles: [String], replyKeys: [ReplyKey],
        password: @escaping () throws -> SecureBytes, metadataReady: @escaping (SecretMetadata) throws -> Void,
        verified: (PieceOutcome) -> Void, progress: ProgressMeter?,
        output: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> RecoveredSecret {
        var candidates: [Candidate] = []
        var claimed: Set<Int> = []
        if let secret {
            let own = try ShareBundle.openBox(secret.box, header: header, holder: identity)
            candidates.append(Candidate(index: header.holderIndex, keyShare: own, source: "your share", sender: nil, file: nil, release: nil))
            claimed.insert(header.holderIndex)
        }
        var outcomes: [PieceOutcome] = []
        let trusted = try keystore.peers().map(\.card)
        let recipients = recipients(identity: identity, index: secret?.header.holderIndex ?? 0, replyKeys: replyKeys)
        for path in pieceFiles {
            let reading = try ReleasedPiece.read(path: path, secret: header, recipients: recipients, trusted: trusted)
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

        let opening = PayloadOpening(type: header.type, passwordProtected: header.passwordProtected, password: password,
                                     metadataReady: metadataReady, output: output)

        // The common case, exactly k pieces whose key shares check out: each piece is read
        // once, each stripe's segments hashed by the lane that decodes and decrypts it. The
        // data key came from key shares the dealer's proof keys vouch for, so what reaches
        // the output is authenticated plaintext; a piece that was altered makes its
        // ciphertext chunks fail, and recovery then looks for the culprit below.
        // Why the single pass failed, when it did: thrown if the pieces then all check out.
        var singlePassFailure: VaultError?
        if candidates.count == header.threshold,
           candidates.allSatisfy({ header.keyShareMatches(index: $0.index, keyShare: $0.keyShare) }) {
            progress?.expect(header.ciphertextLength)
            do {
                let hashers = candidates.map { _ in header.commitmentHasher() }
                // Checked before the last stripe's plaintext goes out, so a secret of one
                // stripe reaches the output only once every piece checks out.
                try combine(candidates, header: header, own: secret, keystore: keystore, hashers: hashers, into: opening, progress: progress) { trailers in
                    let problems = zip(candidates, zip(hashers, trailers)).map { candidate, checked in
                        problem(candidate, header: header, pieceHash: checked.0.finish(), trailer: checked.1)
                    }
                    // Should the piece pass the check below, its bytes changed between the
                    // two reads.
                    guard problems.allSatisfy({ $0 == nil }) else {
                        throw PiecesDisagree(error: .corruptSecret("a piece changed while it was being read"))
                    }
                }
                for candidate in candidates {
                    verified(candidate.outcome(nil))
                    outcomes.append(candidate.outcome(nil))
                }
                // Every piece matched: a stream that fails at its end is the dealer's.
                try opening.finish()
                return RecoveredSecret(type: header.type, metadata: opening.metadata, pieces: outcomes)
            } catch let disagreement as PiecesDisagree {
                singlePassFailure = disagreement.error
            }
        }

        // Otherwise every piece is read once to verify it, and k good ones are combined.
        var good: [Candidate] = []
        progress?.expect(UInt64(candidates.count) * header.pieceLength + (singlePassFailure == nil ? header.ciphertextLength : 0))
        for candidate in candidates {
            let problem = try candidate.file == nil
                ? keystore.withPiece(secret!) {
                    try verify(candidate, header: header, source: MeteredSource($0, meter: progress))
                }
                : verify(candidate, header: header,
                         source: MeteredSource(try FileSource.skipping(candidate.file!.offset, of: candidate.file!.path), meter: progress))
            verified(candidate.outcome(problem))
            outcomes.append(candidate.outcome(problem))
            if problem == nil { good.append(candidate) }
        }
        guard good.count >= header.threshold else {
            let present = Set(good.map(\.index))
            // Named as the bundle publishes them, else as this keystore knows the holder
            // (its holder tag), else by index alone.
            let peers = try keystore.peers()
            let missing = (1...header.count).filter { !present.contains($0) }.map { index in
                let label = header.labels?[index - 1].value
                    ?? peers.first { header.index(of: $0.card.agreementKey) == index }?.label.value
                return label.map { "\($0) (index \(index))" } ?? "index \(index)"
            }
            throw VaultError.tooFewPieces(have: good.count, need: header.threshold, missing: missing)
        }
        // k pieces that each match the dealer's commitments failed to combine: the dealer's
        // ciphertext itself is at fault (or a piece changed between the reads). The output
        // already has what came before the failure, so the combination is not tried again.
        if let singlePassFailure { throw singlePassFailure }

        do {
            try combine(Array(good.prefix(header.threshold)), header: header, own: secret, keystore: keystore, hashers: nil, into: opening,
                        progress: progress)
        } catch let disagreement as PiecesDisagree {
            throw disagreement.error
        }
        try opening.finish()
        return RecoveredSecret(type: header.type, metadata: opening.metadata, pieces: outcomes)
    }

    /// A failure that the pieces' bytes cause (a short piece, ciphertext that does not open),
    /// as opposed to the output's or the password's.
    struct PiecesDisagree: Error {
        let error: VaultError
    }

    /// Rebuilds the ciphertext from k pieces and opens it into `opening` (``RecoveryLanes``).
    /// With `hashers` (one a piece), each piece is also hashed as it goes, so that it is
    /// read once; `check` then gets each piece's trailer, before the last stripe's
    /// plaintext goes out.
    private static func combine(_ chosen: [Candidate], header: BundleHeader, own secret: StoredSecret?, keystore: Keystore, hashers: [PieceHasher]?,
                                into opening: PayloadOpening, progress: ProgressMeter?,
                                check: @escaping ([[UInt8]]) throws -> Void = { _ in }) throws {
        let dataKey = opening.start(keyShares: chosen.map { (x: UInt8($0.index), share: $0.keyShare) })
        let pieces = try chosen.map { candidate -> RecoveryLanes.Piece in
            // Only the own share has no file of its own.
            let (file, offset) = try candidate.file.map { (try FileSource(path: $0.path), UInt64($0.offset)) } ?? keystore.pieceFile(of: secret!)
            return RecoveryLanes.Piece(x: UInt8(candidate.index), file: file, offset: offset)
        }
        try RecoveryLanes(ciphertextLength: header.ciphertextLength, pieces: pieces, key: dataKey, hashers: hashers,
                          progress: progress, emit: opening.write).run {
            try check(trailers(of: zip(chosen, pieces).map { ($0.release == nil ? 0 : 64, $1) }, pieceLength: header.pieceLength))
        }
    }

    /// Each piece's trailer (a release's piece signature, else nothing): a piece ends where
    /// its length says, and only its trailer follows.
    private static func trailers(of pieces: [(length: Int, piece: RecoveryLanes.Piece)], pieceLength: UInt64) throws -> [[UInt8]] {
        try pieces.map { length, piece in
            let end = piece.offset + pieceLength
            var bytes = [UInt8](repeating: 0, count: length)
            do {
                try bytes.withUnsafeMutableBytes { try piece.file.read(at: end, into: $0, what: "a piece") }
            } catch let error as VaultError {
                throw PiecesDisagree(error: error)
            }
            guard piece.file.size == end + UInt64(length) else {
                throw PiecesDisagree(error: .malformed(what: "a piece", detail: "bytes follow it"))
            }
            return bytes
        }
    }

    /// Checks one released piece as ``recover(_:keystore:identity:pieceFiles:password:metadataReady:verified:output:)``
    /// will: nil if it matches the dealer's commitment and proof key, else what is wrong
    /// with it ("damaged: …" for a release whose sealed keys do not open). Throws for a piece
    /// of another secret or for another holder.
    public static func check(piece path: String, of header: BundleHeader, identity: Identity, holderIndex: Int,
                             replyKeys: [ReplyKey] = []) throws -> String? {
        let opened: ReleasedPiece.Opened
        switch try ReleasedPiece.read(path: path, secret: header, recipients: recipients(identity: identity, index: holderIndex, replyKeys: replyKeys),
                                      trusted: []) {
        case .opened(let piece): opened = piece
        case .setAside(_, _, let problem): return problem
        }
        let candidate = Candidate(index: opened.header.from, keyShare: opened.keyShare, source: path, sender: opened.sender,
                                  file: (path, opened.bodyOffset), release: opened.header)
        return try verify(candidate, header: header, source: FileSource.skipping(opened.bodyOffset, of: path))
    }

    static func ciphertextError(_ failure: SecretStream.Failure) -> VaultError {
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

        func outcome(_ problem: String?) -> PieceOutcome {
            PieceOutcome(source: source, index: index, sender: sender, problem: problem)
        }
    }

    /// Nil if the piece matches its commitment and the key share its proof key.
    private static func verify(_ candidate: Candidate, header: BundleHeader,
                               source: any ByteSource) throws -> String? {
        let hasher = header.commitmentHasher()
        let reader = PieceReader(source: source, length: header.pieceLength, trailer: candidate.release == nil ? 0 : 64, observe: hasher.update)
        let trailer: [UInt8]
        do {
            trailer = try reader.drain()
        } catch VaultError.truncated {
            return "damaged: it is truncated"
        } catch VaultError.malformed(_, let detail) {
            return "damaged: \(detail)"
        }
        return problem(candidate, header: header, pieceHash: hasher.finish(), trailer: trailer)
    }

    /// Nil if a piece of hash `pieceHash`, followed by `trailer`, matches its commitment and
    /// the key share its proof key.
    private static func problem(_ candidate: Candidate, header: BundleHeader, pieceHash: [UInt8], trailer: [UInt8]) -> String? {
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

    /// Reads the next `count` bytes into `buffer`.
    func read(_ count: Int, into buffer: UnsafeMutableRawPointer) throws {
        guard UInt64(count) <= left else { throw VaultError.malformed(what: "a piece", detail: "it is shorter than its stripes") }
        guard try source.fill(UnsafeMutableRawBufferPointer(start: buffer, count: count)) == count else {
            throw VaultError.truncated(what: "a piece")
        }
        left -= UInt64(count)
        observe?(UnsafeRawBufferPointer(start: buffer, count: count))
    }

    /// Reads to the end, and checks that nothing follows the trailer; returns the trailer.
    @discardableResult
    func drain() throws -> [UInt8] {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: Dispersal.maximumSegmentLength, alignment: 64)
        defer { buffer.deallocate() }
        while left > 0 { try read(Int(min(left, UInt64(Dispersal.maximumSegmentLength))), into: buffer) }
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
