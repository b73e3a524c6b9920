import Foundation
import GRDB

/// The keystore's tables, as versioned migrations. A migration, once released, never
/// changes: later versions add new ones. Docs/FORMAT.md, "Keystore schema".
enum KeystoreSchema {
    /// The migrations; `pieces` is the folder of piece files (PieceFiles.swift).
    static func migrator(pieces: String) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-identity-and-peers") { db in
            try db.execute(sql: """
                CREATE TABLE identity (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    label TEXT NOT NULL,
                    card BLOB NOT NULL CHECK (length(card) = 65),
                    secret_format INTEGER NOT NULL CHECK (secret_format IN (0, 1)),
                    secret BLOB NOT NULL,
                    created_at INTEGER NOT NULL
                );
                CREATE TABLE peer (
                    id INTEGER PRIMARY KEY,
                    label TEXT NOT NULL,
                    label_key TEXT NOT NULL UNIQUE,
                    agreement_key BLOB NOT NULL UNIQUE CHECK (length(agreement_key) = 32),
                    signing_key BLOB NOT NULL UNIQUE CHECK (length(signing_key) = 32),
                    address TEXT,
                    added_at INTEGER NOT NULL
                );
                """)
        }
        migrator.registerMigration("v2-secrets") { db in
            try db.execute(sql: """
                CREATE TABLE secret (
                    id BLOB PRIMARY KEY CHECK (length(id) = 16),
                    name TEXT,
                    name_key TEXT UNIQUE,
                    role INTEGER NOT NULL CHECK (role IN (0, 1)),
                    prefix BLOB NOT NULL,
                    box BLOB NOT NULL,
                    stored_at INTEGER NOT NULL
                );
                CREATE TABLE secret_piece (
                    secret_id BLOB NOT NULL REFERENCES secret(id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL,
                    data BLOB NOT NULL,
                    PRIMARY KEY (secret_id, seq)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v3-items") { db in
            try db.execute(sql: """
                CREATE TABLE item (
                    id BLOB PRIMARY KEY CHECK (length(id) = 16),
                    key_id BLOB NOT NULL CHECK (length(key_id) = 16),
                    header BLOB NOT NULL,
                    size INTEGER NOT NULL,
                    stream_length INTEGER NOT NULL,
                    is_new INTEGER NOT NULL CHECK (is_new IN (0, 1)),
                    stored_at INTEGER NOT NULL
                );
                CREATE INDEX item_by_key ON item (key_id);
                CREATE TABLE item_chunk (
                    item_id BLOB NOT NULL REFERENCES item(id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL,
                    data BLOB NOT NULL,
                    PRIMARY KEY (item_id, seq)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v4-settings") { db in
            try db.execute(sql: """
                CREATE TABLE setting (
                    name TEXT NOT NULL,
                    value TEXT NOT NULL,
                    PRIMARY KEY (name, value)
                ) WITHOUT ROWID;
                """)
        }
        // The URL allowlist once held x-source names, which any caller can claim; it now holds
        // callback destinations. Every old entry goes, even one that looks like a
        // destination: it was chosen for another meaning, and must not let a request through.
        migrator.registerMigration("v5-url-allow-by-destination") { db in
            try db.execute(sql: "DELETE FROM setting WHERE name = 'url-allow'")
        }
        // Release needs the holder's consent (issue 14): these are the opt-ins to release
        // without asking, and the record of every release. An empty secret_id stands for
        // every secret of that peer. Both go with their peer or secret, so a removed peer's
        // opt-in cannot come back with a new key under the same label.
        migrator.registerMigration("v6-release-consent") { db in
            try db.execute(sql: """
                CREATE TABLE auto_release (
                    secret_id BLOB NOT NULL CHECK (length(secret_id) IN (0, 16)),
                    peer_key BLOB NOT NULL CHECK (length(peer_key) = 32),
                    PRIMARY KEY (secret_id, peer_key)
                ) WITHOUT ROWID;
                CREATE TABLE release_log (
                    id INTEGER PRIMARY KEY,
                    secret_id BLOB NOT NULL CHECK (length(secret_id) = 16),
                    peer_key BLOB NOT NULL CHECK (length(peer_key) = 32),
                    peer_label TEXT NOT NULL,
                    requester INTEGER NOT NULL,
                    at INTEGER NOT NULL,
                    decision TEXT NOT NULL
                );
                CREATE INDEX release_log_secret ON release_log (secret_id, at);
                """)
        }
        // Shares were keyed by secret id alone, which only its dealer vouches for; they are
        // keyed by (dealer, id) now (``BundleHeader/rowID``), pieces following their share.
        migrator.registerMigration("v7-secrets-by-dealer-and-id") { db in
            try db.execute(sql: "PRAGMA defer_foreign_keys = ON")
            for row in try Row.fetchAll(db, sql: "SELECT * FROM secret") {
                let old: Data = row["id"]
                let new = Data(try StoredSecret(row: row).header.rowID)
                try db.execute(sql: "UPDATE secret SET id = ? WHERE id = ?", arguments: [new, old])
                try db.execute(sql: "UPDATE secret_piece SET secret_id = ? WHERE secret_id = ?", arguments: [new, old])
            }
        }
        // Pieces move out of SQLite into one file per share (issue 18): the bundle as dealt,
        // named by the row id. A migration killed part way leaves files that the next one
        // writes again from the start.
        migrator.registerMigration("v8-pieces-in-files") { db in
            try Keystore.ensureDirectory(pieces)
            for row in try Row.fetchAll(db, sql: "SELECT id, prefix, box FROM secret") {
                let id: Data = row["id"]
                let path = pieces + "/\([UInt8](id).hex).vshare"
                unlink(path)
                let file = try OutputFile(path: path, shownAs: pieces)
                try ([UInt8](row["prefix"] as Data) + [UInt8](row["box"] as Data)).withUnsafeBytes { try file.write($0) }
                let chunks = try Row.fetchCursor(db, sql: "SELECT data FROM secret_piece WHERE secret_id = ? ORDER BY seq", arguments: [id])
                while let chunk = try chunks.next() {
                    try (chunk[0] as Data).withUnsafeBytes { try file.write($0) }
                }
                try file.commit()
            }
            // The files' names are durable before the rows go (a power loss in between must
            // not keep the drop and lose the names).
            try Keystore.sync(pieces, shownAs: pieces)
            try db.execute(sql: "DROP TABLE secret_piece")
        }
        // Relays this identity pinned, the groups it accepted, and its message numbering
        // (Docs/RELAY.md): what it sent to whom, and what it received from whom.
        migrator.registerMigration("v9-relays") { db in
            try db.execute(sql: """
                CREATE TABLE relay (
                    label TEXT NOT NULL,
                    label_key TEXT PRIMARY KEY,
                    url TEXT NOT NULL,
                    card BLOB NOT NULL CHECK (length(card) = 65),
                    added_at INTEGER NOT NULL
                );
                CREATE TABLE relay_group (
                    id BLOB PRIMARY KEY CHECK (length(id) = 16),
                    name TEXT NOT NULL,
                    name_key TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    record BLOB NOT NULL
                );
                CREATE TABLE message_sent (
                    group_id BLOB NOT NULL,
                    recipient BLOB NOT NULL CHECK (length(recipient) = 32),
                    last_sequence INTEGER NOT NULL,
                    PRIMARY KEY (group_id, recipient)
                ) WITHOUT ROWID;
                CREATE TABLE message_received (
                    message_id BLOB PRIMARY KEY CHECK (length(message_id) = 16),
                    group_id BLOB NOT NULL,
                    sender BLOB NOT NULL CHECK (length(sender) = 32),
                    sequence INTEGER NOT NULL,
                    received_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE UNIQUE INDEX message_received_by_sequence ON message_received(group_id, sender, sequence) WHERE sequence > 0;
                CREATE TABLE relay_outbox (
                    message_id BLOB PRIMARY KEY CHECK (length(message_id) = 16),
                    group_id BLOB NOT NULL,
                    shares INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE relay_outbox_recipient (
                    message_id BLOB NOT NULL REFERENCES relay_outbox(message_id) ON DELETE CASCADE,
                    recipient BLOB NOT NULL CHECK (length(recipient) = 32),
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (message_id, recipient)
                ) WITHOUT ROWID;
                CREATE INDEX relay_outbox_by_sequence ON relay_outbox_recipient(recipient, sequence);
                CREATE TABLE resend_requested (
                    group_id BLOB NOT NULL,
                    sender BLOB NOT NULL CHECK (length(sender) = 32),
                    sequence INTEGER NOT NULL,
                    requested_at INTEGER NOT NULL,
                    PRIMARY KEY (group_id, sender, sequence)
                ) WITHOUT ROWID;
                """)
        }
        // The share links this identity created (Docs/LINKS.md): where, and the token that
        // deletes each. Never the link itself: its fragment is shown once and not kept.
        migrator.registerMigration("v10-links") { db in
            try db.execute(sql: """
                CREATE TABLE link_created (
                    link_id BLOB PRIMARY KEY CHECK (length(link_id) = 16),
                    relay_url TEXT NOT NULL,
                    relay_label TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    views INTEGER NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    delete_token BLOB NOT NULL CHECK (length(delete_token) = 32)
                ) WITHOUT ROWID;
                """)
        }
        // Object sync (Docs/RELAY.md, "Object sync"): every change known for an item under
        // a synced key, as signed; the Lamport clock of each key; which keys are tied to
        // which group. An item row records which change it holds; a conflict copy is a row
        // of its own whose id is derived from the item's and its version's.
        migrator.registerMigration("v11-item-sync") { db in
            try db.execute(sql: """
                CREATE TABLE item_change (
                    item_id BLOB NOT NULL CHECK (length(item_id) = 16),
                    counter INTEGER NOT NULL CHECK (counter > 0),
                    author BLOB NOT NULL CHECK (length(author) = 32),
                    key_id BLOB NOT NULL CHECK (length(key_id) = 16),
                    operation INTEGER NOT NULL CHECK (operation IN (1, 2)),
                    record BLOB NOT NULL,
                    received_at INTEGER NOT NULL,
                    published INTEGER NOT NULL CHECK (published IN (0, 1)),
                    PRIMARY KEY (item_id, counter, author)
                ) WITHOUT ROWID;
                CREATE INDEX item_change_by_key ON item_change (key_id);
                CREATE TABLE item_clock (
                    key_id BLOB PRIMARY KEY CHECK (length(key_id) = 16),
                    counter INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE key_sync (
                    key_id BLOB PRIMARY KEY CHECK (length(key_id) = 16),
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    lifetime INTEGER NOT NULL CHECK (lifetime > 0),
                    min_relays INTEGER NOT NULL CHECK (min_relays > 0),
                    since INTEGER NOT NULL
                ) WITHOUT ROWID;
                ALTER TABLE item ADD COLUMN version_counter INTEGER;
                ALTER TABLE item ADD COLUMN version_author BLOB;
                ALTER TABLE item ADD COLUMN unopened INTEGER NOT NULL DEFAULT 0;
                """)
        }
        // Numbers a sender said it will not send (Docs/RELAY.md, "Gaps and resends"): no
        // longer reported as gaps.
        migrator.registerMigration("v12-closed-numbers") { db in
            try db.execute(sql: """
                CREATE TABLE message_closed (
                    group_id BLOB NOT NULL,
                    sender BLOB NOT NULL CHECK (length(sender) = 32),
                    sequence INTEGER NOT NULL CHECK (sequence > 0),
                    closed_at INTEGER NOT NULL,
                    PRIMARY KEY (group_id, sender, sequence)
                ) WITHOUT ROWID;
                """)
        }
        // Holders anywhere (Docs/RELAY.md, "Holders through relays"). A holder's requests and
        // share offers that came through relays, waiting for its person or answered, kept
        // until they expire (their nonces refuse replays until then). A requester's
        // recoveries through relays: the reply key, sealed, and each holder asked. A dealer's
        // view of where each holder's share went.
        migrator.registerMigration("v13-holders-anywhere") { db in
            try db.execute(sql: """
                CREATE TABLE holder_request (
                    id TEXT PRIMARY KEY CHECK (length(id) = 8),
                    nonce BLOB NOT NULL UNIQUE CHECK (length(nonce) = 16),
                    kind INTEGER NOT NULL CHECK (kind IN (1, 2)),
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    peer_key BLOB NOT NULL CHECK (length(peer_key) = 32),
                    peer_label TEXT NOT NULL,
                    secret_row BLOB,
                    record BLOB NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('waiting', 'approved', 'automatic', 'denied', 'expired', 'answered')),
                    received_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                );
                CREATE TABLE recovery (
                    secret_row BLOB PRIMARY KEY CHECK (length(secret_row) = 16),
                    secret_id BLOB NOT NULL CHECK (length(secret_id) = 16),
                    dealer BLOB NOT NULL CHECK (length(dealer) = 65),
                    holds_share INTEGER NOT NULL CHECK (holds_share IN (0, 1)),
                    reply_key BLOB NOT NULL CHECK (length(reply_key) = 32),
                    reply_secret BLOB NOT NULL,
                    started_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE recovery_ask (
                    nonce BLOB PRIMARY KEY CHECK (length(nonce) = 16),
                    secret_row BLOB NOT NULL REFERENCES recovery(secret_row) ON DELETE CASCADE,
                    holder_key BLOB NOT NULL CHECK (length(holder_key) = 32),
                    holder_label TEXT NOT NULL,
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    state TEXT NOT NULL CHECK (state IN ('asked', 'waiting', 'released', 'denied', 'timed out', 'refused', 'failed')),
                    detail TEXT,
                    until_at INTEGER,
                    prefix BLOB,
                    piece TEXT,
                    updated_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE share_delivery (
                    secret_row BLOB NOT NULL CHECK (length(secret_row) = 16),
                    holder_key BLOB NOT NULL CHECK (length(holder_key) = 32),
                    holder_label TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('not yet reached', 'sent', 'waiting for consent', 'delivered', 'refused')),
                    via TEXT NOT NULL,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (secret_row, holder_key)
                ) WITHOUT ROWID;
                """)
        }
        // Emergency access (Docs/FORMAT.md §21). The holders' queue takes a third kind, an
        // emergency role offered (3), which may have come over the LAN (no group), and an
        // emergency wait's columns: when it releases by this holder's clock, where it stands,
        // and what the dealer was last told. SQLite cannot change a CHECK in place: the table
        // is made again with its rows. The release log gains a detail (a wait's end). The
        // rules, as a dealer set them or a holder received them; a dealer's view of each
        // holder's role and of the emergency requests it was told of, with its decision; a
        // holder's dealer decisions, kept for a request that arrives after them; and holder
        // messages left unconfirmed on the relays, for this identity's other machines.
        migrator.registerMigration("v14-emergency-access") { db in
            try db.execute(sql: """
                CREATE TABLE holder_request_new (
                    id TEXT PRIMARY KEY CHECK (length(id) = 8),
                    nonce BLOB NOT NULL UNIQUE CHECK (length(nonce) = 16),
                    kind INTEGER NOT NULL CHECK (kind IN (1, 2, 3)),
                    group_id BLOB NOT NULL CHECK (length(group_id) IN (0, 16)),
                    peer_key BLOB NOT NULL CHECK (length(peer_key) = 32),
                    peer_label TEXT NOT NULL,
                    secret_row BLOB,
                    record BLOB NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('waiting', 'approved', 'automatic', 'denied', 'expired', 'answered')),
                    received_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    release_at INTEGER,
                    emergency TEXT CHECK (emergency IN ('waiting', 'cancelled', 'denied', 'approved', 'released')),
                    told INTEGER
                );
                INSERT INTO holder_request_new (id, nonce, kind, group_id, peer_key, peer_label, secret_row, record, state, received_at, expires_at)
                    SELECT id, nonce, kind, group_id, peer_key, peer_label, secret_row, record, state, received_at, expires_at FROM holder_request;
                DROP TABLE holder_request;
                ALTER TABLE holder_request_new RENAME TO holder_request;
                ALTER TABLE release_log ADD COLUMN detail TEXT;
                CREATE TABLE emergency_rule (
                    secret_row BLOB PRIMARY KEY CHECK (length(secret_row) = 16),
                    record BLOB NOT NULL,
                    issued INTEGER NOT NULL,
                    role TEXT NOT NULL CHECK (role IN ('dealt', 'offered', 'accepted', 'declined', 'off')),
                    updated_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE emergency_role (
                    secret_row BLOB NOT NULL CHECK (length(secret_row) = 16),
                    holder_key BLOB NOT NULL CHECK (length(holder_key) = 32),
                    holder_label TEXT NOT NULL,
                    issued INTEGER NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('not yet reached', 'sent', 'waiting for consent', 'accepted', 'declined', 'off')),
                    via TEXT NOT NULL,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (secret_row, holder_key)
                ) WITHOUT ROWID;
                CREATE TABLE emergency_watch (
                    reply_key BLOB PRIMARY KEY CHECK (length(reply_key) = 32),
                    id TEXT NOT NULL CHECK (length(id) = 8),
                    secret_row BLOB NOT NULL CHECK (length(secret_row) = 16),
                    trustee BLOB NOT NULL CHECK (length(trustee) = 65),
                    trustee_label TEXT NOT NULL,
                    first_seen INTEGER NOT NULL,
                    decision TEXT CHECK (decision IN ('denied', 'approved')),
                    record BLOB,
                    decided_at INTEGER,
                    expires_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE emergency_watch_holder (
                    reply_key BLOB NOT NULL REFERENCES emergency_watch(reply_key) ON DELETE CASCADE,
                    holder_key BLOB NOT NULL CHECK (length(holder_key) = 32),
                    holder_label TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('untold', 'waiting', 'cancelled', 'denied', 'released')),
                    received_at INTEGER,
                    release_at INTEGER,
                    decision_sent INTEGER NOT NULL DEFAULT 0 CHECK (decision_sent IN (0, 1)),
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (reply_key, holder_key)
                ) WITHOUT ROWID;
                CREATE TABLE emergency_decision (
                    reply_key BLOB PRIMARY KEY CHECK (length(reply_key) = 32),
                    secret_row BLOB NOT NULL CHECK (length(secret_row) = 16),
                    record BLOB NOT NULL,
                    received_at INTEGER NOT NULL,
                    keep_until INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE message_kept (
                    message_id BLOB PRIMARY KEY CHECK (length(message_id) = 16),
                    until_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                """)
        }
        // Keys bound to the machine (issue 35): secret_format 2 is the identity sealed by the
        // TPM (IdentitySeal), its TPM blobs inside. SQLite cannot change a CHECK, so the table
        // is made again with the same row; secure_delete overwrites the old pages.
        migrator.registerMigration("v15-tpm") { db in
            try db.execute(sql: """
                CREATE TABLE identity_new (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    label TEXT NOT NULL,
                    card BLOB NOT NULL CHECK (length(card) = 65),
                    secret_format INTEGER NOT NULL CHECK (secret_format IN (0, 1, 2)),
                    secret BLOB NOT NULL,
                    created_at INTEGER NOT NULL
                );
                INSERT INTO identity_new (id, label, card, secret_format, secret, created_at)
                    SELECT id, label, card, secret_format, secret, created_at FROM identity;
                DROP TABLE identity;
                ALTER TABLE identity_new RENAME TO identity;
                """)
        }
        // Applications on synced keys (Docs/API.md, FORMAT.md §22). Which items are which
        // application's objects (learnt from a put's header, so that a delete, which has no
        // header, still names its object); what happened to them, in the order this keystore
        // learnt it, for apps to read after a cursor (only the entries that still describe
        // an object's state are kept: at most its heads); each app's cursor.
        migrator.registerMigration("v16-apps") { db in
            try db.execute(sql: """
                CREATE TABLE app_object (
                    item_id BLOB PRIMARY KEY CHECK (length(item_id) = 16),
                    key_id BLOB NOT NULL CHECK (length(key_id) = 16),
                    app TEXT NOT NULL,
                    type TEXT NOT NULL,
                    object TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX app_object_by_app ON app_object (key_id, app);
                CREATE TABLE app_event (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    item_id BLOB NOT NULL CHECK (length(item_id) = 16),
                    counter INTEGER NOT NULL CHECK (counter > 0),
                    author BLOB NOT NULL CHECK (length(author) = 32),
                    kind INTEGER NOT NULL CHECK (kind IN (1, 2, 3)),
                    local INTEGER NOT NULL CHECK (local IN (0, 1)),
                    at INTEGER NOT NULL
                );
                CREATE INDEX app_event_by_item ON app_event (item_id);
                CREATE TABLE app_cursor (
                    app TEXT NOT NULL,
                    key_id BLOB NOT NULL CHECK (length(key_id) = 16),
                    seq INTEGER NOT NULL,
                    PRIMARY KEY (app, key_id)
                ) WITHOUT ROWID;
                """)
        }
        // Members opt in to groups (issue 37, M2): group records this identity refused, by
        // group id and owner key, so that a relay listing them again costs no request and no
        // warning. An owner not trusted then is asked about again once it is (its relay is
        // kept to fetch the record from); a record that was not valid is fetched again only
        // at a higher version.
        migrator.registerMigration("v17-group-opt-in") { db in
            try db.execute(sql: """
                CREATE TABLE group_refused (
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    owner BLOB NOT NULL CHECK (length(owner) = 32),
                    version INTEGER NOT NULL,
                    reason TEXT NOT NULL CHECK (reason IN ('untrusted', 'invalid')),
                    relay_url TEXT NOT NULL,
                    relay_card BLOB NOT NULL CHECK (length(relay_card) = 65),
                    refused_at INTEGER NOT NULL,
                    PRIMARY KEY (group_id, owner)
                ) WITHOUT ROWID;
                CREATE INDEX group_refused_by_owner ON group_refused(owner);
                """)
        }
        // Members may leave a group they accepted (`vault group leave`): a third reason,
        // 'left'. SQLite cannot change a CHECK in place, so the table is made again. The
        // relays not yet told of a leave are kept until each is (group_declines).
        migrator.registerMigration("v18-group-leave") { db in
            try db.execute(sql: """
                CREATE TABLE group_refused_new (
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    owner BLOB NOT NULL CHECK (length(owner) = 32),
                    version INTEGER NOT NULL,
                    reason TEXT NOT NULL CHECK (reason IN ('untrusted', 'invalid', 'left')),
                    relay_url TEXT NOT NULL,
                    relay_card BLOB NOT NULL CHECK (length(relay_card) = 65),
                    refused_at INTEGER NOT NULL,
                    PRIMARY KEY (group_id, owner)
                ) WITHOUT ROWID;
                INSERT INTO group_refused_new SELECT group_id, owner, version, reason, relay_url, relay_card, refused_at FROM group_refused;
                DROP TABLE group_refused;
                ALTER TABLE group_refused_new RENAME TO group_refused;
                CREATE INDEX group_refused_by_owner ON group_refused(owner);
                CREATE TABLE group_declines (
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    owner BLOB NOT NULL CHECK (length(owner) = 32),
                    relay_name TEXT NOT NULL,
                    relay_url TEXT NOT NULL,
                    relay_card BLOB NOT NULL CHECK (length(relay_card) = 65),
                    PRIMARY KEY (group_id, relay_card)
                ) WITHOUT ROWID;
                """)
        }
        // A relay told of a leave is marked, not forgotten: `vault group join` asks the
        // group's other relays for its record when the first cannot be reached.
        migrator.registerMigration("v19-left-group-relays") { db in
            try db.execute(sql: "ALTER TABLE group_declines ADD COLUMN told INTEGER NOT NULL DEFAULT 0 CHECK (told IN (0, 1))")
        }
        // The relays of a kept group that could not be told of its acceptance (down at the
        // take or the join), asked again at every receive (GroupAccepts.swift).
        migrator.registerMigration("v20-group-accepts") { db in
            try db.execute(sql: """
                CREATE TABLE group_accepts (
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    relay_card BLOB NOT NULL CHECK (length(relay_card) = 65),
                    PRIMARY KEY (group_id, relay_card)
                ) WITHOUT ROWID;
                """)
        }
        // A fourth reason, 'damaged': a relay served bytes that are not the listed owner's
        // record of the id. That is the relay's doing, so such a refusal holds at that relay
        // only, where 'invalid' (the owner's own record, verified, not one to take) holds at
        // every relay: a relay that lied could otherwise keep a trusted owner's group out
        // everywhere, up to a version it chose. The table is made again for the CHECK.
        migrator.registerMigration("v21-group-refused-damaged") { db in
            try db.execute(sql: """
                CREATE TABLE group_refused_new (
                    group_id BLOB NOT NULL CHECK (length(group_id) = 16),
                    owner BLOB NOT NULL CHECK (length(owner) = 32),
                    version INTEGER NOT NULL,
                    reason TEXT NOT NULL CHECK (reason IN ('untrusted', 'invalid', 'left', 'damaged')),
                    relay_url TEXT NOT NULL,
                    relay_card BLOB NOT NULL CHECK (length(relay_card) = 65),
                    refused_at INTEGER NOT NULL,
                    PRIMARY KEY (group_id, owner)
                ) WITHOUT ROWID;
                INSERT INTO group_refused_new SELECT group_id, owner, version, reason, relay_url, relay_card, refused_at FROM group_refused;
                DROP TABLE group_refused;
                ALTER TABLE group_refused_new RENAME TO group_refused;
                CREATE INDEX group_refused_by_owner ON group_refused(owner);
                """)
        }
        // An emergency request that a newer one of the same trustee replaced, at a holder and
        // as its dealer is told of it ('replaced'); the tables are made again for the CHECKs.
        migrator.registerMigration("v22-emergency-replaced") { db in
            try db.execute(sql: """
                CREATE TABLE holder_request_new (
                    id TEXT PRIMARY KEY CHECK (length(id) = 8),
                    nonce BLOB NOT NULL UNIQUE CHECK (length(nonce) = 16),
                    kind INTEGER NOT NULL CHECK (kind IN (1, 2, 3)),
                    group_id BLOB NOT NULL CHECK (length(group_id) IN (0, 16)),
                    peer_key BLOB NOT NULL CHECK (length(peer_key) = 32),
                    peer_label TEXT NOT NULL,
                    secret_row BLOB,
                    record BLOB NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('waiting', 'approved', 'automatic', 'denied', 'expired', 'answered')),
                    received_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    release_at INTEGER,
                    emergency TEXT CHECK (emergency IN ('waiting', 'cancelled', 'denied', 'approved', 'released', 'replaced')),
                    told INTEGER
                );
                INSERT INTO holder_request_new SELECT id, nonce, kind, group_id, peer_key, peer_label, secret_row, record, state, received_at,
                    expires_at, release_at, emergency, told FROM holder_request;
                DROP TABLE holder_request;
                ALTER TABLE holder_request_new RENAME TO holder_request;
                CREATE TABLE emergency_watch_holder_new (
                    reply_key BLOB NOT NULL REFERENCES emergency_watch(reply_key) ON DELETE CASCADE,
                    holder_key BLOB NOT NULL CHECK (length(holder_key) = 32),
                    holder_label TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('untold', 'waiting', 'cancelled', 'denied', 'released', 'replaced')),
                    received_at INTEGER,
                    release_at INTEGER,
                    decision_sent INTEGER NOT NULL DEFAULT 0 CHECK (decision_sent IN (0, 1)),
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (reply_key, holder_key)
                ) WITHOUT ROWID;
                INSERT INTO emergency_watch_holder_new SELECT reply_key, holder_key, holder_label, state, received_at, release_at, decision_sent,
                    updated_at FROM emergency_watch_holder;
                DROP TABLE emergency_watch_holder;
                ALTER TABLE emergency_watch_holder_new RENAME TO emergency_watch_holder;
                """)
        }
        // The requests of recoveries that ended, kept a week and a day: a holder's answer to
        // one is late, and said so (it was said as a stray: "an answer to no request").
        migrator.registerMigration("v23-recovery-ended") { db in
            try db.execute(sql: """
                CREATE TABLE recovery_ended (
                    nonce BLOB PRIMARY KEY CHECK (length(nonce) = 16),
                    holder_label TEXT NOT NULL,
                    ended_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                """)
        }
        // Security review M1: while a PIN guards keys sealed by the TPM, the TPM's lockout
        // hierarchy has an authorization of vault's, kept here sealed under the same PIN and
        // PCRs (LockoutSeal). A column of the identity, since its seal belongs to the keys'
        // protection and is written in the same UPDATE; NULL when vault keeps none.
        migrator.registerMigration("v24-tpm-lockout") { db in
            try db.execute(sql: "ALTER TABLE identity ADD COLUMN tpm_lockout BLOB")
        }
        return migrator
    }

    /// How the identity's secret is stored.
    enum SecretFormat: Int {
        /// The 64 secret bytes as they are (the file itself is 0600).
        case plain = 0
        /// A ``PassphraseSeal``.
        case passphrase = 1
        /// An ``IdentitySeal``: sealed by the TPM (and a passphrase as well, when chosen).
        case sealed = 2
    }
}
