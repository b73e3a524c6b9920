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
    /// Requests and share offers through relays kept from one peer (whatever their state,
    /// until forgotten a day after they expire): a member who floods cannot fill the queue
    /// for everyone, nor the disk with offered bundles.
    public static let holderRequestsPerPeer = 16
}
