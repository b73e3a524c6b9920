/// Every failure VaultCore reports. Messages are lowercase, without a final period, and
/// never contain secret material: they are shown to the user as they are.
public enum VaultError: Error, Equatable, CustomStringConvertible {
    // Key cards, labels and addresses.
    /// A key card failed to parse; the defect says why.
    case invalidCard(CardDefect)
    /// A label broke the label rules (see ``Label``).
    case invalidLabel(String, reason: String)
    /// A `HOST:PORT` address failed to parse.
    case invalidAddress(String, reason: String)

    // The keystore.
    /// No keystore exists at the path.
    case noKeystore(path: String)
    /// The keystore's database file is there but empty (lost, or cut short by a full disk).
    case emptyKeystore(path: String)
    /// `init` found an identity already and was not forced.
    case identityExists(path: String)
    /// `init --force` would replace keys that stored shares are sealed to.
    case identityHoldsShares(count: Int)
    /// `init --force` would forget the TPM's lockout authorization, sealed under the current
    /// identity's PIN.
    case identityHoldsTPMLockout
    /// The keystore was written by a newer vault with a schema this build does not know.
    case keystoreTooNew(path: String)
    /// The keystore's content contradicts itself (for example keys that do not match the card).
    case keystoreCorrupt(String)
    /// The keystore could not be opened, read or written; the text says so in words (with
    /// SQLite's own reason where it gives one).
    case storage(String)
    /// A file could not be read or written.
    case fileSystem(path: String, reason: String)
    /// A file exists where a new one would be written.
    case fileExists(path: String)
    /// One of several input files was refused; the error says why.
    indirect case inFile(path: String, VaultError)
    /// A `vault serve` runs for this keystore already (its pid, when known).
    case alreadyServing(pid: Int32?)

    // Passphrases and key derivation.
    /// The private keys are passphrase-protected and no passphrase was given.
    case passphraseRequired
    /// The passphrase did not open the keys.
    case wrongPassphrase
    /// An empty passphrase, password or PIN was given where one is required.
    case empty(what: String)
    /// Stored or requested scrypt parameters are outside the accepted bounds.
    case kdfParametersOutOfRange(String)

    // The TPM (keys bound to this machine).
    /// tpm2-tss cannot be loaded; the text is the loader's.
    case tpmLibraryMissing(String)
    /// No TPM answers where `VAULT_TPM` points; the text says where and why.
    case noTPM(String)
    /// The TPM's device exists and this user may not open it.
    case tpmAccessDenied(path: String)
    /// The keys were sealed by another TPM (or by this one before its owner hierarchy was cleared).
    case tpmOtherMachine
    /// The PIN was wrong: tries left before lockout, and the seconds after which the TPM
    /// forgets one failure (nil when they could not be read).
    case wrongPIN(triesLeft: Int?, lockoutSeconds: Int?)
    /// The TPM is in dictionary-attack lockout; one try comes back within `seconds`.
    case tpmLockedOut(seconds: Int?)
    /// The TPM refuses every lockout authorization for `seconds` (0: until it restarts) after
    /// a wrong one, so vault cannot give the lockout hierarchy back now.
    case tpmLockoutAuthorizationRefused(seconds: Int?)
    /// The PCRs the keys are bound to changed since they were sealed.
    case tpmPCRsChanged([Int])
    /// The keys are sealed with a PIN and none was given.
    case pinRequired
    /// A new PIN breaks the rules (the text says which).
    case invalidPIN(String)
    /// `--tpm-pcrs` is not a list of PCR numbers.
    case invalidPCRs(String)
    /// The TPM's owner hierarchy has an authorization value vault does not have.
    case tpmOwnerPassword
    /// The TPM refused or failed otherwise; the text names the step and tpm2-tss's words.
    case tpm(String)

