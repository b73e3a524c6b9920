import ArgumentParser
import Foundation
import VaultCore
import VaultRelayClient

struct GroupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group",
        abstract: "Make and change groups: members who send each other messages through relays.",
        subcommands: [GroupCreate.self, GroupAdd.self, GroupRemove.self, GroupLeave.self, GroupJoin.self, GroupList.self, GroupShow.self]
    )
}

struct GroupCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a group on pinned relays, with trusted peers as members.",
        discussion: """
            The group record (its relays by URL and key card, its members) is signed by you \
            and registered on every relay. Members who trust you accept it at their next \
            'vault receive', and pin its relays by your word.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The group's name.", valueName: "name"))
    var name: String

    @Option(help: ArgumentHelp("Pinned relays, comma-separated (2 to 32): each message is split across all of them.", valueName: "names"), completion: Completions.relays)
    var relays: String

    @Option(help: ArgumentHelp("Trusted peers to add besides you, comma-separated.", valueName: "labels"), completion: Completions.peers)
    var members: String = ""

    func run() async throws {
        let keystore = try home.openKeystore()
        let label = try Label(name)
        let pinned = try names(relays).map { try keystore.pinnedRelay(named: $0) }
        let peers = try names(members).map { try keystore.peer(named: $0) }
        let identity = try keys.unlock(keystore)
        let record = try GroupRecord(
            id: SecureRandom().bytes(16), version: 1, name: label, owner: identity.card,
            relays: pinned.map { GroupRecord.Relay(name: $0.label, url: $0.url, card: $0.card) },
            members: [GroupRecord.Member(label: identity.label, card: identity.card)] + peers.map { GroupRecord.Member(label: $0.label, card: $0.card) },
            signer: identity)
        try await publishAndKeep(record, keystore: keystore, identity: identity)
        print(record.idHex)
    }
}

struct GroupAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Add trusted peers to a group you own.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The group.", valueName: "group"), completion: Completions.group)
    var group: String

    @Argument(help: ArgumentHelp("Trusted peers to add.", valueName: "label"), completion: Completions.peer)
    var peers: [String]

    func run() async throws {
        let keystore = try home.openKeystore()
        let record = try keystore.group(named: group)
        let added = try peers.map { try keystore.peer(named: $0) }
        let identity = try keys.unlock(keystore)
        try requireOwner(record, identity)
        let changed = try GroupRecord(id: record.id, version: record.version + 1, name: record.name, owner: record.owner, relays: record.relays,
                                      members: record.members + added.map { GroupRecord.Member(label: $0.label, card: $0.card) }, signer: identity)
        try await publishAndKeep(changed, keystore: keystore, identity: identity)
    }
}

struct GroupRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove members from a group you own: every relay refuses them from then on.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The group.", valueName: "group"), completion: Completions.group)
    var group: String

    @Argument(help: ArgumentHelp("Members to remove, by the group's names for them.", valueName: "label"), completion: Completions.peer)
    var members: [String]

    func run() async throws {
        let keystore = try home.openKeystore()
        let record = try keystore.group(named: group)
        let identity = try keys.unlock(keystore)
        try requireOwner(record, identity)
        let removed = try Set(members.map { name throws -> String in
            guard let member = record.member(named: name) else {
                throw CLIError.invalidInput("'\(name)' is not a member of \(record.name)")
            }
            guard member.card != identity.card else { throw CLIError.invalidInput("the owner cannot leave the group") }
            return member.label.value
        })
        let changed = try GroupRecord(id: record.id, version: record.version + 1, name: record.name, owner: record.owner, relays: record.relays,
                                      members: record.members.filter { !removed.contains($0.label.value) }, signer: identity)
        try await publishAndKeep(changed, keystore: keystore, identity: identity)
    }
}

struct GroupLeave: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "leave",
        abstract: "Leave a group you were added to: its relays stop serving you its messages.",
        discussion: """
            Declines the group on every relay it names and forgets it on this machine. It is \
            remembered as left, so 'vault receive' declines it again wherever it is still \
            listed, at any version, until you join it again with 'vault group join'. Only its \
            owner can take you out of its record: until then, members may still address you, \
            and what they send is not served to you.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The group.", valueName: "group"), completion: Completions.group)
    var group: String

    func run() async throws {
        let keystore = try home.openKeystore()
        let record = try keystore.group(named: group)
        let identity = try keys.unlock(keystore)
        let failures = try await Messenger.leave(record, keystore: keystore, identity: identity)
        for failure in failures { Terminal.standardError("vault: warning: \(failure) (it is declined there at your next 'vault receive')") }
        Terminal.standardError("left group '\(record.name)' (\(record.idHex.prefix(8))) on \(record.relays.count - failures.count) of \(record.relays.count) relays; "
                               + "'vault group join \(record.idHex.prefix(8))' takes it back")
    }
}

