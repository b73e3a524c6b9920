import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultTestSupport

@Suite struct KeystoreTests {
    let directory = TemporaryDirectory()
    var home: VaultHome { VaultHome(directory: directory.file("home")) }

    func mode(_ path: String) -> mode_t {
        var info = stat()
        #expect(stat(path, &info) == 0)
        return info.st_mode & 0o777
    }

    @Test func createsPrivateFilesInWALMode() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        #expect(mode(home.directory) == 0o700)
        #expect(mode(home.keystorePath) == 0o600)
        let journal = try keystore.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
        #expect(journal == "wal")
        // WAL mode is recorded in the file header (bytes 18 and 19 are 2), so it holds for
        // every later connection, including other tools'.
        let header = try #require(FileManager.default.contents(atPath: home.keystorePath)).prefix(20)
        #expect(header[18] == 2 && header[19] == 2)
        try keystore.addPeer(try KeyCard(text: KeyCardTests.vectorText), label: Label("v"), address: nil)
        // The WAL and shared-memory files exist while the pool is open; they inherit 0600.
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: home.keystorePath + suffix) {
            #expect(mode(home.keystorePath + suffix) == 0o600)
        }
    }

    @Test func tightensAWidenedKeystore() throws {
        try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        chmod(home.directory, 0o755)
        chmod(home.keystorePath, 0o644)
        _ = try Keystore.open(home: home)
        #expect(mode(home.directory) == 0o700)
        #expect(mode(home.keystorePath) == 0o600)
    }

    @Test func resolvesHomeInOrder() {
        let env = ["VAULT_HOME": "/v", "XDG_DATA_HOME": "/x", "HOME": "/h"]
        #expect(VaultHome.resolve(explicit: "/e", environment: env).directory == "/e")
        #expect(VaultHome.resolve(explicit: nil, environment: env).directory == "/v")
        #expect(VaultHome.resolve(explicit: nil, environment: ["XDG_DATA_HOME": "/x", "HOME": "/h"]).directory == "/x/vault")
        #expect(VaultHome.resolve(explicit: nil, environment: ["XDG_DATA_HOME": "rel", "HOME": "/h"]).directory
            == "/h/.local/share/vault")
        #expect(VaultHome.resolve(explicit: nil, environment: ["HOME": "/h"]).directory == "/h/.local/share/vault")
    }

    @Test func refusesASecondIdentityUnlessForced() throws {
        let first = try Keystore.create(home: home, label: Label("alice"), passphrase: nil).identityInfo()
        try Keystore.open(home: home).addPeer(try KeyCard(text: KeyCardTests.vectorText), label: Label("v"), address: nil)
        #expect(throws: VaultError.identityExists(path: home.keystorePath)) {
            try Keystore.create(home: home, label: Label("eve"), passphrase: nil)
        }
        #expect(try Keystore.open(home: home).identityInfo().card == first.card)
        let second = try Keystore.create(home: home, label: Label("alice2"), passphrase: nil, force: true)
        #expect(try second.identityInfo().card != first.card)
        #expect(try second.identityInfo().label.value == "alice2")
        #expect(try second.peers().count == 1)
    }

    @Test func missingKeystoreIsReported() {
        #expect(throws: VaultError.noKeystore(path: home.keystorePath)) { try Keystore.open(home: home) }
    }

    @Test func passphraseProtectsTheKeys() throws {
        let pass = SecureBytes(copying: Array("correct horse".utf8))
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: pass)
        let info = try keystore.identityInfo()
        #expect(info.isPassphraseProtected && info.passphraseParameters == .default)
        #expect(throws: VaultError.passphraseRequired) { try keystore.unlock(passphrase: nil) }
        #expect(throws: VaultError.wrongPassphrase) {
            try keystore.unlock(passphrase: SecureBytes(copying: Array("wrong".utf8)))
        }
        let identity = try keystore.unlock(passphrase: pass)
        #expect(identity.card == info.card)
        // The raw secret is not in the file: only its seal is.
        let secret = identity.agreementSecret.withUnsafeBytes(Array.init)
        let file = try #require(FileManager.default.contents(atPath: home.keystorePath))
        #expect(file.firstRange(of: Data(secret)) == nil)
    }

    /// Finding 9: with another connection open, SQLite does not checkpoint on close, so the
    /// unencrypted keys stayed in vault.sqlite (and their pages in the WAL) after a
    /// passphrase was set.
    @Test func settingAPassphraseLeavesNoPlainKeysBehindAnotherConnection() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let identity = try keystore.unlock(passphrase: nil)
        // The signing secret's second half is its public key, which the card holds in the clear.
        let halves = [identity.agreementSecret.withUnsafeBytes(Array.init), Array(identity.signingSecret.withUnsafeBytes(Array.init).prefix(32))]
        let other = try DatabaseQueue(path: home.keystorePath)
        _ = try other.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM identity") }
        try keystore.changePassphrase(current: nil, new: SecureBytes(copying: Array("correct horse".utf8)),
                                      scrypt: ScryptParameters(logN: 15))
        _ = try other.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM identity") }
        for suffix in ["", "-wal"] {
            let bytes = [UInt8](FileManager.default.contents(atPath: home.keystorePath + suffix) ?? Data())
            for half in halves {
                let found = contains(bytes, half)
                #expect(!found, "vault.sqlite\(suffix) still holds a plain key")
            }
        }
        try other.close()
    }

    func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    @Test func changesAndRemovesThePassphrase() throws {
        let old = SecureBytes(copying: Array("old".utf8)), new = SecureBytes(copying: Array("new".utf8))
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: old)
        let card = try keystore.identityInfo().card
        #expect(throws: VaultError.wrongPassphrase) { try keystore.changePassphrase(current: new, new: new) }
        try keystore.changePassphrase(current: old, new: new, scrypt: ScryptParameters(logN: 16))
        #expect(try keystore.identityInfo().passphraseParameters?.logN == 16)
        #expect(throws: VaultError.wrongPassphrase) { try keystore.unlock(passphrase: old) }
        #expect(try keystore.unlock(passphrase: new).card == card)
        try keystore.changePassphrase(current: new, new: nil)
        #expect(try keystore.identityInfo().isPassphraseProtected == false)
        #expect(try keystore.unlock(passphrase: nil).card == card)
    }

    @Test func detectsKeysThatDoNotMatchTheCard() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        try keystore.write { db in
            try db.execute(sql: "UPDATE identity SET secret = ?", arguments: [Data(repeating: 7, count: 64)])
        }
        #expect(throws: VaultError.keystoreCorrupt("the private keys do not match the key card")) {
            try keystore.unlock(passphrase: nil)
        }
    }

    /// A secret format this vault does not know (written past the table's CHECK) is refused
    /// by everything that reads it: not described as unprotected keys, nor opened.
    @Test func refusesASecretFormatItDoesNotKnow() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        try keystore.write { db in
            try db.execute(sql: "PRAGMA ignore_check_constraints = ON")
            try db.execute(sql: "UPDATE identity SET secret_format = 3")
            try db.execute(sql: "PRAGMA ignore_check_constraints = OFF")
        }
        #expect(throws: VaultError.keystoreCorrupt("unknown secret format 3")) { try keystore.identityInfo() }
        #expect(throws: VaultError.keystoreCorrupt("unknown secret format 3")) { try keystore.unlock(passphrase: nil) }
    }

    @Test func refusesAKeystoreFromANewerVault() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        try keystore.write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')")
        }
        #expect(throws: VaultError.keystoreTooNew(path: home.keystorePath)) { try Keystore.open(home: home) }
    }

    /// v18 makes `group_refused` again so that it takes 'left' (`vault group leave`): the
    /// refusals of a keystore from before survive it, and a left group is kept after it.
    @Test func refusalsSurviveTheMigrationThatAllowsLeaving() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let group = [UInt8](repeating: 1, count: 16), owner = [UInt8](repeating: 2, count: 32)
        // Back to v17: its table and CHECK, and no declines.
        try keystore.write { db in
            try db.execute(sql: """
                DROP TABLE group_declines;
                DROP TABLE group_refused;
                CREATE TABLE group_refused (
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16), owner BLOB NOT NULL CHECK (length(owner) = 32),
                    version INTEGER NOT NULL, reason TEXT NOT NULL CHECK (reason IN ('untrusted', 'invalid')),
                    relay_url TEXT NOT NULL, relay_card BLOB NOT NULL CHECK (length(relay_card) = 65), refused_at INTEGER NOT NULL,
                    PRIMARY KEY (group_id, owner)
                ) WITHOUT ROWID;
                CREATE INDEX group_refused_by_owner ON group_refused(owner);
                DELETE FROM grdb_migrations WHERE identifier IN ('v18-group-leave', 'v19-left-group-relays');
                """)
        }
        try keystore.remember(GroupRefusal(group: group, owner: owner, version: 3, reason: .untrusted, relayURL: "http://127.0.0.1:1",
                                           relayCard: try KeyCard(text: KeyCardTests.vectorText)))
        #expect(throws: (any Error).self) { try keystore.write { db in try db.execute(sql: "UPDATE group_refused SET reason = 'left'") } }

        let migrated = try Keystore.open(home: home)
        let kept = try #require(try migrated.refusal(group: group, owner: owner))
        #expect(kept.reason == .untrusted && kept.version == 3 && kept.relayURL == "http://127.0.0.1:1")
        try migrated.write { db in try db.execute(sql: "UPDATE group_refused SET reason = 'left'") }
        #expect(try migrated.leftGroups().map(\.group) == [group])
        #expect(try migrated.pendingDeclines().isEmpty)
    }

    /// v19 keeps the relays of a left group once told (`told`), so that a join can ask
    /// another when the first is down: the relays of a keystore from before are all still
    /// to be told, and stay known once told.
    @Test func aLeftGroupKeepsItsRelaysOnceTold() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let group = [UInt8](repeating: 1, count: 16), owner = [UInt8](repeating: 2, count: 32)
        let card = try KeyCard(text: KeyCardTests.vectorText)
        // Back to v18's table, with one relay still to be told.
        try keystore.write { db in
            try db.execute(sql: """
                DROP TABLE group_declines;
                CREATE TABLE group_declines (
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16), owner BLOB NOT NULL CHECK (length(owner) = 32),
                    relay_name TEXT NOT NULL, relay_url TEXT NOT NULL, relay_card BLOB NOT NULL CHECK (length(relay_card) = 65),
                    PRIMARY KEY (group_id, relay_card)
                ) WITHOUT ROWID;
                DELETE FROM grdb_migrations WHERE identifier = 'v19-left-group-relays';
                """)
            try db.execute(sql: "INSERT INTO group_declines VALUES (?, ?, 'r2', 'http://127.0.0.1:2', ?)",
                           arguments: [Data(group), Data(owner), Data(card.encoded)])
        }
        let migrated = try Keystore.open(home: home)
        #expect(try migrated.pendingDeclines().map(\.relay.name.value) == ["r2"])
        try migrated.declined(group: group, at: card)
        #expect(try migrated.pendingDeclines().isEmpty)
        #expect(try migrated.relays(ofLeftGroup: group, owner: owner).map(\.url) == ["http://127.0.0.1:2"])
        #expect(try migrated.relays(ofLeftGroup: group, owner: [UInt8](repeating: 3, count: 32)).isEmpty)
        try migrated.forgetRefusal(group: group, owner: owner)
        #expect(try migrated.relays(ofLeftGroup: group, owner: owner).isEmpty)
    }

    /// `count` relays on loopback ports nothing listens on, each with a card of its own.
    static func relays(_ count: Int) throws -> [GroupRecord.Relay] {
        try (0..<count).map { i in
            GroupRecord.Relay(name: try Label("r\(i)"), url: "http://127.0.0.1:\(7790 + i)",
                              card: Identity.generate(label: try Label("r"), random: SecureRandom()).0.card)
        }
    }

    /// Group "team" (id 05…05) of `owner` alone, on `relays`.
    static func team(of owner: Identity, version: UInt64, relays: [GroupRecord.Relay]) throws -> GroupRecord {
        try GroupRecord(id: [UInt8](repeating: 5, count: 16), version: version, name: Label("team"), owner: owner.card,
                        relays: relays, members: [GroupRecord.Member(label: owner.label, card: owner.card)], signer: owner)
    }

    /// v20 keeps the relays that could not take a group's acceptance. A row is given out
    /// only while its group is kept and the kept record names its relay; any other is
    /// dropped as it is read, and leaving the group drops them all.
    @Test func acceptancesStillToMakeFollowTheKeptGroup() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let alice = try keystore.unlock(passphrase: nil)
        let relays = try Self.relays(3)
        func record(version: UInt64, relays: [GroupRecord.Relay]) throws -> GroupRecord {
            try Self.team(of: alice, version: version, relays: relays)
        }
        try keystore.accept(group: try record(version: 1, relays: relays))
        let group = [UInt8](repeating: 5, count: 16), stranger = [UInt8](repeating: 6, count: 16)
        try keystore.remember(accepting: group, at: [relays[0].card, relays[2].card, relays[2].card])
        try keystore.remember(accepting: stranger, at: [relays[1].card])
        #expect(Set(try keystore.pendingAccepts().map(\.relay.name.value)) == ["r0", "r2"])
        #expect(try keystore.pendingAccepts().count == 2)
        #expect(try keystore.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM group_accepts WHERE group_id = ?", arguments: [Data(stranger)]) } == 0)

        // Version 2 drops r0: its row goes; r2 stays, with the record as kept now.
        try keystore.accept(group: try record(version: 2, relays: Array(relays[1...])))
        let pending = try keystore.pendingAccepts()
        #expect(pending.map(\.relay.name.value) == ["r2"] && pending.map(\.record.version) == [2])
        try keystore.accepted(group: group, at: relays[2].card)
        #expect(try keystore.pendingAccepts().isEmpty)

        try keystore.remember(accepting: group, at: [relays[1].card])
        try keystore.leave(group: try #require(try keystore.group(id: group)))
        #expect(try keystore.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM group_accepts") } == 0)
    }

    /// A leave and a receive (or a join and a receive) in two processes at once: whichever
    /// lands last, the keystore keeps the member's choice. A take after a leave is refused
    /// but for a join; an acceptance that reaches a relay after the leave marks the relay as
    /// still to be told; a decline that reaches one after a join marks it as still to accept.
    @Test func aLeaveOrAJoinIsNotUndoneByARequestInFlight() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let alice = try keystore.unlock(passphrase: nil)
        let relays = try Self.relays(2)
        let relay = relays[0]
        let record = try Self.team(of: alice, version: 1, relays: relays)
        #expect(try keystore.take(group: record, joining: false) == true)
        try keystore.leave(group: record)
        for relay in relays { try keystore.declined(group: record.id, at: relay.card) }
        #expect(try keystore.pendingDeclines().isEmpty && keystore.pendingAccepts().isEmpty)

        #expect(try keystore.take(group: record, joining: false) == nil)
        #expect(try keystore.group(id: record.id) == nil && keystore.leftGroup(record.id) != nil)
        try keystore.accepted(group: record.id, at: relay.card)
        #expect(try keystore.pendingDeclines().map(\.relay) == [relay], "an acceptance after the leave is not declined again")

        #expect(try keystore.take(group: record, joining: true) == true)
        #expect(try keystore.leftGroup(record.id) == nil && keystore.pendingDeclines().isEmpty)
        try keystore.declined(group: record.id, at: relay.card)
        #expect(try keystore.pendingAccepts().map(\.relay) == [relay], "a decline after the join is not accepted again")
    }

    /// A group's owner never changes: a newer record under a kept group's id from another
    /// owner, even a trusted peer naming this identity, is refused and the kept one stays.
    /// A receive takes the listings of a group one after another, so without this the
    /// relay that answered first would decide whose group it is.
    @Test func aKeptGroupDoesNotChangeOwner() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let alice = try keystore.unlock(passphrase: nil)
        let mallory = Identity.generate(label: try Label("mallory"), random: SecureRandom()).0
        try keystore.addPeer(mallory.card, label: Label("mallory"), address: nil)
        let relays = try Self.relays(2)
        let record = try Self.team(of: alice, version: 1, relays: relays)
        #expect(try keystore.take(group: record, joining: false) == true)
        let other = try GroupRecord(id: record.id, version: 2, name: Label("team"), owner: mallory.card, relays: relays,
                                    members: [GroupRecord.Member(label: mallory.label, card: mallory.card),
                                              GroupRecord.Member(label: alice.label, card: alice.card)], signer: mallory)
        let changed = VaultError.malformed(what: "the group record", detail: "its owner is not the owner of the group kept under its id")
        #expect(throws: changed) { try keystore.take(group: other, joining: false) }
        #expect(throws: changed) { try keystore.accept(group: other) }
        #expect(try keystore.group(id: record.id)?.encoded == record.encoded)
        #expect(try keystore.accept(group: try Self.team(of: alice, version: 2, relays: relays)), "the owner's own next version is kept")
    }

    /// Refusals are kept to the newest 10,000; a leave is never trimmed with them, or anyone
    /// who names this identity in many groups could push it out and have the group taken back.
    @Test func aLeaveOutlivesTheTrimOfRefusals() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let card = try KeyCard(text: KeyCardTests.vectorText)
        let left = [UInt8](repeating: 9, count: 16)
        try keystore.write { db in
            try db.execute(sql: "INSERT INTO group_refused VALUES (?, ?, 1, 'left', 'http://127.0.0.1:1', ?, 0)",
                           arguments: [Data(left), Data(repeating: 2, count: 32), Data(card.encoded)])
            try db.execute(sql: """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO group_refused SELECT randomblob(16), zeroblob(32), 1, 'untrusted', 'http://127.0.0.1:1', ?, i FROM n
                """, arguments: [Keystore.maximumRefusals, Data(card.encoded)])
        }
        try keystore.remember(GroupRefusal(group: [UInt8](repeating: 8, count: 16), owner: [UInt8](repeating: 3, count: 32), version: 1,
                                           reason: .untrusted, relayURL: "http://127.0.0.1:1", relayCard: card))
        #expect(try keystore.leftGroup(left)?.version == 1)
        // Nor does a refusal of the same group and owner replace the leave; a leave replaces a refusal.
        try keystore.remember(GroupRefusal(group: left, owner: [UInt8](repeating: 2, count: 32), version: 5, reason: .untrusted,
                                           relayURL: "http://127.0.0.1:1", relayCard: card))
        #expect(try keystore.leftGroup(left)?.version == 1)
        let refusals = try keystore.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM group_refused WHERE reason != 'left'") }
        #expect(refusals == Keystore.maximumRefusals)
    }

    /// One relay's damage never replaces what the owner's own record showed: a refusal for
    /// another reason holds at every relay, a damaged one only at its relay.
    @Test func aRelaysDamageDoesNotReplaceTheOwnersRefusal() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let card = try KeyCard(text: KeyCardTests.vectorText)
        let group = [UInt8](repeating: 4, count: 16), owner = [UInt8](repeating: 5, count: 32)
        func refusal(_ reason: GroupRefusal.Reason, _ version: UInt64) -> GroupRefusal {
            GroupRefusal(group: group, owner: owner, version: version, reason: reason, relayURL: "http://127.0.0.1:1", relayCard: card)
        }
        try keystore.remember(refusal(.damaged, 9))
        #expect(try keystore.refusal(group: group, owner: owner) == refusal(.damaged, 9))
        try keystore.remember(refusal(.invalid, 2))
        try keystore.remember(refusal(.damaged, 1 << 40))
        #expect(try keystore.refusal(group: group, owner: owner) == refusal(.invalid, 2))
    }

    /// What a refusal keeps out: a record found not valid, up to its version, at every
    /// relay; a relay's damage, up to the version listed, at that relay only.
    @Test func aRefusalCoversWhatItSays() throws {
        let relay = try KeyCard(text: KeyCardTests.vectorText), other = try Identity.generate(label: Label("other")).0.card
        func refusal(_ reason: GroupRefusal.Reason) -> GroupRefusal {
            GroupRefusal(group: [UInt8](repeating: 4, count: 16), owner: [UInt8](repeating: 5, count: 32), version: 7, reason: reason,
                         relayURL: "http://127.0.0.1:1", relayCard: relay)
        }
        #expect(refusal(.invalid).covers(version: 7, at: other))
        #expect(!refusal(.invalid).covers(version: 8, at: relay))
        #expect(refusal(.damaged).covers(version: 7, at: relay))
        #expect(!refusal(.damaged).covers(version: 7, at: other))
        #expect(!refusal(.damaged).covers(version: 8, at: relay))
        #expect(!refusal(.untrusted).covers(version: 1, at: relay))
        #expect(!refusal(.left).covers(version: 1, at: relay))
    }

    /// A relay's damage at a version listed above 2^63 - 1 (no record has one) is kept as
    /// 2^63 - 1, and still covers what that relay listed: else such a listing of a kept
    /// group would be fetched, and said, at every receive.
    @Test func aRefusalAtAVersionNoRecordHasStillCoversIt() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let relay = try KeyCard(text: KeyCardTests.vectorText)
        let group = [UInt8](repeating: 4, count: 16), owner = [UInt8](repeating: 5, count: 32)
        try keystore.remember(GroupRefusal(group: group, owner: owner, version: .max, reason: .damaged,
                                           relayURL: "http://127.0.0.1:1", relayCard: relay))
        let kept = try #require(try keystore.refusal(group: group, owner: owner))
        #expect(kept.version == UInt64(Int64.max))
        #expect(kept.covers(version: .max, at: relay))
        #expect(kept.covers(version: UInt64(Int64.max) + 1, at: relay))
    }

    @Test func managesPeers() throws {
        let keystore = try Keystore.create(home: home, label: Label("alice"), passphrase: nil)
        let card = try KeyCard(text: KeyCardTests.vectorText)
        let peer = try keystore.addPeer(card, label: Label("Bob"), address: PeerAddress("10.0.0.2:7733"))
        #expect(peer.card == card && peer.address?.port == 7733)
        #expect(try keystore.peer(named: "bob").label.value == "Bob")

        #expect(throws: VaultError.duplicatePeerKey(existingLabel: "Bob")) {
            try keystore.addPeer(card, label: Label("carol"), address: nil)
        }
        let other = try Identity(label: Label("c"), card: nil, secret: SecureBytes(copying: [UInt8](repeating: 3, count: 64))).card
        #expect(throws: VaultError.duplicatePeerLabel("Bob")) { try keystore.addPeer(other, label: Label("BOB"), address: nil) }
        #expect(throws: VaultError.ownCard) {
            try keystore.addPeer(keystore.identityInfo().card, label: Label("me"), address: nil)
        }
        try keystore.addPeer(other, label: Label("carol"), address: nil)
        #expect(throws: VaultError.duplicatePeerLabel("carol")) { try keystore.renamePeer("Bob", to: Label("Carol")) }
        try keystore.renamePeer("bob", to: Label("Robert"))
        try keystore.renamePeer("robert", to: Label("ROBERT"))
        #expect(try keystore.peers().map(\.label.value) == ["carol", "ROBERT"])
        #expect(throws: VaultError.unknownPeer("nobody")) { try keystore.removePeer(named: "nobody") }
        try keystore.removePeer(named: "Robert")
        #expect(try keystore.peers().map(\.label.value) == ["carol"])
    }
}
