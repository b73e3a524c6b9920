/// What a relay stores for a group, read as it arrives: a message share (§17, one of n,
/// split) or an object message (§19, whole, the same on every relay), told apart by their
/// first four bytes. A relay checks either kind the same way: its signed header, then its
/// body against what the header commits to.
public struct IncomingRelayMessage {
    /// What a relay needs to know of a message, whatever its kind.
    public struct Envelope: Sendable {
        public let messageID: [UInt8]
        public let groupID: [UInt8]
        public let sender: KeyCard
        public let createdAt: UInt64
        public let expiresAt: UInt64
        public let deleteWhenConfirmed: Bool
        /// The recipients' Ed25519 keys: the relay serves the message to them only.
        public let recipients: [[UInt8]]
        /// For a share: its index and the share count, which must be this relay's place in
        /// the group; nil for an object message, which every relay holds whole.
        public let share: (index: Int, count: Int)?
        /// Whether it is a holder message (an object message of kind `holder`), the one kind
        /// the guest box carries.
        public var isHolder = false
    }

    private enum State {
        case undecided([UInt8])
        case share(IncomingMessageShare)
        case object(IncomingObjectMessage)
    }

    private var state = State.undecided([])
    private let maximumLength: UInt64

    /// Ready for a message of at most `maximumLength` bytes.
    public init(maximumLength: UInt64) { self.maximumLength = maximumLength }

    /// Takes the next bytes; throws as soon as they cannot be a valid message.
    public mutating func take(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        switch state {
        case .share(var share):
            try share.take(bytes)
            state = .share(share)
        case .object(var object):
            try object.take(bytes)
            state = .object(object)
        case .undecided(let start):
            let all = start + bytes
            guard all.count >= 4 else { return state = .undecided(all) }
            if IncomingObjectMessage.starts(all) {
                state = .object(IncomingObjectMessage(maximumLength: maximumLength))
            } else {
                state = .share(IncomingMessageShare(maximumLength: maximumLength))
            }
            do {
                try all.withUnsafeBytes { try take($0) }
            } catch let error as VaultError {
                throw error
            } catch {
                throw .unexpected(VaultError.words(for: error))
            }
        }
    }

    /// Checks that the whole message came and that its body is the one its sender signed.
    public mutating func finish() throws(VaultError) {
        switch state {
        case .share(var share):
            try share.finish()
            state = .share(share)
        case .object(var object):
            try object.finish()
            state = .object(object)
        case .undecided:
            throw .truncated(what: "the message")
        }
    }

    /// The message's envelope, once its signed header is in.
    public var envelope: Envelope? {
        switch state {
        case .share(let share):
            share.header.map {
                Envelope(messageID: $0.messageID, groupID: $0.groupID, sender: $0.sender, createdAt: $0.createdAt, expiresAt: $0.expiresAt,
                         deleteWhenConfirmed: $0.deleteWhenConfirmed, recipients: $0.recipients.map(\.card.signingKey),
                         share: ($0.index, $0.count))
            }
        case .object(let object):
            object.header.map {
                Envelope(messageID: $0.messageID, groupID: $0.groupID, sender: $0.sender, createdAt: $0.createdAt, expiresAt: $0.expiresAt,
                         deleteWhenConfirmed: $0.deleteWhenConfirmed, recipients: $0.recipients.map(\.signingKey), share: nil,
                         isHolder: $0.kind == .holder)
            }
        case .undecided:
            nil
        }
    }

    /// Refuses a message that says it was made more than `slack` seconds after `now`
    /// (Docs/FORMAT.md §17, "Times"): a relay allows its clock window, a recipient (itself
    /// within that window of the relay's clock) twice that.
    public func checkCreated(now: UInt64, slack: UInt64) throws(VaultError) {
        guard let envelope, envelope.createdAt > now + slack else { return }
        throw .malformed(what: object == nil ? "the message share" : "the object message",
                         detail: "it says it was made \(DurationText.rounded(envelope.createdAt - now)) from now, more than the clocks allow")
    }

    /// The share read, when the message is one.
    public var share: IncomingMessageShare? {
        if case .share(let share) = state { return share }
        return nil
    }

    /// The object message read, when the message is one.
    public var object: IncomingObjectMessage? {
        if case .object(let object) = state { return object }
        return nil
    }

    /// Whether the kind is known yet (after the first four bytes).
    public var isDecided: Bool {
        if case .undecided = state { return false }
        return true
    }

    /// The whole message's length, by its header (0 before it is in).
    public var length: UInt64 {
        switch state {
        case .share(let share): share.length
        case .object(let object): object.length
        case .undecided: 0
        }
    }
}
