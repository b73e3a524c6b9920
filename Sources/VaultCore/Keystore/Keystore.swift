import Foundation
import GRDB

/// The local keystore: one SQLite file in WAL mode, holding this machine's identity and the
/// peers it trusts.
///
/// Every change the user is told about is one transaction, so a crash or a full disk
/// leaves the keystore as it was before the command.
public final class Keystore: Sendable {
    /// Where the keystore lives.
    public let home: VaultHome
    let database: DatabaseQueue

    private init(home: VaultHome, database: DatabaseQueue) {
        self.home = home
        self.database = database
    }

    /// Opens an existing keystore, applying any migrations a newer vault added.
    public static func open(home: VaultHome) throws(VaultError) -> Keystore {
        guard FileManager.default.fileExists(atPath: home.keystorePath) else { throw .noKeystore(path: home.keystorePath) }
        // An empty file (nothing in its log either) is a lost keystore: connecting would write
        // a database into it, and a failed command would have changed the file.
        guard !FileModes.isEmpty(home.keystorePath) || !FileModes.isEmpty(home.keystorePath + "-wal") else {
            throw .emptyKeystore(path: home.keystorePath)
        }
        try FileModes.tighten(home)
        let keystore = try Keystore(home: home, database: connect(home.keystorePath))
        try keystore.migrate()
        home.sweepTransientFiles()
        keystore.sweepPieceFiles()
        return keystore
    }

    /// Creates the keystore with a new identity, or with `force` replaces the identity of an
    /// existing one. Peers are kept when replacing: trusting them stays valid. Replacing is
    /// refused while the keystore holds shares, which are sealed to the current keys.
    ///
    /// - Parameter passphrase: when given, the private keys are stored sealed under it.
    @discardableResult
    public static func create(
        home: VaultHome, label: Label, passphrase: SecureBytes?, scrypt: ScryptParameters = .default,
        force: Bool = false, random: some RandomSource = SecureRandom()
    ) throws(VaultError) -> Keystore {
        try create(home: home, label: label, protection: NewKeyProtection(passphrase: passphrase, scrypt: scrypt),
                   force: force, random: random)
    }

    /// Creates the keystore with a new identity protected as `protection` says (a
    /// passphrase, the TPM, both, or neither), as ``create(home:label:passphrase:scrypt:force:random:)``.
    @discardableResult
    public static func create(
        home: VaultHome, label: Label, protection: NewKeyProtection, force: Bool = false,
        random: some RandomSource = SecureRandom()
    ) throws(VaultError) -> Keystore {
        try createIdentity(home: home, label: label, protection: protection, force: force, random: random).keystore
    }