    // Peers.
    /// The card offered as a peer is this machine's own.
    case ownCard
    /// A peer with the same key exists, under the label given.
    case duplicatePeerKey(existingLabel: String)
    /// A peer with the same label (ignoring case) exists.
    case duplicatePeerLabel(String)
    /// No peer has this label.
    case unknownPeer(String)

    // Images and QR codes.
    /// An image file could not be decoded.
    case unreadableImage(path: String, reason: String)
    /// The image holds no QR code that could be read.
    case noQRCode(path: String)
    /// The image holds QR codes, but none is a key card.
    case notAKeyCard(path: String, detail: CardDefect)
    /// The data does not fit in a QR code.
    case qrPayloadTooLarge(Int)

    // Threshold secrets.
    /// The secret to share breaks a rule (empty, too large, a bad field).
    case invalidSecret(String)
    /// A group record breaks a rule (its relays or members counted, or named twice).
    case invalidGroup(String)
    /// k and n are out of range: 2 ≤ k ≤ n ≤ 255.
    case invalidThreshold(k: Int, n: Int)
    /// A share bundle or released piece failed to parse; the text says where.
    case malformed(what: String, detail: String)
    /// A signature did not verify.
    case badSignature(what: String)
    /// A bundle's dealer is not a trusted peer.
    case untrustedDealer(fingerprint: String)
    /// A group record's owner is not a trusted peer.
    case untrustedOwner(fingerprint: String)
    /// A bundle or piece is sealed to another identity.
    case notForThisIdentity(what: String)
    /// A bundle or piece is addressed to this identity but its sealed part does not open:
    /// altered or damaged in transit.
    case damaged(what: String, detail: String)
    /// The keystore already holds a share of this secret.
    case duplicateSecret(id: String)
    /// No stored secret matches.
    case unknownSecret(String)
    /// More than one stored secret matches an id prefix.
    case ambiguousSecret(String)
    /// A peer holds no share of the secret.
    case notAHolder(label: String)
    /// A piece belongs to another secret.
    case mixedSecrets(file: String, secretID: String)
    /// Two pieces claim the same index.
    case duplicateIndex(Int)
    /// Fewer than k pieces survived verification; the strings name the missing holders.
    case tooFewPieces(have: Int, need: Int, missing: [String])
    /// The password layer did not open.
    case wrongPassword
    /// The secret has a password layer and no password was given.
    case passwordRequired
    /// The decrypted secret is inconsistent.
    case corruptSecret(String)
    /// The ciphertext ended early.
    case truncated(what: String)
    /// A file in a format version this vault does not read (an earlier one, before the
    /// format was released, or a later one).
    case unsupportedVersion(what: String, version: UInt8, supported: UInt8)

    // Shared keys and items.
    /// No shared key matches the name or id.
    case unknownKey(String)
    /// An item names a key this keystore holds no share of (its id in hex).
    case noShareOfKey(keyID: String)
    /// A secret of another type was named where a key is needed.
    case notAKey(String)
    /// The key recovered is not a 32-byte key.
    case badKey
    /// Not a `vault://` result destination (`-`, `scheme:` or `https://host[:port]`).
    case invalidDestination(String)
    /// A `vault://` result destination that reads both as a web site and as an application's
    /// scheme: a bare name with a dot (`example.com`), or a name and a port (`localhost:3000`).
    case ambiguousDestination(String)
    /// The shared key with this name is locked in the agent of `vault serve`.
    case keyLocked(String)
    /// No stored item matches.
    case unknownItem(String)
    /// No pinned relay has this name.
    case unknownRelay(String)
    /// A relay is already pinned under this name.
    case duplicateRelay(String)
    /// No accepted group matches.
    case unknownGroup(String)
    /// More than one accepted group matches.
    case ambiguousGroup(String)
    /// The owner of a group cannot leave it.
    case ownerCannotLeave(String)
    /// More than one stored item matches an id prefix.
    case ambiguousItem(String)
    /// The keystore already holds this item.
    case duplicateItem(id: String)
    /// An item failed to decrypt under its key: altered, or made under another key.
    case itemDoesNotOpen
    /// Text that should be an armored item or a QR item is not one.
    case badArmor(String)
    /// An application's object (Docs/API.md) cannot be stored as asked: a name that breaks
    /// the rules, a value too large or not JSON.
    case invalidAppObject(String)

