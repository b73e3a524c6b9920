import VaultCore
import Foundation

/// A requester's and a dealer's side of the holder protocol through relays (Docs/PROTOCOL.md
/// §9): what they make of the answers that come back. The network is the caller's.
public enum RecoveryDesk {
    /// What an answer did.
    public enum Taken: Sendable {
        /// It moved a request of a recovery under way on: `label` answered `state`.
        case ask(label: String, state: Recovery.Ask.State, detail: String?)
        /// A holder answered a share offer of this dealer's, of secret `secret` (hex id).
        case delivery(label: String, secret: String, state: ShareDelivery.State)
        /// A holder answered this dealer's emergency rule.
        case role(label: String, state: EmergencyRole.State)
        /// A holder told this dealer of an emergency request.
        case emergency(EmergencyDesk.News)
        /// It was refused: the words say which check.
        case refused(String)
        /// `label` answered a request of a recovery that has ended: nothing to do.
        case late(label: String)
    }

    /// Takes a piece answer from `sender`: its head, and (released) the file and offset where
    /// the released piece starts. A released piece is checked here, before it counts: sealed
    /// to this request's reply key, from the holder asked, against the dealer's commitments.
    public static func take(answer nonce: [UInt8], outcome: PieceAnswer, prefix: [UInt8]?, piece: (path: String, offset: UInt64)?,
                            from sender: KeyCard, keystore: Keystore, identity: Identity, now: Date = VaultClock.now()) throws -> Taken {
        guard let (recovery, ask) = try keystore.ask(nonce: nonce) else {
            if let label = try keystore.endedAsk(nonce: nonce) { return .late(label: label) }
            return .refused("an answer to no request under way here (one that expired, an old answer replayed, or one for another requester)")
        }
        // The holder asked, by its whole trusted card (not its X25519 key alone, which a
        // group record could pair with another signing key).
        guard Sodium.equal(ask.holderKey, sender.agreementKey), try keystore.peers().contains(where: { $0.card == sender }) else {
            return .refused("an answer for \(ask.holderLabel)'s request came from another member (redirected)")
        }
        guard recovery.expires > now else { return .refused("an answer from \(ask.holderLabel) came after the recovery expired") }
        guard ask.state != .released else { return .refused("\(ask.holderLabel) answered again a request it released (a replay)") }
        let label = ask.holderLabel
        switch outcome {
        case .waiting(let request, let until):
            // The holder's id of the request, to name it there ('vault approve ID').
            try keystore.updateAsk(nonce: nonce, state: .waiting, detail: request, until: until, now: now)
            return .ask(label: label, state: .waiting, detail: request)
        case .emergencyWait(let until):
            // The piece comes when the holder's wait ends: the recovery waits as long.
            try keystore.updateAsk(nonce: nonce, state: .waiting, detail: Recovery.Ask.emergencyDetail, until: until, now: now)
            try keystore.extendRecovery(secretRow: recovery.secretRow, until: until + 86_400, now: now)
            return .ask(label: label, state: .waiting, detail: Recovery.Ask.emergencyDetail)
        case .denied:
            try keystore.updateAsk(nonce: nonce, state: .denied, now: now)
            return .ask(label: label, state: .denied, detail: nil)
        case .deniedByDealer:
            try keystore.updateAsk(nonce: nonce, state: .denied, detail: Recovery.Ask.dealerDetail, now: now)
            return .ask(label: label, state: .denied, detail: Recovery.Ask.dealerDetail)
        case .timedOut:
            try keystore.updateAsk(nonce: nonce, state: .timedOut, now: now)
            return .ask(label: label, state: .timedOut, detail: nil)
        case .refused(let refusal):
            try keystore.updateAsk(nonce: nonce, state: .refused, detail: refusal.description, now: now)
            return .ask(label: label, state: .refused, detail: refusal.description)
        case .released:
            guard let prefix, let piece else { return .refused("a release from \(label) without its piece") }
            let failure = { (detail: String) throws -> Taken in
                try keystore.updateAsk(nonce: nonce, state: .failed, detail: detail, now: now)
                return .ask(label: label, state: .failed, detail: detail)
            }
            let header: BundleHeader
            do {
                header = try Self.header(of: recovery, prefix: prefix, sender: sender, keystore: keystore)
            } catch {
                return try failure(VaultError.words(for: error))
            }
            guard let replyKey = recovery.replyKey(identity) else { throw VaultError.keystoreCorrupt("a recovery's reply key does not open") }
            let folder = try recoveryFolder(keystore)
            let path = folder + "/" + nonce.hex + ".vpiece"
            let output = try OutputFile(path: path, shownAs: "the vault directory \(folder)")
            var source = try FileSource.skipping(Int(piece.offset), of: piece.path)
            try source.forEachChunk(output.write)
            try output.commit()
            let own = recovery.holdsShare ? try ownShare(of: recovery, keystore: keystore)?.header.holderIndex ?? 0 : 0
            do {
                if let problem = try SecretRecovery.check(piece: path, of: header, identity: identity, holderIndex: own, replyKeys: [replyKey]) {
                    unlink(path)
                    return try failure("its piece was set aside, \(problem)")
                }
                // The piece must be its sender's own: a holder passing on another's (one it
                // once received) would stand in for that holder's consent, and count twice.
                guard let from = try SecretRecovery.releasingIndex(ofPiece: path, secret: header, identity: identity, index: own,
                                                                   replyKeys: [replyKey]),
                      header.index(of: sender.agreementKey) == from else {
                    unlink(path)
                    return try failure("its piece is another holder's, not its sender's")
                }
            } catch {
                unlink(path)
                return try failure(VaultError.words(for: error))
            }
            try keystore.updateAsk(nonce: nonce, state: .released, prefix: prefix, piece: path, now: now)
            return .ask(label: label, state: .released, detail: nil)
        }
    }

