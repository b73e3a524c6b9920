import Foundation
import GRDB
import Testing
@testable import VaultCore
import VaultTestSupport

/// The identity sealed by the TPM (Docs/FORMAT.md, "Sealed by the TPM"), in process against
/// a software TPM: round trips with each set of factors, strict parsing, and a header bound
/// to the key.
@Suite struct IdentitySealTests {
    let directory = TemporaryDirectory()
    var home: VaultHome { VaultHome(directory: directory.file("home")) }
    static var pin: SecureBytes { SecureBytes(copying: Array("482916".utf8)) }
    static var passphrase: SecureBytes { SecureBytes(copying: Array("correct horse battery".utf8)) }

    func sealed(_ tpm: SoftwareTPM, pin: SecureBytes?, passphrase: SecureBytes? = nil, pcrs: PCRSelection = .none) throws -> Keystore {
        try Keystore.create(home: home, label: Label("alice"), protection: NewKeyProtection(
            passphrase: passphrase, tpm: TPMSealing(selection: try TPMSelection(tpm.tcti), pin: pin, pcrs: pcrs)))
    }

    func storedSeal(_ keystore: Keystore) throws -> [UInt8] {
        try keystore.read { db in [UInt8](try Data.fetchOne(db, sql: "SELECT secret FROM identity")!) }
    }

    @Test func opensWithExactlyItsFactors() throws {
        let tpm = try SoftwareTPM()
        let selection = try TPMSelection(tpm.tcti)
        let keystore = try sealed(tpm, pin: Self.pin, passphrase: Self.passphrase)
        let card = try keystore.identityInfo().card
        #expect(try keystore.identityInfo().protection == KeyProtection(
            passphrase: .default, tpm: KeyProtection.TPMProtection(pin: true, pcrs: .none)))
        #expect(try keystore.unlock(UnlockFactors(passphrase: Self.passphrase, pin: Self.pin, tpm: selection)).card == card)
        #expect(throws: VaultError.pinRequired) { try keystore.unlock(UnlockFactors(passphrase: Self.passphrase, tpm: selection)) }
        #expect(throws: VaultError.passphraseRequired) { try keystore.unlock(UnlockFactors(pin: Self.pin, tpm: selection)) }
        #expect(throws: VaultError.wrongPassphrase) {
            try keystore.unlock(UnlockFactors(passphrase: SecureBytes(copying: Array("wrong".utf8)), pin: Self.pin, tpm: selection))
        }
        #expect(throws: VaultError.wrongPIN(triesLeft: 2, lockoutSeconds: 1000)) {
            try keystore.unlock(UnlockFactors(passphrase: Self.passphrase, pin: SecureBytes(copying: Array("111111".utf8)), tpm: selection))
        }
        // The same keys, protected anew without a PIN or passphrase: still only this TPM's.
        let identity = try keystore.unlock(UnlockFactors(passphrase: Self.passphrase, pin: Self.pin, tpm: selection))
        // Without a PIN there is nothing for the lockout to guard: its authorization goes back.
        #expect(try keystore.protect(identity, openedWith: UnlockFactors(passphrase: Self.passphrase, pin: Self.pin, tpm: selection),
                                     as: NewKeyProtection(passphrase: nil, tpm: TPMSealing(selection: selection, pin: nil))) == .givenBack)
        #expect(try keystore.unlock(UnlockFactors(tpm: selection)).card == card)
        let other = try SoftwareTPM()
        #expect(throws: VaultError.tpmOtherMachine) { try keystore.unlock(UnlockFactors(tpm: try TPMSelection(other.tcti))) }
    }

    /// Every byte before the nonce keys the box: a PCR value recorded for the messages, which
    /// the TPM never checks, still cannot be altered unnoticed.
    @Test func theHeaderIsBoundToTheKey() throws {
        let tpm = try SoftwareTPM()
        let keystore = try sealed(tpm, pin: nil, pcrs: PCRSelection(mask: 1 << 7))
        var bytes = try storedSeal(keystore)
        let seal = try IdentitySeal(bytes)
        #expect(seal.tpm?.pcrValues.count == 1)
        // version, factors, flags, mask (4), salt (16), name (34): the PCR value follows.
        bytes[2 + 1 + 4 + 16 + 34] ^= 1
        let altered = bytes
        try keystore.write { db in try db.execute(sql: "UPDATE identity SET secret = ?", arguments: [Data(altered)]) }
        #expect(throws: VaultError.keystoreCorrupt("the sealed keys do not open with what the TPM unsealed")) {
            try keystore.unlock(UnlockFactors(tpm: try TPMSelection(tpm.tcti)))
        }
    }

    @Test func parsingIsStrict() throws {
        let tpm = try SoftwareTPM()
        let bytes = try storedSeal(try sealed(tpm, pin: Self.pin))
        _ = try IdentitySeal(bytes)
        func refused(_ altered: [UInt8], _ words: String) {
            do {
                _ = try IdentitySeal(altered)
                Issue.record("accepted: \(words)")
            } catch {
                #expect("\(error)".contains(words), "\(error)")
            }
        }
        refused(bytes + [0], "bytes follow its end")
        refused(Array(bytes.dropLast()), "truncated")
        refused([2] + bytes.dropFirst(), "unknown identity seal version 2")
        // A FIDO2 key would be factor 4: not known yet, so refused rather than ignored.
        refused([1, bytes[1] | 4] + bytes.dropFirst(2), "factors 5")
        refused([1, 2] + bytes.dropFirst(2), "factors 2")
        refused([1, 1, 2] + bytes.dropFirst(3), "unknown flags 2")
        refused([1, 1, 1, 1] + bytes.dropFirst(4), "PCRs past 23")
    }
}
