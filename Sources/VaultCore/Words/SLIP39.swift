/// How a SLIP-39 set is split: GT of its groups, each a T-of-N set of member shares.
public struct SLIP39Scheme: Equatable, Sendable {
    /// A group's member threshold and count.
    public struct Group: Equatable, Sendable {
        public let threshold: Int
        public let count: Int

        public init(threshold: Int, count: Int) {
            self.threshold = threshold
            self.count = count
        }
    }

    /// Groups needed to recover.
    public let groupThreshold: Int
    /// The groups.
    public let groups: [Group]

    public init(groupThreshold: Int, groups: [Group]) {
        self.groupThreshold = groupThreshold
        self.groups = groups
    }

    /// The standard's single level: one group, T of N.
    public static func single(threshold: Int, count: Int) -> SLIP39Scheme {
        SLIP39Scheme(groupThreshold: 1, groups: [Group(threshold: threshold, count: count)])
    }

    /// Checks the standard's bounds: at most 16 groups and 16 members a group, thresholds
    /// from 1 to the count, and no 1-of-N group with N > 1 (its shares would all be equal).
    func validate() throws(VaultError) {
        guard (1...16).contains(groups.count) else {
            throw .wordsDoNotFit("SLIP-39 has from 1 to 16 groups, not \(groups.count)")
        }
        guard (1...groups.count).contains(groupThreshold) else {
            throw .wordsDoNotFit("a group threshold of \(groupThreshold) with \(groups.count) group\(groups.count == 1 ? "" : "s")")
        }
        for group in groups {
            guard (1...16).contains(group.count), (1...group.count).contains(group.threshold) else {
                throw .wordsDoNotFit("SLIP-39 groups are T of N with 1 ≤ T ≤ N ≤ 16, not \(group.threshold) of \(group.count)")
            }
            guard group.threshold > 1 || group.count == 1 else {
                throw .wordsDoNotFit("a 1-of-\(group.count) group would give everyone the same share; use 1 of 1")
            }
        }
    }
}

/// SLIP-39 (satoshilabs/slips, slip-0039.md): Shamir's shares of a master secret as
/// mnemonics that any implementation of the standard recombines, Trezor's
/// `shamir-mnemonic` among them.
public enum SLIP39 {
    /// The iteration exponent vault deals with: 20,000 PBKDF2 iterations in all, the
    /// reference implementation's default; read sets may have any exponent the standard
    /// allows (0–15).
    public static let defaultExponent = 1

    /// Checks a master secret and a passphrase against the standard: 16 bytes or more, an
    /// even number; printable ASCII.
    static func validate(secretLength: Int, passphrase: SecureBytes) throws(VaultError) {
        guard secretLength >= 16, secretLength % 2 == 0 else {
            throw .wordsDoNotFit("SLIP-39 carries secrets of an even number of bytes, at least 16, and this one has \(secretLength)")
        }
        let printable = passphrase.withUnsafeBytes { $0.allSatisfy { (0x20...0x7e).contains($0) } }
        guard printable else { throw .invalidWords("a SLIP-39 passphrase is printable ASCII only (letters, digits, punctuation, spaces)") }
    }

    /// Splits `secret` under `scheme`: the member mnemonics of each group, in group order.
    /// `random` gives the identifier (unless one is given), the digest's random part and
    /// the random shares.
    public static func split(
        _ secret: SecureBytes, passphrase: SecureBytes, scheme: SLIP39Scheme, extendable: Bool = true,
        exponent: Int = defaultExponent, identifier: UInt16? = nil, random: some RandomSource = SecureRandom()
    ) throws(VaultError) -> [[Mnemonic]] {
        try validate(secretLength: secret.count, passphrase: passphrase)
        try scheme.validate()
        guard (0...15).contains(exponent) else { throw .wordsDoNotFit("the iteration exponent is 0 to 15, not \(exponent)") }
        let identifier = identifier ?? random.bytes(2).withUnsafeBytes { $0.load(as: UInt16.self) } & 0x7fff
        precondition(identifier < 1 << 15)
        let encrypted = SLIP39Cipher.encrypt(secret, passphrase: passphrase, exponent: exponent, identifier: identifier, extendable: extendable)
        let groupShares = SLIP39Shamir.split(encrypted, threshold: scheme.groupThreshold, count: scheme.groups.count, random: random)
        return zip(scheme.groups, groupShares).enumerated().map { groupIndex, pair in
            let (group, groupShare) = pair
            return SLIP39Shamir.split(groupShare, threshold: group.threshold, count: group.count, random: random).enumerated().map { member, value in
                SLIP39Share(identifier: identifier, extendable: extendable, exponent: exponent, groupIndex: groupIndex,
                            groupThreshold: scheme.groupThreshold, groupCount: scheme.groups.count, memberIndex: member,
                            memberThreshold: group.threshold, value: value).mnemonic()
            }
        }
    }

    /// The master secret from enough mnemonics of one set (more than enough are fine: the
    /// first of each group's members are used) and the passphrase. A wrong passphrase gives
    /// another secret, never an error: the standard has no way to tell.
    public static func combine(_ mnemonics: [Mnemonic], passphrase: SecureBytes) throws(VaultError) -> SecureBytes {
        let shares = try parse(mnemonics)
        guard let first = shares.first else { throw .invalidWords("no mnemonic was given") }
        var progress = SLIP39Progress()
        for (number, share) in shares.enumerated() { try progress.add(share, number: number + 1) }
        guard progress.isComplete else { throw .invalidWords(progress.missing) }
        try validate(secretLength: first.value.count, passphrase: passphrase)
        return try progress.secret(passphrase: passphrase)
    }

