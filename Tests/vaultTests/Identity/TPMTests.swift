import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultTestSupport

/// Keys bound to this machine (issue 35), against real software TPMs (swtpm in socket
/// mode, one per test): sealing, every command that opens the keys, a copy on another TPM,
/// wrong PINs and lockout, a PCR change, conversion both ways, and what the keystore file
/// holds.
@Suite struct TPMTests {
    /// A user whose commands reach `tpm`, with a PIN file.
    static func user(_ label: String, on tpm: SoftwareTPM) throws -> (User, pin: String) {
        let user = User(label)
        user.vault.environment.merge(tpm.environment) { $1 }
        let pin = try user.directory.write("pin", Data("482916\n".utf8))
        return (user, pin)
    }

    /// The lockout hierarchy's authorization that vault keeps for `user`, unsealed with the
    /// PIN on this test's own connection, as tpm2-tools takes it (`hex:…`): the test plays
    /// the owner who knows the PIN and resets a lockout with it.
    static func lockoutAuthorization(_ user: User, pin: String, on tpm: SoftwareTPM) throws -> String {
        "hex:" + (try lockoutValue(user, pin: pin, on: tpm)).map { String(format: "%02x", $0) }.joined()
    }

    /// The bytes of that authorization.
    static func lockoutValue(_ user: User, pin: String, on tpm: SoftwareTPM) throws -> [UInt8] {
        let stored = try DatabaseQueue.beside(user.vault.home + "/vault.sqlite").read { db in
            try Data.fetchOne(db, sql: "SELECT tpm_lockout FROM identity")
        }
        let object = try LockoutSeal([UInt8](try #require(stored))).object
        let value = try TPMConnection(TPMSelection(tpm.tcti)).unseal(object, auth: object.authValue(pin: SecureBytes(copying: Array(pin.utf8))))
        return value.withUnsafeBytes { Array($0) }
    }

    /// The protection `vault id --format json` reports: "none", "passphrase", "tpm" or
    /// "tpm+passphrase".
    static func protection(_ user: User) throws -> String {
        let json = try JSONSerialization.jsonObject(with: Data(try user.ok("id", "--format", "json").utf8)) as! [String: String]
        return json["protection"]!
    }

    /// init --tpm; then serve, share, recover, a shared key unlocked in the agent and its
    /// items, each opening the keys with the PIN the TPM checks. vault id and secrets show
    /// say how the keys are protected.
    @Test func aSealedIdentityDoesWhatAnyOtherDoes() throws {
        let tpm = try SoftwareTPM()
        let holders = try SharedKeyTests.Holders(["alice", "bob"], serving: ["bob"])
        defer { holders.stopAll() }
        let alice = holders["alice"]
        alice.vault.environment.merge(tpm.environment) { $1 }
        let pin = try alice.directory.write("pin", Data("482916\n".utf8))
        let card = try alice.card()
        // alice was made without protection; her keys move into the TPM, the same keys.
        let converted = try alice.vault.run(["passphrase", "--tpm", "--new-pin-file", pin])
        #expect(converted.status == 0, "\(converted.stderr)")
        #expect(converted.stderr.contains("private keys sealed by this machine's TPM, with a PIN"), "\(converted.stderr)")
        #expect(try alice.card() == card)
        #expect(try alice.ok("id").contains("keys         sealed by this machine's TPM, with a PIN\n"))
        #expect(try Self.protection(alice) == "tpm")

        // Without the PIN, and no terminal to ask on, nothing opens.
        let noPIN = try holders.fails("alice", ["share", "-", "--to", "bob", "-k", "2"], stdin: "x")
        #expect(noPIN.contains("vault: error: the private keys are sealed by the TPM with a PIN and none was given"), "\(noPIN)")
        #expect(noPIN.contains("vault: hint: enter it on a terminal, or pass --pin-file FILE"), "\(noPIN)")

        let note = "the boat key is under the blue pot"
        let id = SharedKeyTests.id(try holders.ok("alice", ["share", "-", "--to", "bob", "-k", "2", "--pin-file", pin], stdin: note))
        #expect(try holders.ok("alice", ["recover", id, "--pin-file", pin]) == note)
        #expect(try holders.ok("alice", ["secrets", "show", id]).contains("your keys    sealed by this machine's TPM, with a PIN\n"))

        // serve opens the keys once, at start, with the PIN; its agent then holds a shared key.
        try holders.start("alice", ["--pin-file", pin])
        try holders.ok("alice", ["key", "create", "family", "--to", "bob", "-k", "2", "--pin-file", pin])
        // The serve's identity recovers the key: unlock asks for no PIN.
        try holders.ok("alice", ["unlock", "family", "--for", "10m"])
        try holders.servers["alice"]!.process.waitFor("agent: key [0-9a-f]{16} unlocked for 600 s")
        let item = SharedKeyTests.id(try holders.ok("alice", ["item", "add", "--key", "family"], stdin: "milk\n"))
        #expect(try holders.ok("alice", ["item", "show", item]) == "milk\n")
        // bob, unsealed, recovers his own share of alice's secret through her serve.
        #expect(try holders.ok("bob", ["recover", id]) == note)
    }

    /// Relays: a member whose keys the TPM seals signs, receives and opens what comes.
    @Test func aSealedIdentityUsesRelays() throws {
        let tpm = try SoftwareTPM()
        let world = try RelayWorld()
        world.bob.vault.environment.merge(tpm.environment) { $1 }
        let pin = try world.bob.directory.write("pin", Data("482916\n".utf8))
        try world.bob.ok("passphrase", "--tpm", "--new-pin-file", pin)
        let note = "meet at the north gate"
        let sent = try world.alice.vault.run(["send", "--group", "team", "-"], stdin: Array(note.utf8))
        #expect(sent.status == 0, "\(sent.stderr)")
        let refused = try world.bob.vault.run(["receive"])
        #expect(refused.status == 1 && refused.stderr.contains("sealed by the TPM with a PIN and none was given"), "\(refused.stderr)")
        let received = try world.bob.vault.run(["receive", "--pin-file", pin])
        #expect(received.status == 0, "\(received.stderr)")
        #expect(received.stdout.hasPrefix(note), "\(received.stdout)")
    }

    /// A copy of the home opens on the TPM that sealed it, and on no other: "this keystore
    /// belongs to another machine", the keystore left as it was.
    @Test func aCopyOnAnotherTPMIsRefused() throws {
        let first = try SoftwareTPM(), second = try SoftwareTPM()
        let (alice, pin) = try Self.user("alice", on: first)
        try alice.ok("init", "--label", "alice", "--tpm", "--pin-file", pin)
        let copy = User("thief")
        try FileManager.default.copyItem(atPath: alice.vault.home, toPath: copy.vault.home)
        copy.vault.environment = second.environment
        #expect(try copy.card() == (try alice.card()))
        // Opening the keys and sealing them again as they were: the simplest command that opens them.
        let refused = try copy.fails("passphrase", "--pin-file", pin, "--remove")
        #expect(refused.contains("vault: error: this keystore belongs to another machine: its keys were sealed by another TPM"), "\(refused)")
        #expect(refused.contains("vault: hint: keys sealed by a TPM open only on the machine that sealed them"), "\(refused)")
        // On its own TPM the copy opens.
        copy.vault.environment = first.environment
        try copy.ok("passphrase", "--pin-file", pin, "--remove")
    }

    /// Each wrong PIN says how many tries are left; at the TPM's limit it locks out, and
    /// then refuses even the right PIN, saying for how long. On a terminal a wrong PIN is
    /// asked again, with the tries left. (The lockout parameters are set before the keys are
    /// sealed, and the lockout is reset with the authorization vault keeps, unsealed with the
    /// PIN: after `init --tpm` nobody else can do either.)
    @Test func wrongPINsLockTheTPMOut() throws {
        let tpm = try SoftwareTPM()
        try tpm.setLockout(maxTries: 3, interval: 60)
        let (alice, pin) = try Self.user("alice", on: tpm)
        try alice.ok("init", "--label", "alice", "--tpm", "--pin-file", pin)
        let reset = try Self.lockoutAuthorization(alice, pin: "482916", on: tpm)
        let wrong = try alice.directory.write("wrong", Data("111111\n".utf8))
        let attempt = ["passphrase", "--pin-file", wrong, "--remove"]
        #expect(try alice.fails(attempt).contains("vault: error: wrong PIN (2 tries left before the TPM locks out)"))
        #expect(try alice.fails(attempt).contains("vault: error: wrong PIN (1 try left before the TPM locks out)"))
        let last = try alice.fails(attempt)
        #expect(last.contains("vault: error: wrong PIN; the TPM now refuses every PIN for up to 1 minute"), "\(last)")
        let locked = try alice.fails("passphrase", "--pin-file", pin, "--remove")
        #expect(locked.contains("vault: error: the TPM is locked out after too many wrong PINs: it takes a PIN again within 1 minute"),
                "\(locked)")
        #expect(locked.contains("vault: hint: wait, then try again"), "\(locked)")

        try tpm.clearLockout(auth: reset)
        let session = try alice.vault.onTerminal(["passphrase", "--remove"])
        try session.expect("TPM PIN for alice: ")
        session.send("111111")
        try session.expect("Wrong PIN (2 tries left before the TPM locks out); try again.")
        try session.expect("TPM PIN for alice: ", times: 2)
        session.send("482916")
        let result = session.finish(within: 60)
        session.readRest()
        #expect(result.status == 0, "\(session.transcript)")
        #expect(session.transcript.contains("private keys sealed by this machine's TPM, with a PIN"), "\(session.transcript)")
    }

    /// Security review M1: the PIN's guess limit is the TPM's dictionary-attack lockout, and
    /// the lockout hierarchy's authorization is empty on most Linux machines and on swtpm,
    /// so anyone with the machine could clear the lockout after each wrong PIN (a 4-digit
    /// PIN fell after 22 guesses in 2 s). `init --tpm` gives the lockout hierarchy a random
    /// authorization that vault keeps sealed under the PIN: clearing the lockout and
    /// changing its parameters are refused, and wrong PINs up to the limit leave the TPM
    /// locked out despite a try to clear it after each one.
    @Test func theLockoutCannotBeClearedBetweenGuesses() throws {
        let tpm = try SoftwareTPM()
        try tpm.setLockout(maxTries: 3, interval: 60)
        #expect(try !tpm.lockoutAuthorizationIsSet())
        let (alice, pin) = try Self.user("alice", on: tpm)
        let created = try alice.vault.run(["init", "--label", "alice", "--tpm", "--pin-file", pin])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stderr.contains("nobody can reset the PIN's guess limit"), "\(created.stderr)")
        #expect(try tpm.lockoutAuthorizationIsSet())
        #expect(try tpm.attempt("tpm2_dictionarylockout", ["--clear-lockout"]).status != 0, "the lockout was cleared")
        let raised = try tpm.attempt("tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=1000", "--recovery-time=1"])
        #expect(raised.status != 0, "the guess limit was raised")

