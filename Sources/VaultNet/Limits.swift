// VaultNet: Noise transport, peer protocol and discovery (to come, see issue 4).

/// Network defaults and bounds, in one place.
public enum NetLimits {
    /// The TCP port `vault serve` listens on by default.
    public static let defaultPort: UInt16 = 7733
}
