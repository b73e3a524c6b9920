import VaultCore

/// Fewer relays than `--min-relays` stored their share.
public struct SendFailure: Error, UserFacingError {
    /// What happened at each relay.
    public let report: SendReport
    /// s.
    public let minimumRelays: Int
    /// k.
    public let threshold: Int
    /// The recipients whose numbers were given back: no relay holds any of the message, so
    /// it leaves no gap.
    public var returned: [MessageRecipient] = []
    /// The numbers that stay used, by recipient. When fewer than k relays stored the
    /// message, each is a gap the recipient will ask about, and be told it will not come.
    public var kept: [(label: Label, sequence: UInt64)] = []

    /// Whether the recipients can read it anyway: k relays or more stored it.
    public var readable: Bool { report.accepted.count >= threshold }

    public var description: String {
        "only \(report.accepted.count) of the relays stored the message, and \(minimumRelays) must"
            + (readable ? "; the recipients can still read it from those" : "") + ": "
            + report.refused.map(\.description).joined(separator: "; ")
    }

    /// What the sender can do now.
    public var hint: String {
        if readable {
            return "it was not kept for resend requests; sending it again would deliver it twice"
        }
        if kept.isEmpty {
            return "nothing of it is left on the relays and its numbers are free again: send it again once they answer ('vault relay check')"
        }
        let numbers = kept.map { "\($0.label) #\($0.sequence)" }.joined(separator: ", ")
        return "its numbers stay used (\(numbers)): a recipient who asks for them is told they will not come; "
            + "send it again once the relays answer ('vault relay check')"
    }
}