        let wrong = try alice.directory.write("wrong", Data("111111\n".utf8))
        let attempt = ["passphrase", "--pin-file", wrong, "--remove"]
        let said = ["wrong PIN (2 tries left before the TPM locks out)", "wrong PIN (1 try left before the TPM locks out)",
                    "wrong PIN; the TPM now refuses every PIN for up to 1 minute"]
        for words in said {
            let refused = try alice.fails(attempt)
            #expect(refused.contains("vault: error: " + words), "\(refused)")
            let cleared = try tpm.attempt("tpm2_dictionarylockout", ["--clear-lockout"])
            #expect(cleared.status != 0, "the lockout was cleared after '\(words)'")
        }
        let locked = try alice.fails("passphrase", "--pin-file", pin, "--remove")
        #expect(locked.contains("vault: error: the TPM is locked out after too many wrong PINs"), "\(locked)")
    }

    /// A lockout hierarchy that has an authorization already (the machine's owner set one,
    /// or another program did) is left as it was, by `init --tpm` and by `passphrase
    /// --no-tpm`: its owner still clears the lockout with it, and the keystore keeps no
    /// authorization of its own.
    @Test func anOwnersLockoutAuthorizationIsLeftAsItWas() throws {
        let tpm = try SoftwareTPM()
        try tpm.changeLockoutAuthorization(to: "owners-secret")
        let (alice, pin) = try Self.user("alice", on: tpm)
        let created = try alice.vault.run(["init", "--label", "alice", "--tpm", "--pin-file", pin])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stderr.contains("the TPM's lockout hierarchy has an authorization already (its owner's, or another program's): vault leaves it as it is"),
                "\(created.stderr)")
        #expect(created.stderr.split(separator: "\n").filter { $0.contains("lockout") }.count == 1, "\(created.stderr)")
        #expect(try tpm.lockoutAuthorizationIsSet())
        try tpm.clearLockout(auth: "owners-secret")
        let kept = try DatabaseQueue.beside(alice.vault.home + "/vault.sqlite").read { db in
            try Row.fetchOne(db, sql: "SELECT tpm_lockout FROM identity")?["tpm_lockout"] as Data?
        }
        #expect(kept == nil)

        let out = try alice.vault.run(["passphrase", "--pin-file", pin, "--no-tpm", "--remove"])
        #expect(out.status == 0, "\(out.stderr)")
        #expect(!out.stderr.contains("lockout"), "\(out.stderr)")
        try tpm.clearLockout(auth: "owners-secret")
    }

    /// `passphrase --no-tpm` gives the lockout hierarchy back: empty again, as before
    /// `passphrase --tpm`. Sealing again with a new PIN keeps vault's authorization, sealed
    /// under the new PIN, which then gives it back.
    @Test func keysOutOfTheTPMGiveTheLockoutBack() throws {
        let tpm = try SoftwareTPM()
        let (alice, pin) = try Self.user("alice", on: tpm)
        try alice.initialize("alice")
        let sealed = try alice.vault.run(["passphrase", "--tpm", "--new-pin-file", pin])
        #expect(sealed.status == 0, "\(sealed.stderr)")
        #expect(sealed.stderr.contains("nobody can reset the PIN's guess limit"), "\(sealed.stderr)")
        #expect(try tpm.lockoutAuthorizationIsSet())

        let newPIN = try alice.directory.write("new-pin", Data("pass-phrase-pin\n".utf8))
        let resealed = try alice.vault.run(["passphrase", "--pin-file", pin, "--tpm", "--new-pin-file", newPIN])
        #expect(resealed.status == 0, "\(resealed.stderr)")
        #expect(!resealed.stderr.contains("lockout"), "\(resealed.stderr)")
        #expect(try tpm.lockoutAuthorizationIsSet())

        let out = try alice.vault.run(["passphrase", "--pin-file", newPIN, "--no-tpm", "--remove"])
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stderr.contains("the TPM's lockout hierarchy has no authorization again"), "\(out.stderr)")
        #expect(try !tpm.lockoutAuthorizationIsSet())
        try tpm.clearLockout()
        #expect(try Self.protection(alice) == "none")
    }

    /// While the keystore keeps the TPM's lockout authorization, it is not lost by accident:
    /// `init --force` is refused (the authorization opens with the current PIN only), and
    /// `passphrase --no-tpm` is refused while the TPM refuses every lockout authorization
    /// after a thief tried a wrong one: the keys keep their protection, and vault its
    /// authorization, until it can be given back. Someone who changed the authorization with
    /// vault's (here, a test that unsealed it with the PIN) has it left as it is, with a
    /// warning.
    @Test func theKeptLockoutAuthorizationIsNeverLostByAccident() throws {
        let tpm = try SoftwareTPM()
        try tpm.setLockout(maxTries: 3, interval: 60)
        let (alice, pin) = try Self.user("alice", on: tpm)
        try alice.ok("init", "--label", "alice", "--tpm", "--pin-file", pin)
        let replaced = try alice.fails("init", "--label", "alice", "--tpm", "--pin-file", pin, "--force")
        #expect(replaced.contains("vault: error: the keystore holds the TPM's lockout authorization, sealed under the current identity's PIN"),
                "\(replaced)")
        #expect(replaced.contains("vault: hint: give the lockout back first with 'vault passphrase --no-tpm'"), "\(replaced)")

        #expect(try tpm.attempt("tpm2_dictionarylockout", ["--clear-lockout"]).status != 0)
        let refused = try alice.fails("passphrase", "--pin-file", pin, "--no-tpm", "--remove")
        #expect(refused.contains("vault: error: the TPM refuses its lockout authorization after a wrong one was tried, for up to 1 minute, "
            + "so vault cannot give the lockout hierarchy back yet"), "\(refused)")
        #expect(refused.contains("vault: hint: wait, then run the command again"), "\(refused)")
        #expect(try Self.protection(alice) == "tpm")
        #expect(try tpm.lockoutAuthorizationIsSet())

        // A TPM whose lockout authorization changed since (on a fresh one: the first is
        // locked for a minute): vault's is no longer its, and is forgotten with a warning.
        let other = try SoftwareTPM()
        let (bob, bobPIN) = try Self.user("bob", on: other)
        try bob.ok("init", "--label", "bob", "--tpm", "--pin-file", bobPIN)
        try other.changeLockoutAuthorization(to: "owners-secret", from: try Self.lockoutAuthorization(bob, pin: "482916", on: other))
        let out = try bob.vault.run(["passphrase", "--pin-file", bobPIN, "--no-tpm", "--remove"])
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stderr.contains("vault: warning: the TPM's lockout authorization is no longer the one vault set, so vault left it as it is"),
                "\(out.stderr)")
        #expect(try other.lockoutAuthorizationIsSet())
        #expect(try Self.protection(bob) == "none")
    }

    /// A new PIN has at least 6 characters: fewer is refused in words, with a hint, before
    /// anything is sealed or stored.
    @Test func aPINHasAtLeastSixCharacters() throws {
        let tpm = try SoftwareTPM()
        let (alice, pin) = try Self.user("alice", on: tpm)
        let short = try alice.directory.write("short", Data("12345\n".utf8))
        let refused = try alice.vault.run(["init", "--label", "alice", "--tpm", "--pin-file", short])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("vault: error: invalid PIN: a PIN has at least 6 characters"), "\(refused.stderr)")
        #expect(refused.stderr.contains("vault: hint: choose a longer PIN"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: alice.vault.home + "/vault.sqlite"))
        #expect(try !tpm.lockoutAuthorizationIsSet())
        try alice.initialize("alice")
        let again = try alice.fails("passphrase", "--tpm", "--new-pin-file", short)
        #expect(again.contains("vault: error: invalid PIN: a PIN has at least 6 characters"), "\(again)")
        try alice.ok("passphrase", "--tpm", "--new-pin-file", pin)
    }

    /// Keys bound to PCR 7 open while it holds its value, and not once something extends
    /// it: the error names the PCR that changed (not PCR 0, which did not).
    @Test func aPCRChangeLocksTheKeys() throws {
        let tpm = try SoftwareTPM()
        let (alice, pin) = try Self.user("alice", on: tpm)
        try alice.ok("init", "--label", "alice", "--tpm", "--pin-file", pin, "--tpm-pcrs", "0,7")
        #expect(try alice.ok("id").contains("keys         sealed by this machine's TPM, with a PIN, bound to PCR 0 and 7\n"))
        let open = ["passphrase", "--pin-file", pin, "--remove"]
        try alice.ok(open)
        try tpm.extendPCR(7)
        let refused = try alice.fails(open)
        #expect(refused.contains("vault: error: the boot state changed since the keys were sealed (PCR 7 differs): the TPM will not unseal them"),
                "\(refused)")
        #expect(refused.contains("vault: hint: after an expected update"), "\(refused)")
        // A wrong PIN is not what is refused: the policy is checked first, and no try is spent.
        let wrong = try alice.directory.write("wrong", Data("111111\n".utf8))
        #expect(try alice.fails("passphrase", "--pin-file", wrong, "--remove").contains("PCR 7 differs"))
    }

    /// Plain → TPM with a PIN → TPM and the passphrase → passphrase → plain: the same keys
    /// throughout, each step opening with exactly its own factors, and a secret dealt
    /// before recovered after each one.
    @Test func conversionBothWaysLosesNothing() throws {
        let tpm = try SoftwareTPM()
        let circle = try Circle(["alice", "bob"])
        let alice = circle["alice"]
        alice.vault.environment.merge(tpm.environment) { $1 }
        let pin = try alice.directory.write("pin", Data("482916\n".utf8))
        let passphrase = try alice.directory.write("passphrase", Data("correct horse battery\n".utf8))
        let wrong = try alice.directory.write("wrong", Data("not the passphrase\n".utf8))
        let card = try alice.card()
        let content = try circle.files.write("note.txt", Data("the deeds are in the attic\n".utf8))
        let id = try circle.share(from: "alice", [content, "--to", "bob", "-k", "2"])
        let piece = try circle.release(id, from: "bob", to: "alice")
        func recovers(_ factors: [String]) throws {
            #expect(try alice.ok(["recover", id, "--piece", piece] + factors) == "the deeds are in the attic\n")
            #expect(try alice.card() == card)
        }

        try alice.ok("passphrase", "--tpm", "--new-pin-file", pin)
        #expect(try Self.protection(alice) == "tpm")
        try recovers(["--pin-file", pin])

        // Sealed again with the passphrase as well: both are needed, the PIN first.
        try alice.ok("passphrase", "--pin-file", pin, "--tpm", "--new-pin-file", pin, "--new-passphrase-file", passphrase)
        #expect(try Self.protection(alice) == "tpm+passphrase")
        #expect(try alice.fails(["recover", id, "--piece", piece, "--pin-file", pin]).contains("protected by a passphrase and none was given"))
        #expect(try alice.fails(["recover", id, "--piece", piece, "--pin-file", pin, "--passphrase-file", wrong])
            .contains("vault: error: wrong passphrase"))
        try recovers(["--pin-file", pin, "--passphrase-file", passphrase])

        // Out of the TPM: the passphrase stays, alone.
        try alice.ok("passphrase", "--pin-file", pin, "--passphrase-file", passphrase, "--no-tpm")
        #expect(try Self.protection(alice) == "passphrase")
        try recovers(["--passphrase-file", passphrase])

        // --no-tpm on keys the TPM does not seal changes nothing.
        #expect(try alice.fails("passphrase", "--passphrase-file", passphrase, "--no-tpm").contains("not sealed by the TPM"))
        try alice.ok("passphrase", "--passphrase-file", passphrase, "--remove")
        #expect(try Self.protection(alice) == "none")
        try recovers([])
    }

    /// A running serve keeps no copy of what the TPM unsealed, nor of the PIN or its
    /// authorization value, outside its locked memory: tpm2-tss's response buffer and its
    /// records of the object's and the session's authorization are wiped after the unseal.
    /// Whoever read them later (from swap) would hold the keys without the TPM, or the PIN
    /// without its lockout (the salt is in the keystore). With a PIN in an HMAC session, in
    /// a policy session (PCRs), and without a PIN.
    @Test(arguments: ["a PIN", "a PIN and PCR 7", "no PIN"])
    func serveKeepsNoCopyOfWhatTheTPMUnsealed(_ sealing: String) throws {
        guard getuid() == 0 else { return }  // reading another process's memory needs root, as CI has
        let tpm = try SoftwareTPM()
        let (alice, pin) = try Self.user("alice", on: tpm)
        let factors = sealing == "no PIN" ? ["--no-pin"] : ["--pin-file", pin]
        try alice.ok(["init", "--label", "alice", "--tpm"] + factors + (sealing.hasSuffix("PCR 7") ? ["--tpm-pcrs", "7"] : []))
        let stored = try DatabaseQueue.beside(alice.vault.home + "/vault.sqlite").read { db in
            [UInt8](try Data.fetchOne(db, sql: "SELECT secret FROM identity")!)
        }
        // What vault's unseal gets, found by this test on its own connection to the TPM.
        let object = try #require(try IdentitySeal(stored).tpm)
        let auth = object.authValue(pin: SecureBytes(copying: Array("482916".utf8)))
        #expect((auth == nil) == (sealing == "no PIN"))
        let key = try TPMConnection(TPMSelection(tpm.tcti)).unseal(object, auth: auth)
        let serve = try alice.vault.background(["serve", "--listen", "127.0.0.1", "--port", "0", "--no-mdns"] + factors.filter { $0 != "--no-pin" },
                                               log: alice.directory.file("serve.log"))
        defer { serve.stop() }
        try serve.waitFor("listening on")
        let typed = sealing == "no PIN" ? nil : SecureBytes(copying: Array("482916".utf8))
        for (name, secret) in [("the unsealed key", key), ("the PIN's authorization value", auth), ("the PIN", typed)] {
            guard let secret else { continue }
            let found = try ProcessMemory.occurrences(of: secret.withUnsafeBytes { Array($0) }, in: serve.pid)
            #expect(found.isEmpty, "\(name) lies in serve's memory at \(found.map { String($0, radix: 16) })")
        }
    }

    /// Sealing leaves no unsealed secret anywhere in the home: not the 64 secret bytes the
    /// keystore held before (in the database, its WAL or free pages), not either key alone,
    /// not the PIN, not the TPM's lockout authorization vault keeps sealed.
    @Test func theKeystoreHoldsNoUnsealedSecret() throws {
        let tpm = try SoftwareTPM()
        let alice = User("alice")
        alice.vault.environment.merge(tpm.environment) { $1 }
        try alice.initialize("alice")
        let secret = try DatabaseQueue.beside(alice.vault.home + "/vault.sqlite").read { db in
            try Data.fetchOne(db, sql: "SELECT secret FROM identity")!
        }
        #expect(secret.count == 64)
        let marker = HygieneTests.marker("pin")
        let pin = try alice.directory.write("pin", Data((marker + "\n").utf8))
        try alice.ok("passphrase", "--tpm", "--new-pin-file", pin)
        try alice.ok("passphrase", "--pin-file", pin, "--tpm", "--tpm-pcrs", "7", "--new-pin-file", pin)
        let lockout = Data(try Self.lockoutValue(alice, pin: marker, on: tpm))
        #expect(lockout.count >= 30)
        let needles = [secret, secret.prefix(32), secret.suffix(32), Data(marker.utf8), lockout]
        let enumerator = FileManager.default.enumerator(atPath: alice.vault.home)
        var scanned = 0
        while let relative = enumerator?.nextObject() as? String {
            guard let data = FileManager.default.contents(atPath: alice.vault.home + "/" + relative) else { continue }
            scanned += 1
            for needle in needles { #expect(data.range(of: needle) == nil, "an unsealed secret in \(relative)") }
        }
        #expect(scanned > 0)
        #expect(try Self.protection(alice) == "tpm")
    }

    /// kill -9 at any moment of a conversion, either way, leaves the keys openable with the
    /// old protection or the new one: never neither, never a keystore SQLite finds damaged.
    @Test func killedConversionsLeaveOldOrNew() throws {
        let tpm = try SoftwareTPM()
        let circle = try Circle(["alice", "bob"])
        let alice = circle["alice"]
        alice.vault.environment.merge(tpm.environment) { $1 }
        let pin = try alice.directory.write("pin", Data("482916\n".utf8))
        let passphrase = try alice.directory.write("passphrase", Data("correct horse battery\n".utf8))
        try alice.ok("passphrase", "--new-passphrase-file", passphrase)
        let content = try circle.files.write("note.txt", Data("kept\n".utf8))
        let id = try circle.share(from: "alice", [content, "--to", "bob", "-k", "2", "--passphrase-file", passphrase])
        let piece = try circle.release(id, from: "bob", to: "alice")
        let factors = ["passphrase": ["--passphrase-file", passphrase], "tpm": ["--pin-file", pin]]
        func conversion(from kind: String) -> [String] {
            ["passphrase"] + factors[kind]! + (kind == "tpm" ? ["--no-tpm", "--new-passphrase-file", passphrase] : ["--tpm", "--new-pin-file", pin])
        }
        // How long a whole conversion takes here, there and back: the kills are spread over it.
        let start = Date()
        try alice.ok(conversion(from: "passphrase"))
        try alice.ok(conversion(from: "tpm"))
        let span = Date().timeIntervalSince(start) / 2
        var completed: Set<String> = [], killed = 0
        for round in 0..<16 {
            let kind = try Self.protection(alice)
            let process = try alice.vault.background(conversion(from: kind), log: circle.files.file("convert-\(round).log"))
            // Stratified, not uniform: round r kills in the r-th sixteenth of 1.5 spans, so
            // the early rounds cut conversions short and the last third let them finish.
            // Uniform over 1.2 spans left no round finished one time in twenty (CI).
            usleep(UInt32(span * 1.5 * (Double(round) + Double.random(in: 0..<1)) / 16 * 1_000_000))
            let status = process.stop(SIGKILL)
            if status & 0x7F == SIGKILL { killed += 1 }
            // swtpm has no resource manager: what a killed process loaded stays loaded (the
            // kernel's /dev/tpmrm0 flushes it), and three objects fill it.
            try tpm.tool("tpm2_flushcontext", ["--transient-object"])
            try tpm.tool("tpm2_flushcontext", ["--loaded-session"])
            let after = try Self.protection(alice)
            #expect(after == kind || after == (kind == "tpm" ? "passphrase" : "tpm"), "round \(round): \(after)")
            if after != kind { completed.insert(kind + " to " + after) }
            #expect(try alice.ok(["recover", id, "--piece", piece] + factors[after]!) == "kept\n", "round \(round) (\(after))")
            let (check, kept) = try DatabaseQueue.beside(alice.vault.home + "/vault.sqlite").read { db in
                (try String.fetchOne(db, sql: "PRAGMA integrity_check"), try Data.fetchOne(db, sql: "SELECT tpm_lockout FROM identity"))
            }
            #expect(check == "ok")
            // The TPM never has a lockout authorization of vault's that the keystore does not hold.
            let taken = try tpm.lockoutAuthorizationIsSet()
            #expect(kept != nil || !taken, "round \(round): the lockout authorization is lost")
        }
        // Some conversions were cut short, and some went through: else the rounds proved little.
        #expect(killed > 0 && !completed.isEmpty, "killed \(killed), completed \(completed)")
    }

    /// No TPM where VAULT_TPM points, and a TPM name vault does not take: said plainly.
    @Test func noTPMIsSaidPlainly() throws {
        let alice = User("alice")
        alice.vault.environment["VAULT_TPM"] = "device:/dev/no-such-tpm"
        let pin = try alice.directory.write("pin", Data("482916\n".utf8))
        let missing = try alice.vault.run(["init", "--label", "alice", "--tpm", "--pin-file", pin])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("vault: error: no TPM: /dev/no-such-tpm does not exist"), "\(missing.stderr)")
        #expect(missing.stderr.contains("vault: hint: this machine has no TPM 2.0"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: alice.vault.home + "/vault.sqlite"))
        alice.vault.environment["VAULT_TPM"] = "swtpm:host=127.0.0.1,port=1"
        let closed = try alice.vault.run(["init", "--label", "alice", "--tpm", "--pin-file", pin])
        #expect(closed.stderr.contains("vault: error: no TPM: nothing answers at swtpm:host=127.0.0.1,port=1"), "\(closed.stderr)")
        alice.vault.environment["VAULT_TPM"] = "cmd:tpm2_send"
        let other = try alice.vault.run(["init", "--label", "alice", "--tpm", "--pin-file", pin])
        #expect(other.stderr.contains("is not a TPM this vault can use"), "\(other.stderr)")
        let short = try alice.directory.write("short", Data("123\n".utf8))
        alice.vault.environment["VAULT_TPM"] = nil
        let refused = try alice.vault.run(["init", "--label", "alice", "--tpm", "--pin-file", short])
        #expect(refused.stderr.contains("vault: error: invalid PIN: a PIN has at least 6 characters"), "\(refused.stderr)")
    }

    /// The binary does not link tpm2-tss: without it, vault runs, and only --tpm says the
    /// library is missing (tpm2-tss hidden from a process by a mount namespace).
    @Test func vaultRunsWithoutTPM2TSS() throws {
        let readelf = try ProcessRunner.run("/usr/bin/readelf", ["-d", VaultBinary.path])
        #expect(readelf.status == 0 && readelf.stdout.contains("NEEDED") && !readelf.stdout.contains("libtss2"), "\(readelf.stdout)")
        guard getuid() == 0 else { return }  // a mount namespace needs root, as CI has
        let library = try ProcessRunner.run("/bin/sh", ["-c", "ls /usr/lib/*/libtss2-esys.so.0"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let alice = User("alice")
        let pin = try alice.directory.write("pin", Data("482916\n".utf8))
        func hidden(_ arguments: [String]) throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c",
                                                       "mount --bind /dev/null \"$0\" && exec \"$@\"", library, VaultBinary.path] + arguments,
                                  environment: alice.vault.childEnvironment)
        }
        let plain = try hidden(["init", "--label", "alice", "--no-passphrase"])
        #expect(plain.status == 0, "\(plain.stderr)")
        let sealed = try hidden(["passphrase", "--tpm", "--new-pin-file", pin])
        #expect(sealed.status == 1)
        #expect(sealed.stderr.contains("vault: error: the TPM library tpm2-tss is not installed ("), "\(sealed.stderr)")
        #expect(sealed.stderr.contains("vault: hint: install tpm2-tss: apt install libtss2-esys-3.0.2-0"), "\(sealed.stderr)")
    }
}
