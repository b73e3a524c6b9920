import ArgumentParser
import Foundation
import VaultCore
import VaultNet
import VaultRelayClient
import VaultSync

struct KeySync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Keep a shared key's items alike on every holder's machine, through a group's relays.",
        discussion: """
            From now on every change to the key's items (item add, edit, rm, copy into it, \
            import into it) is signed by you and sent, sealed, to the key's other holders who \
            are members of the group, at each 'vault sync' or 'vault receive'. The items the key \
            has here are sent once too. Holders start syncing the key when the first change \
            reaches them.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The key's name or id.", valueName: "name"), completion: Completions.secret)
    var name: String

    @OptionGroup var settings: KeySyncOptions

    func run() async throws {
        let keystore = try home.openKeystore()
        let holding = try keystore.sharedKey(matching: name)
        guard let group = settings.group else { throw ValidationError("--group is required") }
        try await settings.tie(holding, group: group, keystore: keystore, identity: try keys.unlock(keystore))
    }
}

/// `--group`, `--ttl` and `--min-relays`: how a synced key's changes go out.
struct KeySyncOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The group whose relays carry the key's changes.", valueName: "group"), completion: Completions.group)
    var group: String?

    @Option(help: ArgumentHelp("How long the relays keep each change (at most 30d).", valueName: "duration"))
    var ttl: String = "7d"

    @Option(help: ArgumentHelp("How many relays must store a change for it to count as sent (default: half, rounded up).",
                               valueName: "s"))
    var minRelays: Int?

    /// Ties `holding` to `group` and says so.
    func tie(_ holding: KeyHolding, group name: String, keystore: Keystore, identity: Identity) async throws {
        let group = try keystore.group(named: name)
        guard group.members.contains(where: { $0.card == identity.card }) else {
            throw CLIError.invalidInput("you are not a member of group \(group.name)")
        }
        let lifetime = try Duration.seconds(ttl)
        // A deleted item's changes are kept 30 days (Keystore.tombstoneRetention): no change
        // may outlive them on a relay.
        guard lifetime <= Keystore.tombstoneRetention else { throw ValidationError("--ttl is at most 30d") }
        let n = group.relays.count
        let s = minRelays ?? (n + 1) / 2
        guard (1...n).contains(s) else { throw ValidationError("--min-relays is 1 to \(n), the group's relays") }
        let holders = try group.members.filter { member in
            member.card == identity.card ? false : try keystore.isHolder(member.card, keyID: holding.keyID)
        }
        try keystore.startSync(keyID: holding.keyID, group: group.id, lifetime: lifetime, minimumRelays: s, author: identity)
        let items = try keystore.unpublishedChanges(keyID: holding.keyID).count
        Terminal.standardError("key '\(holding.displayName)' syncs through group \(group.name) (\(s) of \(n) relays, kept \(ttl))"
            + (items > 0 ? "; \(items) item\(items == 1 ? " goes" : "s go") out at the next 'vault sync'" : ""))
        if holders.isEmpty {
            Terminal.standardError("vault: warning: no other member of \(group.name) holds the key: its changes stay here until one does")
        }
    }
}

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Bring synced keys' items up to date: fetch the other holders' changes, send yours.",
        discussion: """
            Each change is checked before it is applied: its author must hold the key and be you \
            or a trusted peer, its signature must hold, and its item must be the one signed. The \
            highest version of an item wins on every machine, whatever order changes came in; \
            an edit made without seeing the winner is kept beside it as a conflict copy ('vault \
            item list' marks it). Changes received while the key is locked are kept unopened and \
            checked once it is unlocked. 'vault receive' does all this too. Messages that are \
            not item changes are left for 'vault receive'.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("Only send this key's changes (default: every synced key's).", valueName: "key"), completion: Completions.secret)
    var key: String?

    @Flag(help: "Also ask the key's other holders for their whole state, after being away longer than the relays keep changes.")
    var full = false

    func run() async throws {
        let keystore = try home.openKeystore()
        let identity = try keys.unlock(keystore)
        let only = try key.map { try keystore.sharedKey(matching: $0).keyID }
        if let only, try keystore.syncSettings(keyID: only) == nil {
            // The group is filled in when there is only one to choose.
            let groups = try keystore.groups()
            let group = groups.count == 1 ? ShellWord.quoted(groups[0].name.value) : "GROUP"
            throw CLIError.unavailable("key '\(key!)' is not synced",
                                       hint: "tie it to a group with 'vault key sync \(ShellWord.quoted(key!)) --group \(group)'"
                                           + (groups.isEmpty ? " ('vault group create' makes one)" : ""))
        }
        var report = try await Messenger.receive(groupName: nil, keystore: keystore, identity: identity, sink: nil, objectsOnly: true)
        if full {
            for settings in try keystore.syncedKeys() where only == nil || settings.keyID == only {
                do {
                    try await ObjectSync.requestSnapshot(keyID: settings.keyID, keystore: keystore, identity: identity, report: &report.sync)
                } catch {
                    report.problems.append(VaultError.words(for: error))
                }
            }
        }
        await SyncRun.finish(keystore: keystore, identity: identity, only: only, report: &report)
        for problem in report.distinctProblems { Terminal.standardError("vault: warning: \(problem)") }
        SyncRun.show(report.sync, quietWhenIdle: false)
    }
}

