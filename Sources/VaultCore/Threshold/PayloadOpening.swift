import Foundation

/// Where the threshold layer's plaintext goes once opened (FORMAT §10): the password layer,
/// then the payload's fields and content. Shared by a secret's recovery and a relay
/// message's.
final class PayloadOpening {
    private let type: SecretType
    private let passwordProtected: Bool
    private let password: () throws -> SecureBytes
    private let metadataReady: (SecretMetadata) throws -> Void
    private let output: (UnsafeRawBufferPointer) throws -> Void
    private var payload: PayloadParser?
    private var layer: PasswordLayerParser?
    private var keyBytes = 0

    init(type: SecretType, passwordProtected: Bool, password: @escaping () throws -> SecureBytes,
         metadataReady: @escaping (SecretMetadata) throws -> Void, output: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.type = type
        self.passwordProtected = passwordProtected
        self.password = password
        self.metadataReady = metadataReady
        self.output = output
    }

    /// Starts the layers; returns the data key that `keyShares` rebuild.
    func start(keyShares: [(x: UInt8, share: SecureBytes)]) -> SecureBytes {
        // A key is exactly 32 bytes (FORMAT.md §10): a shorter or longer one is refused,
        // never handed on as a weaker key.
        let content: (UnsafeRawBufferPointer) throws -> Void = type != .key ? output : { [unowned self] bytes in
            keyBytes += bytes.count
            guard keyBytes <= SharedKey.length else { throw VaultError.badKey }
            try output(bytes)
        }
        let payload = PayloadParser(expectedType: type.rawValue, metadataReady: metadataReady, content: content)
        layer = PasswordLayerParser(payload: payload, expected: passwordProtected, password: password)
        self.payload = payload
        return Shamir.combine(keyShares)
    }

    /// Takes the next authenticated plaintext of the threshold layer.
    func write(_ plaintext: UnsafeRawBufferPointer) throws { try layer!.write(plaintext) }

    /// Checks the payload's end.
    func finish() throws {
        try layer!.finish()
        guard type != .key || keyBytes == SharedKey.length else { throw VaultError.badKey }
    }

    /// Rebuilds the ciphertext from k `pieces` in lanes (their checks already made), opens
    /// it under `key` into this opening and checks the end; what the pieces' bytes cause is
    /// thrown as its ``VaultError``. For pieces read whole and checked before: a relay
    /// message's, a kit's.
    func open(ciphertextLength: UInt64, pieces: [RecoveryLanes.Piece], key: SecureBytes) throws {
        do {
            try RecoveryLanes(ciphertextLength: ciphertextLength, pieces: pieces, key: key, hashers: nil, progress: nil, emit: write).run()
        } catch let disagreement as SecretRecovery.PiecesDisagree {
            throw disagreement.error
        }
        try finish()
    }

    /// The payload's fields, once they were read.
    var metadata: SecretMetadata { payload?.metadata ?? SecretMetadata() }
}