    // SLIP-39 words and printed recovery kits.
    /// Mnemonics that were typed or pasted are refused: the text names the mnemonic and,
    /// where it can, the word.
    case invalidWords(String)
    /// A secret or a set of holders that SLIP-39 cannot carry (its size, its type, more than
    /// 16 holders); the text names the limit.
    case wordsDoNotFit(String)
    /// A recovery kit's QR codes are refused, or do not make a whole share; the text says why.
    case invalidKit(String)

    // Bugs.
    /// A step that should never fail did, with an error vault's code did not turn into one
    /// of the cases above; the text is that error in words (``words(for:)``).
    case unexpected(String)

    public var description: String {
        switch self {
        case .invalidCard(let defect): "invalid key card: \(defect)"
        case .invalidLabel(let label, let reason): "invalid label \(quoted(label)): \(reason)"
        case .invalidAddress(let address, let reason): "invalid address \(quoted(address)): \(reason)"
        case .noKeystore(let path): "no keystore at \(path)"
        case .emptyKeystore(let path): "the keystore \(path) is empty"
        case .identityExists(let path): "an identity already exists in \(path)"
        case .identityHoldsShares(let count):
            "the keystore holds \(count) share\(count == 1 ? "" : "s") sealed to the current identity; a new identity could never open \(count == 1 ? "it" : "them")"
        case .identityHoldsTPMLockout:
            "the keystore holds the TPM's lockout authorization, sealed under the current identity's PIN; a new identity would lose it for good"
        case .keystoreTooNew(let path): "the keystore at \(path) was written by a newer vault"
        case .keystoreCorrupt(let detail): "the keystore is corrupt: \(detail)"
        case .storage(let message): message
        case .fileSystem(let path, let reason): "\(path): \(reason)"
        case .fileExists(let path): "\(path) already exists"
        case .inFile(let path, let error): "\(path): \(error)"
        case .alreadyServing(let pid): "a 'vault serve' runs for this keystore already" + (pid.map { " (pid \($0))" } ?? "")
        case .passphraseRequired: "the private keys are protected by a passphrase and none was given"
        case .wrongPassphrase: "wrong passphrase"
        case .empty(let what): "the \(what) is empty"
        case .kdfParametersOutOfRange(let detail): "scrypt parameters out of range: \(detail)"
        case .tpmLibraryMissing(let detail): "the TPM library tpm2-tss is not installed (\(detail))"
        case .noTPM(let detail): "no TPM: \(detail)"
        case .tpmAccessDenied(let path): "cannot open the TPM at \(path): permission denied"
        case .tpmOtherMachine:
            "this keystore belongs to another machine: its keys were sealed by another TPM (or by this one before it was cleared)"
        case .wrongPIN(let left, let seconds):
            switch left {
            case 0?: "wrong PIN; the TPM now refuses every PIN" + (seconds.map { " for up to \(DurationText.text(UInt64(max(1, $0))))" } ?? " until its lockout ends")
            case let left?: "wrong PIN (\(left) tr\(left == 1 ? "y" : "ies") left before the TPM locks out)"
            case nil: "wrong PIN"
            }
        case .tpmLockedOut(let seconds):
            "the TPM is locked out after too many wrong PINs" + (seconds.map { $0 > 0 ? ": it takes a PIN again within \(DurationText.text(UInt64($0)))" : ": until its owner resets the lockout" } ?? "")
        case .tpmLockoutAuthorizationRefused(let seconds):
            "the TPM refuses its lockout authorization after a wrong one was tried"
                + (seconds.map { $0 > 0 ? ", for up to \(DurationText.text(UInt64($0)))" : ", until the machine restarts" } ?? " for a while")
                + ", so vault cannot give the lockout hierarchy back yet"
        case .tpmPCRsChanged(let pcrs):
            "the boot state changed since the keys were sealed (PCR \(PCRSelection(mask: pcrs.reduce(0) { $0 | 1 << UInt32($1) })) differs): the TPM will not unseal them"
        case .pinRequired: "the private keys are sealed by the TPM with a PIN and none was given"
        case .invalidPIN(let detail): "invalid PIN: \(detail)"
        case .invalidPCRs(let detail): "invalid PCR list \(detail)"
        case .tpmOwnerPassword: "the TPM's owner hierarchy has a password, and vault makes its storage key there without one"
        case .tpm(let detail): "the TPM failed: \(detail)"
        case .ownCard: "this is your own key card"
        case .duplicatePeerKey(let label): "this key is already trusted, as peer \(quoted(label))"
        case .duplicatePeerLabel(let label): "a peer named \(quoted(label)) already exists"
        case .unknownPeer(let label): "no peer named \(quoted(label))"
        case .unreadableImage(let path, let reason): "cannot read image \(path): \(reason)"
        case .noQRCode(let path): "no QR code found in \(path)"
        case .notAKeyCard(let path, let defect): "the QR code in \(path) is not a vault key card (\(defect))"
        case .qrPayloadTooLarge(let count): "\(count) bytes do not fit in a QR code"
        case .invalidSecret(let detail): "invalid secret: \(detail)"
        case .invalidGroup(let detail): "invalid group: \(detail)"
        case .invalidThreshold(let k, let n): "threshold \(k) of \(n) holders is out of range (2 ≤ k ≤ n ≤ 255)"
        case .malformed(let what, let detail): "\(what) is malformed: \(detail)"
        case .badSignature(let what): "the dealer's signature on \(what) does not verify"
        case .untrustedDealer(let fingerprint): "the dealer is not a trusted peer (fingerprint \(fingerprint))"
        case .untrustedOwner(let fingerprint): "the group's owner is not a trusted peer (fingerprint \(fingerprint))"
        case .notForThisIdentity(let what): "\(what) is sealed to another identity"
        case .damaged(let what, let detail): "\(what) is damaged or altered: \(detail)"
        case .duplicateSecret(let id): "the keystore already holds a share of secret \(id)"
        case .unknownSecret(let name): "no secret matches \(quoted(name))"
        case .ambiguousSecret(let name): "more than one secret matches \(quoted(name))"
        case .notAHolder(let label): "\(quoted(label)) holds no share of this secret"
        case .mixedSecrets(let file, let id): "\(file) is a piece of another secret (\(id))"
        case .duplicateIndex(let index): "two pieces claim holder index \(index)"
        case .tooFewPieces(let have, let need, let missing):
            "only \(have) verified piece\(have == 1 ? "" : "s"), \(need) needed" + (missing.isEmpty ? "" : "; missing: \(missing.joined(separator: ", "))")
        case .wrongPassword: "wrong password"
        case .passwordRequired: "the secret has a password layer and no password was given"
        case .corruptSecret(let detail): "the secret is corrupt: \(detail)"
        case .truncated(let what): "\(what) is truncated"
        case .unsupportedVersion(let what, let version, let supported):
            "\(what) is in format version \(version), and this vault reads version \(supported) only"
        case .unknownKey(let name): "no shared key matches \(quoted(name))"
        case .noShareOfKey(let id): "you hold no share of key \(id), which encrypts this item"
        case .notAKey(let name): "\(quoted(name)) is a secret, not a shared key"
        case .badKey: "the recovered secret is not a 32-byte key"
        case .invalidDestination(let text):
            "invalid destination \(quoted(text)): give '-', an application's scheme such as 'myapp:', or an origin such as 'https://example.com'"
        case .ambiguousDestination(let text): "\(quoted(text)) could be a web site or an application's scheme"
        case .keyLocked(let name): "key \(quoted(name)) is locked"
        case .unknownItem(let name): "no item matches \(quoted(name))"
        case .unknownRelay(let name): "no relay named \(quoted(name))"
        case .duplicateRelay(let name): "a relay named \(quoted(name)) is already pinned"
        case .unknownGroup(let name): "no group matches \(quoted(name))"
        case .ambiguousGroup(let name): "more than one group matches \(quoted(name))"
        case .ownerCannotLeave(let name): "you own group \(quoted(name)), and an owner cannot leave its own group"
        case .ambiguousItem(let name): "more than one item matches \(quoted(name))"
        case .duplicateItem(let id): "the keystore already holds item \(id.prefix(16))"
        case .itemDoesNotOpen: "the item does not open under its key: it was altered, or made under another key"
        case .badArmor(let detail): "not a vault item: \(detail)"
        case .invalidAppObject(let detail): detail
        case .invalidWords(let detail): detail
        case .wordsDoNotFit(let detail): "SLIP-39 words cannot carry this: \(detail)"
        case .invalidKit(let detail): "not a usable recovery kit: \(detail)"
        case .unexpected(let detail): "unexpected failure: \(detail); please report it"
        }
    }
}