/// What `vault sync` and `vault receive` do after fetching: send each synced key's changes,
/// collect old deletions, and check items received while their key was locked whose key
/// is now unlocked in the agent.
enum SyncRun {
    static func finish(keystore: Keystore, identity: Identity, only: [UInt8]? = nil, report: inout ReceiveReport) async {
        for settings in (try? keystore.syncedKeys()) ?? [] where only == nil || settings.keyID == only {
            do {
                try await ObjectSync.publish(keyID: settings.keyID, keystore: keystore, identity: identity, report: &report.sync)
                try keystore.collectTombstones(keyID: settings.keyID)
            } catch {
                report.problems.append(VaultError.words(for: error))
            }
        }
        report.sync.checked += await openUnopened(keystore: keystore, problems: &report.problems)
    }

    /// Opens the items received while their key was locked (of `keyID`, or of every key)
    /// whose key is now unlocked in the agent; returns how many opened. One that does not
    /// open is reported by its author and stays unopened.
    static func openUnopened(keystore: Keystore, only keyID: [UInt8]? = nil, problems: inout [String]) async -> Int {
        let (opened, failed) = await UnopenedItems.open(keystore: keystore, only: keyID, access: await KeyAccess.open(keystore))
        problems += failed
        return opened
    }

    static func show(_ sync: SyncReport, quietWhenIdle: Bool) {
        for name in sync.started { Terminal.standardError("key '\(name)' now syncs: a holder's change to it arrived") }
        let applied = sync.applied
        if applied + sync.superseded > 0 {
            Terminal.standardError("applied \(applied) change\(applied == 1 ? "" : "s")"
                + (sync.conflicts > 0 ? " (\(sync.conflicts) conflict cop\(sync.conflicts == 1 ? "y" : "ies") kept: see 'vault item list')" : "")
                + (sync.superseded > 0 ? "; \(sync.superseded) older one\(sync.superseded == 1 ? "" : "s") changed nothing" : ""))
        }
        if sync.checked > 0 { Terminal.standardError("opened \(sync.checked) item\(sync.checked == 1 ? "" : "s") received while the key was locked") }
        for sent in sync.published {
            Terminal.standardError("sent \(sent.changes) change\(sent.changes == 1 ? "" : "s") to '\(sent.key)' through \(sent.relays) relay\(sent.relays == 1 ? "" : "s")")
        }
        for sent in sync.snapshotsSent { Terminal.standardError("sent the state of '\(sent.key)' to \(sent.member), as asked") }
        for name in sync.snapshotsAsked {
            Terminal.standardError("asked the other holders of '\(name)' for its whole state; it arrives at a later 'vault sync'")
        }
        if !quietWhenIdle && sync.isEmpty { Terminal.standardError("up to date") }
    }
}
