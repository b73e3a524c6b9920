/// A Noise handshake pattern: pre-message keys and message token lists.
public struct NoisePattern: Sendable {
    /// A token of a message pattern.
    enum Token: Sendable { case e, s, ee, es, se, ss }

    /// The pattern's name (`XX`).
    public let name: String
    /// Static keys known before the handshake: the initiator's, then the responder's.
    let initiatorPreMessage: Bool
    let responderPreMessage: Bool
    /// Messages in order, alternating initiator and responder.
    let messages: [[Token]]

    /// One-way patterns send only from the initiator.
    var isOneWay: Bool { name.count == 1 }

    /// The pattern vault uses: mutual authentication, static keys sent encrypted.
    public static let xx = NoisePattern(name: "XX", initiatorPreMessage: false, responderPreMessage: false,
                                        messages: [[.e], [.e, .ee, .s, .es], [.s, .se]])

    /// The fifteen fundamental patterns of the Noise specification, §7.
    public static let all: [String: NoisePattern] = {
        let table: [(String, Bool, Bool, [[Token]])] = [
            ("N", false, true, [[.e, .es]]),
            ("K", true, true, [[.e, .es, .ss]]),
            ("X", false, true, [[.e, .es, .s, .ss]]),
            ("NN", false, false, [[.e], [.e, .ee]]),
            ("NK", false, true, [[.e, .es], [.e, .ee]]),
            ("NX", false, false, [[.e], [.e, .ee, .s, .es]]),
            ("XN", false, false, [[.e], [.e, .ee], [.s, .se]]),
            ("XK", false, true, [[.e, .es], [.e, .ee], [.s, .se]]),
            ("XX", false, false, [[.e], [.e, .ee, .s, .es], [.s, .se]]),
            ("KN", true, false, [[.e], [.e, .ee, .se]]),
            ("KK", true, true, [[.e, .es, .ss], [.e, .ee, .se]]),
            ("KX", true, false, [[.e], [.e, .ee, .se, .s, .es]]),
            ("IN", false, false, [[.e, .s], [.e, .ee, .se]]),
            ("IK", false, true, [[.e, .es, .s, .ss], [.e, .ee, .se]]),
            ("IX", false, false, [[.e, .s], [.e, .ee, .se, .s, .es]]),
        ]
        return Dictionary(uniqueKeysWithValues: table.map {
            ($0.0, NoisePattern(name: $0.0, initiatorPreMessage: $0.1, responderPreMessage: $0.2, messages: $0.3))
        })
    }()

    /// The full protocol name for this suite.
    var protocolName: String { "Noise_\(name)_25519_ChaChaPoly_BLAKE2b" }
}