    /// Parses mnemonics, naming the first that is refused (by its number, from 1).
    static func parse(_ mnemonics: [Mnemonic]) throws(VaultError) -> [SLIP39Share] {
        var shares: [SLIP39Share] = []
        for (number, mnemonic) in mnemonics.enumerated() {
            do {
                shares.append(try SLIP39Share(mnemonic))
            } catch {
                throw .invalidWords("mnemonic \(number + 1) " + MnemonicReader.words(for: error, in: mnemonic))
            }
        }
        return shares
    }
}

/// Shares of one set gathered towards its recovery: the checks the standard asks of a
/// combination, share by share, so a person typing shares hears at once of one that does
/// not belong, and how many are still needed.
public struct SLIP39Progress {
    private var shares: [SLIP39Share] = []

    public init() {}

    /// Adds a parsed mnemonic; `number` names it in errors.
    public mutating func add(_ mnemonic: Mnemonic, number: Int) throws(VaultError) {
        let share: SLIP39Share
        do {
            share = try SLIP39Share(mnemonic)
        } catch {
            throw .invalidWords("mnemonic \(number) " + MnemonicReader.words(for: error, in: mnemonic))
        }
        try add(share, number: number)
    }

    mutating func add(_ share: SLIP39Share, number: Int) throws(VaultError) {
        if let first = shares.first {
            guard share.sameSet(as: first) else {
                throw .invalidWords("mnemonic \(number) is of another set: its first words (identifier, exponent, groups) or its length differ from mnemonic 1's")
            }
        }
        if let sibling = shares.first(where: { $0.groupIndex == share.groupIndex }) {
            guard sibling.memberThreshold == share.memberThreshold else {
                throw .invalidWords("mnemonic \(number) gives group \(share.groupIndex + 1) another member threshold than an earlier one does")
            }
            guard !shares.contains(where: { $0.groupIndex == share.groupIndex && $0.memberIndex == share.memberIndex }) else {
                throw .invalidWords("mnemonic \(number) was given already (the same member of group \(share.groupIndex + 1))")
            }
        }
        shares.append(share)
    }

    /// The groups this set needs, and the groups' thresholds: nil before any share.
    public var groupThreshold: Int? { shares.first?.groupThreshold }

    /// Groups with enough members.
    public var completeGroups: Int { Set(shares.map(\.groupIndex)).filter { members(of: $0) >= threshold(of: $0) }.count }

    private func members(of group: Int) -> Int { shares.filter { $0.groupIndex == group }.count }
    private func threshold(of group: Int) -> Int { shares.first { $0.groupIndex == group }?.memberThreshold ?? 0 }

    /// Whether enough groups have enough members.
    public var isComplete: Bool { groupThreshold.map { completeGroups >= $0 } ?? false }

    /// What is still missing, in words.
    public var missing: String {
        guard let first = shares.first else { return "no mnemonic was given" }
        if first.groupCount == 1 {
            let need = first.memberThreshold - shares.count
            return "\(shares.count) of \(first.memberThreshold) mnemonics were given; \(need) more \(need == 1 ? "is" : "are") needed"
        }
        let started = Set(shares.map(\.groupIndex)).sorted().map { "group \($0 + 1): \(members(of: $0)) of \(threshold(of: $0))" }
        return "\(completeGroups) of \(first.groupThreshold) groups are complete (\(started.joined(separator: ", ")))"
    }

    /// A short status line for a person typing shares.
    public var status: String {
        isComplete ? "enough mnemonics" : missing
    }

    /// The master secret, once complete.
    func secret(passphrase: SecureBytes) throws(VaultError) -> SecureBytes {
        guard let first = shares.first, isComplete else { throw .invalidWords(missing) }
        var groupShares: [(x: UInt8, value: SecureBytes)] = []
        for group in Set(shares.map(\.groupIndex)).sorted() where members(of: group) >= threshold(of: group) {
            guard groupShares.count < first.groupThreshold else { break }
            let members = shares.filter { $0.groupIndex == group }.prefix(threshold(of: group))
            guard let value = SLIP39Shamir.recover(threshold: threshold(of: group), members.map { (x: UInt8($0.memberIndex), value: $0.value) }) else {
                throw .invalidWords("the mnemonics of group \(group + 1) do not combine (their digest does not match): one is of another set, or mistyped")
            }
            groupShares.append((x: UInt8(group), value: value))
        }
        guard let encrypted = SLIP39Shamir.recover(threshold: first.groupThreshold, groupShares) else {
            throw .invalidWords("the groups do not combine (their digest does not match): a mnemonic is of another set, or mistyped")
        }
        return SLIP39Cipher.decrypt(encrypted, passphrase: passphrase, exponent: first.exponent, identifier: first.identifier,
                                    extendable: first.extendable)
    }

    /// The master secret, once complete; see ``SLIP39/combine(_:passphrase:)``.
    public func combine(passphrase: SecureBytes) throws(VaultError) -> SecureBytes {
        guard let first = shares.first else { throw .invalidWords("no mnemonic was given") }
        try SLIP39.validate(secretLength: first.value.count, passphrase: passphrase)
        return try secret(passphrase: passphrase)
    }
}
