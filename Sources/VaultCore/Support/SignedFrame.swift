/// vault's signed framing, shared by share bundles (§9), released pieces (§11), group
/// records (§16) and message shares (§17):
///
///     magic (4) ‖ version (1) ‖ body length (4, big-endian) ‖ body ‖ Ed25519 signature (64)
///
/// The signature covers a domain string of the format and the body, so a body signed for
/// one format is never valid in another.
enum SignedFrame {
    /// Magic, version and length: what a reader needs before the body.
    static let startLength = 9

    /// The framed, signed `body`.
    static func make(magic: [UInt8], version: UInt8, body: [UInt8], domain: [UInt8], signer: Identity) -> [UInt8] {
        var w = ByteWriter()
        w.raw(magic)
        w.u8(version)
        w.u32(UInt32(body.count))
        w.raw(body)
        w.raw(signer.sign(domain + body))
        return w.bytes
    }

    /// The body length that a frame's first ``startLength`` bytes announce.
    static func bodyLength(_ start: some Collection<UInt8>) -> Int {
        Int(start.dropFirst(5).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
    }
}
