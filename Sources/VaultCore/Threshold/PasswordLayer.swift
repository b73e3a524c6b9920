/// The optional password layer, inside the threshold layer.
///
/// It guards against k colluding holders: they can rebuild the data key, but still face
/// scrypt. The threshold layer's plaintext begins with one byte: 0 for no password layer,
/// or 1 followed by log2(N) (1) and a 32-byte salt, then a secretstream of the payload under
/// scrypt(password, salt, N, r = 8, p = 1). N is bounded before any work.
enum PasswordLayer {
    static let none: UInt8 = 0
    static let scrypt: UInt8 = 1
    static let saltLength = 32

    /// The bytes that open the threshold layer's plaintext.
    static func header(parameters: ScryptParameters?, salt: [UInt8]) -> [UInt8] {
        guard let parameters else { return [none] }
        return [scrypt, parameters.logN] + salt
    }
}

/// Routes the threshold layer's plaintext: through a password opener when the layer is
/// present, then to the payload parser.
final class PasswordLayerParser {
    private var prefix: [UInt8] = []
    private var route: ((UnsafeRawBufferPointer) throws -> Void)?
    private var inner: StreamOpener?
    private let payload: PayloadParser
    private let password: () throws -> SecureBytes
    private let expected: Bool?

    /// `expected`, when given, is the signed header's password flag: the layer byte must agree.
    init(payload: PayloadParser, expected: Bool? = nil, password: @escaping () throws -> SecureBytes) {
        self.payload = payload
        self.expected = expected
        self.password = password
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while route == nil && offset < bytes.count {
            prefix.append(bytes[offset])
            offset += 1
            // The header's flag is public and signed; a payload that contradicts it would make
            // `secrets show` lie about the layer, so the two must say the same.
            if prefix.count == 1, let expected, (prefix[0] == PasswordLayer.scrypt) != expected,
               prefix[0] == PasswordLayer.none || prefix[0] == PasswordLayer.scrypt {
                throw VaultError.corruptSecret("its password layer disagrees with the signed header")
            }
            switch prefix[0] {
            case PasswordLayer.none:
                route = payload.write
            case PasswordLayer.scrypt where prefix.count == 2 + PasswordLayer.saltLength:
                let parameters = try ScryptParameters(logN: prefix[1])
                let key = parameters.deriveKey(passphrase: try password(), salt: Array(prefix[2...]))
                let opener = StreamOpener(key: key, emit: payload.write)
                inner = opener
                route = { bytes in
                    do {
                        try opener.write(bytes)
                    } catch SecretStream.Failure.forged {
                        throw VaultError.wrongPassword
                    } catch let failure as SecretStream.Failure {
                        throw VaultError.corruptSecret("its password layer \(failure)")
                    }
                }
            case PasswordLayer.scrypt:
                continue
            default:
                throw VaultError.corruptSecret("unknown password layer \(prefix[0])")
            }
        }
        if let route, offset < bytes.count { try route(UnsafeRawBufferPointer(rebasing: bytes[offset...])) }
    }

    func finish() throws {
        guard route != nil else { throw VaultError.corruptSecret("it ends before its first byte") }
        if let inner {
            do {
                try inner.finish()
            } catch SecretStream.Failure.forged {
                throw VaultError.wrongPassword
            } catch let failure as SecretStream.Failure {
                throw VaultError.corruptSecret("its password layer \(failure)")
            }
        }
        try payload.finish()
    }
}