struct GroupJoin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join", abstract: "Join again a group you left: its record is fetched and accepted on every relay it names.")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The group's id, or its first 4 or more hex digits (as 'vault group leave' printed it).", valueName: "id"))
    var group: String

    func run() async throws {
        let keystore = try home.openKeystore()
        let left = try keystore.leftGroup(named: group)
        let identity = try keys.unlock(keystore)
        let report = try await Messenger.join(left, keystore: keystore, identity: identity)
        for problem in report.problems { Terminal.standardError("vault: warning: \(problem)") }
        guard let name = report.groups.first else {
            throw CLIError.unavailable("the group could not be joined again", hint: "its owner may have removed you, or its relay may be down; try again later")
        }
        Terminal.standardError("joined group '\(name)' again")
    }
}

struct GroupList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List your groups.")

    @OptionGroup var home: HomeOption

    @Flag(help: "List the groups you left instead, with the id 'vault group join' takes.")
    var left = false

    func run() throws {
        let keystore = try home.openKeystore()
        if left {
            let peers = try keystore.peers()
            for group in try keystore.leftGroups() {
                let owner = peers.first { $0.card.signingKey == group.owner }?.label.value ?? "not a peer"
                print("\(group.group.hex)\tleft\tversion \(group.version)\towner \(owner)")
            }
            return
        }
        let own = try keystore.identityInfo().card
        for record in try keystore.groups() {
            let owner = record.member(signingKey: record.owner.signingKey)?.label.value ?? record.owner.fingerprint
            print("\(record.idHex.prefix(8))\t\(record.name)\t\(record.members.count) members\t\(record.relays.count) relays\towner \(record.owner == own ? "you" : owner)")
        }
    }
}

struct GroupShow: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show a group's relays and members.")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The group.", valueName: "group"), completion: Completions.group)
    var group: String

    func run() throws {
        let record = try home.openKeystore().group(named: group)
        print("group    \(record.name)")
        print("id       \(record.idHex)")
        print("version  \(record.version)")
        print("owner    \(record.owner.fingerprint)")
        for relay in record.relays { print("relay    \(relay.name)\t\(relay.url)\t\(relay.card.fingerprint)") }
        for member in record.members { print("member   \(member.label)\t\(member.card.fingerprint)") }
    }
}

private func names(_ list: String) -> [String] {
    list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
}

private func requireOwner(_ record: GroupRecord, _ identity: Identity) throws {
    guard record.owner == identity.card else { throw CLIError.invalidInput("only the group's owner can change it") }
}

/// Registers a record on its relays, and keeps it once at least one relay has it.
private func publishAndKeep(_ record: GroupRecord, keystore: Keystore, identity: Identity) async throws {
    let refusals = await Messenger.publish(record, identity: identity)
    for refusal in refusals { Terminal.standardError("vault: warning: \(refusal)") }
    guard refusals.count < record.relays.count else {
        throw CLIError.unavailable("no relay took the group", hint: "'vault relay check' tells which relays answer")
    }
    try keystore.accept(group: record)
    Terminal.standardError("group '\(record.name)' version \(record.version): \(record.members.count) members, on \(record.relays.count - refusals.count) of \(record.relays.count) relays")
}
