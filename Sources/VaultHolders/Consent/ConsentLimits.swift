import VaultCore
/// The consent queue's bounds (``ReleaseApprovals``, ``ConsentQueue``), shared by the LAN
/// server and the relay watcher.
public enum ConsentLimits {
    /// How long a piece request over the LAN waits for the holder's consent: 2 minutes.
    public static let approvalSeconds: Double = 120
    /// LAN requests waiting for consent at once; past this, new ones are turned away.
    public static let pendingApprovals = 64
    /// A waiting LAN request not asked about again for this long was withdrawn by its
    /// requester (it asks again every second while it waits).
    static let approvalAbandonSeconds: Double = 5
    /// Requests through relays waiting for consent at once; past this, new ones are
    /// refused as busy, so a flood of requests cannot grow the keystore without bound.
    public static let pendingHolderRequests = 256
    /// Requests and share offers through relays from one peer that wait for consent at
    /// once: a member who floods cannot fill the queue for everyone, nor the disk with
    /// offered bundles. Decided ones do not count, so an owner who recovers often (an
    /// automatic release a day, `vault unlock` of a shared key) is never turned away.
    public static let holderRequestsPerPeer = 16
    /// Requests and offers kept from one peer whatever their state (their nonces are kept
    /// until forgotten a day after they expire, to refuse replays): bounds the keystore's
    /// table at 256 records of about 512 bytes a peer.
    public static let holderRecordsPerPeer = 256
}