    /// Takes a holder's answer to a share offer of this dealer's.
    public static func take(shareAnswer secretID: [UInt8], state: HolderRecord.ShareState, from sender: KeyCard, keystore: Keystore,
                            identity: Identity) throws -> Taken {
        let row = BundleHeader.rowID(dealer: identity.card, secretID: secretID)
        // By the whole card: a group record may pair another member's X25519 key with its
        // owner's own signing key, and so speak for that holder if matched by the key alone.
        guard let peer = try keystore.peers().first(where: { $0.card == sender }) else {
            return .refused("an answer about a share from \(sender.fingerprint), a card that is not a trusted peer's")
        }
        let label = peer.label.value
        let delivery: ShareDelivery.State = switch state {
        case .stored: .delivered
        case .refused: .refused
        case .waiting: .waitingForConsent
        }
        guard try keystore.answerDelivery(secretRow: row, holderKey: sender.agreementKey, state: delivery) else {
            return .refused("an answer from \(label) about a share it was not offered, or answered already")
        }
        return .delivery(label: label, secret: secretID.hex, state: delivery)
    }

    /// This identity's own share of the recovery's secret, when it holds one.
    public static func ownShare(of recovery: Recovery, keystore: Keystore) throws -> StoredSecret? {
        try keystore.secrets().first { $0.header.rowID == recovery.secretRow }
    }

    /// The header a released piece is checked against: the own share's, or (holding none) the
    /// answering holder's, which must be signed by the dealer the recovery names and be that
    /// holder's own.
    public static func header(of recovery: Recovery, prefix: [UInt8], sender: KeyCard, keystore: Keystore) throws -> BundleHeader {
        if recovery.holdsShare, let own = try ownShare(of: recovery, keystore: keystore) { return own.header }
        var offset = 0
        let (header, _) = try ShareBundle.parsePrefix { count in
            let end = min(offset + count, prefix.count)
            defer { offset = end }
            return Array(prefix[offset..<end])
        }
        guard offset == prefix.count else { throw VaultError.malformed(what: "the holder's bundle header", detail: "bytes follow it") }
        guard header.dealer == recovery.dealer, header.secretID == recovery.secretID else {
            throw VaultError.malformed(what: "the holder's bundle header", detail: "it is for another secret or dealer")
        }
        guard Sodium.equal(header.holderKey, sender.agreementKey), header.index(of: sender.agreementKey) == header.holderIndex else {
            throw VaultError.malformed(what: "the holder's bundle header", detail: "it is not its sender's own share")
        }
        return header
    }

    /// `$VAULT_HOME/recovery` (0700): released pieces that came through relays, sealed to
    /// their requests' reply keys, kept until their recovery ends.
    static func recoveryFolder(_ keystore: Keystore) throws -> String {
        let folder = keystore.home.directory + "/recovery"
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw VaultError.fileSystem(path: folder, errno: errno) }
        return folder
    }
}