/// Why a key card was refused.
public enum CardDefect: Equatable, Sendable, CustomStringConvertible {
    /// The text does not start with `vault1`; the prefix found is given.
    case wrongPrefix(String)
    /// The Bech32 checksum does not match: a character was mistyped, lost or added.
    case badChecksum
    /// The card's version byte is not one this build knows.
    case unknownVersion(UInt8)
    /// The card has the wrong number of bytes for its version.
    case wrongLength(Int)
    /// The text mixes upper and lower case.
    case mixedCase
    /// The text has a character outside the Bech32 alphabet.
    case invalidCharacter
    /// The text has no `1` separator followed by data.
    case missingSeparator
    /// The last character carries padding bits that are not zero.
    case nonCanonical
    /// The text is longer than any card.
    case tooLong
    /// A public key in the card is not a usable curve point.
    case invalidKey
    /// The label after `#` breaks the label rules.
    case badLabel

    init(_ failure: Bech32.Failure) {
        switch failure {
        case .tooLong: self = .tooLong
        case .mixedCase: self = .mixedCase
        case .missingSeparator: self = .missingSeparator
        case .invalidCharacter: self = .invalidCharacter
        case .badChecksum: self = .badChecksum
        case .nonCanonicalPadding: self = .nonCanonical
        }
    }

    public var description: String {
        switch self {
        case .wrongPrefix(let prefix): "expected prefix 'vault1', found '\(prefix.prefix(16))1'"
        case .badChecksum: "bad checksum (a character was mistyped, lost or added)"
        case .unknownVersion(let version): "unknown version \(version) (this vault reads version \(KeyCard.version))"
        case .wrongLength(let count): "\(count) bytes where version \(KeyCard.version) has \(KeyCard.encodedLength)"
        case .mixedCase: "it mixes upper and lower case"
        case .invalidCharacter: "it contains a character outside the Bech32 alphabet"
        case .missingSeparator: "it has no data after a '1' separator"
        case .nonCanonical: "non-canonical encoding"
        case .tooLong: "too long"
        case .invalidKey: "a public key is not a valid curve point"
        case .badLabel: "the label after '#' is not a valid label"
        }
    }
}

/// Quotes user text for an error message, escaping what could disturb a terminal.
func quoted(_ text: String) -> String {
    var out = "'"
    for scalar in text.unicodeScalars.prefix(80) {
        if TerminalText.needsEscape(scalar) || scalar == "'" || scalar == "\\" {
            out += scalar.escaped(asASCII: true)
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out + (text.unicodeScalars.count > 80 ? "…'" : "'")
}
