import VaultCore

/// Fewer relays than `--min-relays` stored their share.
public struct SendFailure: Error, UserFacingError {
    /// What happened at each relay.
    public let report: SendReport
    /// s.
    public let minimumRelays: Int
    /// k.
    public let threshold: Int

    public var description: String {
        let readable = report.accepted.count >= threshold ? "; the recipients can still read it from those" : ""
        return "only \(report.accepted.count) of the relays stored the message, and \(minimumRelays) must\(readable): "
            + report.refused.map(\.description).joined(separator: "; ")
    }
}