    /// ``create(home:label:protection:force:random:)``, saying as well what it did with the
    /// TPM's lockout hierarchy (keys sealed with a PIN guard the PIN's guess limit with it).
    /// Replacing an identity that keeps the lockout's authorization is refused: it is sealed
    /// under that identity's PIN, and would be lost with it.
    public static func createIdentity(
        home: VaultHome, label: Label, protection: NewKeyProtection, force: Bool = false,
        random: some RandomSource = SecureRandom()
    ) throws(VaultError) -> (keystore: Keystore, lockout: TPMLockoutChange) {
        let existed = FileManager.default.fileExists(atPath: home.keystorePath)
        var created = false
        do throws(VaultError) {
            try FileModes.createDirectory(home)
            if !existed { created = try FileModes.createPrivateFile(home.keystorePath) }
            try FileModes.tighten(home)
            let keystore = try Keystore(home: home, database: connect(home.keystorePath))
            try keystore.migrate()
            let (identity, secret) = Identity.generate(label: label, random: random)
            // Sealed before the transaction: a TPM that refuses leaves nothing behind.
            let stored = try stored(secret, protection, random: random)
            let lockout = try LockoutSeal.plan(kept: nil, opened: UnlockFactors(), new: protection.tpm, random: random)
            var blob = Data(stored.bytes)
            defer { blob.resetBytes(in: 0..<blob.count) }
            try keystore.write { db in
                if let row = try Row.fetchOne(db, sql: "SELECT tpm_lockout IS NOT NULL AS holds FROM identity") {
                    guard force else { throw VaultError.identityExists(path: home.keystorePath) }
                    // Every stored share is sealed to the current keys: replacing them would
                    // make each one unopenable, for this holder and for recovery by others.
                    let shares = try Int.fetchOne(db, sql: "SELECT count(*) FROM secret") ?? 0
                    guard shares == 0 else { throw VaultError.identityHoldsShares(count: shares) }
                    // The lockout's authorization opens with the current PIN only: forgotten,
                    // the TPM's lockout hierarchy is lost until the TPM is cleared.
                    guard !(row["holds"] as Bool) else { throw VaultError.identityHoldsTPMLockout }
                    try db.execute(sql: "DELETE FROM identity")
                }
                try db.execute(
                    sql: """
                        INSERT INTO identity (id, label, card, secret_format, secret, created_at, tpm_lockout)
                        VALUES (1, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [label.value, Data(identity.card.encoded), stored.format.rawValue, blob,
                                Int64(VaultClock.now().timeIntervalSince1970), lockout.stored.map { Data($0) }])
            }
            try keystore.scrubJournal()
            return (keystore, keystore.finish(lockout))
        } catch {
            if created { FileModes.removeDatabaseFiles(home.keystorePath) }
            throw error
        }
    }

    /// The identity's 64 secret bytes as the keystore stores them under `protection`.
    private static func stored(
        _ secret: SecureBytes, _ protection: NewKeyProtection, random: some RandomSource
    ) throws(VaultError) -> (format: KeystoreSchema.SecretFormat, bytes: [UInt8]) {
        if let tpm = protection.tpm {
            return (.sealed, try IdentitySeal.seal(secret, tpm: tpm.selection, pin: tpm.pin, pcrs: tpm.pcrs,
                                                   passphrase: protection.passphrase, scrypt: protection.scrypt, random: random))
        }
        if let passphrase = protection.passphrase {
            guard passphrase.count > 0 else { throw .empty(what: "passphrase") }
            return (.passphrase, PassphraseSeal.seal(secret, passphrase: passphrase, parameters: protection.scrypt, random: random))
        }
        return (.plain, secret.withUnsafeBytes { Array($0) })
    }

    /// The public part of the identity; needs no passphrase.
    public func identityInfo() throws(VaultError) -> IdentityInfo {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM identity WHERE id = 1") else {
                throw VaultError.noKeystore(path: self.home.keystorePath)
            }
            return try IdentityInfo(row: row)
        }
    }

    /// Opens the private keys. `passphrase` is needed when they are protected, and ignored
    /// otherwise.
    public func unlock(passphrase: SecureBytes?) throws(VaultError) -> Identity {
        try unlock(UnlockFactors(passphrase: passphrase))
    }

    /// Opens the private keys with what `factors` gives: the passphrase, and for keys sealed
    /// by the TPM, the PIN and the TPM to ask. What the keys do not need is ignored.
    public func unlock(_ factors: UnlockFactors) throws(VaultError) -> Identity {
        let (info, format, stored) = try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM identity WHERE id = 1") else {
                throw VaultError.noKeystore(path: self.home.keystorePath)
            }
            return (try IdentityInfo(row: row), row["secret_format"] as Int, row["secret"] as Data)
        }
        var bytes = [UInt8](stored)
        defer { bytes.wipe() }
        let secret: SecureBytes
        switch KeystoreSchema.SecretFormat(rawValue: format) {
        case .plain:
            secret = SecureBytes(copying: bytes)
        case .passphrase:
            guard let passphrase = factors.passphrase else { throw .passphraseRequired }
            secret = try PassphraseSeal.open(bytes, passphrase: passphrase)
        case .sealed:
            let selection = if let tpm = factors.tpm { tpm } else { try TPMSelection.fromEnvironment() }
            secret = try IdentitySeal(bytes).open(selection: selection, pin: factors.pin, passphrase: factors.passphrase)
        case nil:
            throw .keystoreCorrupt("unknown secret format \(format)")
        }
        return try Identity(label: info.label, card: info.card, secret: secret)
    }

    /// Seals the private keys under a new passphrase, or stores them unsealed when
    /// `newPassphrase` is nil.
    public func changePassphrase(
        current: SecureBytes?, new newPassphrase: SecureBytes?, scrypt: ScryptParameters = .default,
        random: some RandomSource = SecureRandom()
    ) throws(VaultError) {
        try changeProtection(current: UnlockFactors(passphrase: current),
                             to: NewKeyProtection(passphrase: newPassphrase, scrypt: scrypt), random: random)
    }

    /// Protects the private keys anew: opens them with `current`, seals them as `protection`
    /// says (the TPM's part first, outside any transaction), then replaces the stored form
    /// in one transaction. A process killed at any point leaves the old protection or the
    /// new one, never neither: the TPM keeps nothing of a seal, the keystore keeps its blobs.
    /// The TPM's lockout authorization follows the PIN (``TPMLockoutChange``).
    @discardableResult
    public func changeProtection(
        current: UnlockFactors, to protection: NewKeyProtection, random: some RandomSource = SecureRandom()
    ) throws(VaultError) -> TPMLockoutChange {
        try protect(unlock(current), openedWith: current, as: protection, random: random)
    }

    /// Protects the open keys of `identity`, this keystore's, as `protection` says:
    /// ``changeProtection(current:to:random:)`` for keys the caller has opened already, with
    /// `factors` (the PIN unseals the lockout authorization kept under it).
    @discardableResult
    public func protect(
        _ identity: Identity, openedWith factors: UnlockFactors, as protection: NewKeyProtection,
        random: some RandomSource = SecureRandom()
    ) throws(VaultError) -> TPMLockoutChange {
        guard identity.card == (try identityInfo()).card else { throw .unexpected("protecting the keys of another identity") }
        let secret = SecureBytes(count: Identity.secretLength)
        secret.withUnsafeMutableBytes { out in
            identity.agreementSecret.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 32) }
            identity.signingSecret.withUnsafeBytes { (out.baseAddress! + 32).copyMemory(from: $0.baseAddress!, byteCount: 32) }
        }
        let stored = try Self.stored(secret, protection, random: random)
        let kept = try read { db in try Data.fetchOne(db, sql: "SELECT tpm_lockout FROM identity WHERE id = 1") }
        // Last before the transaction: giving the lockout back is the one step on the TPM.
        let lockout = try LockoutSeal.plan(kept: kept.map { [UInt8]($0) }, opened: factors, new: protection.tpm, random: random)
        var blob = Data(stored.bytes)
        defer { blob.resetBytes(in: 0..<blob.count) }
        try write { db in
            try db.execute(
                sql: "UPDATE identity SET secret_format = ?, secret = ?, tpm_lockout = ? WHERE id = 1",
                arguments: [stored.format.rawValue, blob, lockout.stored.map { Data($0) }])
        }
        try scrubJournal()
        return finish(lockout)
    }

    /// Sets the planned lockout authorization on the TPM, now that the keystore holds its
    /// seal; one the TPM did not take because another program took the hierarchy first is
    /// forgotten (it guards nothing).
    private func finish(_ plan: LockoutSeal.Plan) -> TPMLockoutChange {
        let change = LockoutSeal.take(plan)
        if change == .leftAsItWas && plan.stored != nil {
            try? write { db in try db.execute(sql: "UPDATE identity SET tpm_lockout = NULL WHERE id = 1") }
        }
        return change
    }

    // MARK: - Plumbing

    /// One serialized connection. WAL mode is set here rather than through GRDB's
    /// DatabasePool, which creates and drops a table on every open: a command that changes
    /// nothing must leave the file byte for byte as it was.
    private static func connect(_ path: String) throws(VaultError) -> DatabaseQueue {
        // SQLite says only "unable to open database file" of a directory in the file's place.
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { throw .fileSystem(path: path, errno: EISDIR) }
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // Persistent in the file: a no-op once set.
            guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                throw VaultError.storage("cannot switch the keystore to WAL mode")
            }
            // A commit the user was told about survives power loss, not only a crash.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Deleted rows (old sealed keys, removed peers) are overwritten, not left in free pages.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            // A WAL reset by a checkpoint is cut back to nothing, so old page images (old keys)
            // do not linger past it in the file's unused tail.
            _ = try Int.fetchOne(db, sql: "PRAGMA journal_size_limit = 0")
        }
        return try storage(on: PathText.directory(of: path)) { try DatabaseQueue(path: path, configuration: configuration) }
    }

    /// Copies the WAL into the database and empties it, after a write of identity secrets.
    /// Until then the old key pages (perhaps unencrypted) stay in the WAL and in the main
    /// file, and SQLite checkpoints on close only when no other connection holds the file.
    func scrubJournal() throws(VaultError) {
        let busy = try Self.storage(on: home.directory) {
            try database.writeWithoutTransaction { db in
                try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")?[0] as Int? ?? 1
            }
        }
        guard busy == 0 else {
            throw .storage("the keys were changed, but another process reading the keystore keeps the old ones in its journal: run the command again once it has finished")
        }
    }

    private func migrate() throws(VaultError) {
        let migrator = KeystoreSchema.migrator(pieces: piecesDirectory)
        try Self.storage(on: home.directory) {
            let (superseded, complete) = try database.read {
                (try migrator.hasBeenSuperseded($0), try migrator.hasCompletedMigrations($0))
            }
            if superseded { throw VaultError.keystoreTooNew(path: home.keystorePath) }
            // migrate() always opens a write transaction, which rewrites pages even when nothing
            // is pending; a read-only command must leave the file as it found it.
            if !complete { try migrator.migrate(database) }
        }
    }

    package func read<T>(_ body: (Database) throws -> T) throws(VaultError) -> T {
        try Self.storage(on: home.directory) { try database.read(body) }
    }

    package func write<T>(_ body: (Database) throws -> T) throws(VaultError) -> T {
        try Self.storage(on: home.directory) { try database.write(body) }
    }

    /// Runs `body`, turning SQLite's errors into ``VaultError/storage(_:)``. `directory`
    /// holds the keystore: SQLite reports a full disk as a plain I/O error when it cannot
    /// even grow its shared-memory index or journal, so a full disk is told by looking.
    /// Anything else `body` throws is not the keystore's fault (a damaged input read inside
    /// a transaction must say so itself), so it never takes the keystore's name.
    static func storage<T>(on directory: String, _ body: () throws -> T) throws(VaultError) -> T {
        do {
            return try body()
        } catch let error as VaultError {
            throw error
        } catch let error as DatabaseError {
            switch error.resultCode {
            case .SQLITE_FULL: throw .storage("cannot write the keystore: the disk is full")
            case .SQLITE_IOERR where Self.isFull(directory): throw .storage("cannot write the keystore: the disk is full")
            case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_CANTOPEN:
                throw .storage("cannot open or write the keystore in \(directory): \(error.message ?? "permission denied")")
            case .SQLITE_CORRUPT, .SQLITE_NOTADB: throw .keystoreCorrupt(error.message ?? "not a database")
            default: throw .storage("cannot use the keystore: \(error.message ?? "SQLite error \(error.resultCode.rawValue)")")
            }
        } catch {
            throw .wrapping(error)
        }
    }

    /// Whether the file system holding `directory` has no room left for an ordinary user.
    static func isFull(_ directory: String) -> Bool {
        var info = statvfs()
        return statvfs(directory, &info) == 0 && info.f_bavail == 0
    }
}

/// The public part of this machine's identity.
public struct IdentityInfo: Sendable {
    /// The label.
    public let label: Label
    /// The public key card.
    public let card: KeyCard
    /// The scrypt parameters sealing the private keys, or nil when they need no passphrase.
    public let passphraseParameters: ScryptParameters?
    /// How the private keys are protected.
    public let protection: KeyProtection
    /// When the identity was created.
    public let createdAt: Date

    /// Whether the private keys need a passphrase.
    public var isPassphraseProtected: Bool { passphraseParameters != nil }
    /// Whether the private keys are sealed by the TPM with a PIN.
    public var needsPIN: Bool { protection.tpm?.pin ?? false }

    init(row: Row) throws {
        label = try Label(row["label"] as String)
        card = try KeyCard(encoded: [UInt8](row["card"] as Data))
        let format: Int = row["secret_format"]
        switch KeystoreSchema.SecretFormat(rawValue: format) {
        case .passphrase:
            passphraseParameters = PassphraseSeal.parameters(of: [UInt8](row["secret"] as Data))
            protection = KeyProtection(passphrase: passphraseParameters, tpm: nil)
        case .sealed:
            // Only the header is read: nothing is unsealed to describe the protection.
            let seal = try IdentitySeal([UInt8](row["secret"] as Data))
            passphraseParameters = seal.scrypt
            protection = KeyProtection(passphrase: seal.scrypt,
                                       tpm: seal.tpm.map { KeyProtection.TPMProtection(pin: $0.hasPIN, pcrs: $0.pcrs) })
        case .plain:
            passphraseParameters = nil
            protection = KeyProtection(passphrase: nil, tpm: nil)
        case nil:
            // Not "unprotected": keys this vault cannot read may be protected in a way it
            // does not know, and are refused as ``Keystore/unlock(_:)`` refuses them.
            throw VaultError.keystoreCorrupt("unknown secret format \(format)")
        }
        createdAt = Date(timeIntervalSince1970: TimeInterval(row["created_at"] as Int64))
    }
}
