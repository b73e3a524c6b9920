/// Network defaults and bounds, in one place. Spec values first, then this implementation's.
public enum NetLimits {
    // Noise (revision 34).
    /// The largest Noise message: its 2-byte length prefix on TCP caps it.
    public static let noiseMaximumMessage = 65535
    /// The AEAD tag every encrypted Noise message carries.
    static let noiseTagLength = 16

    // vault.
    /// The TCP port `vault serve` listens on by default.
    public static let defaultPort: UInt16 = 7733
    /// The Noise prologue, binding every handshake to this protocol's version.
    public static let prologue = Array("vault/1".utf8)
}
