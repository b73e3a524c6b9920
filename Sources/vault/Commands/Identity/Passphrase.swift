import ArgumentParser
import VaultCore

struct Passphrase: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set, change or remove the passphrase that protects the private keys, or seal them by the TPM.",
        discussion: """
            Without --tpm or --no-tpm, the passphrase changes and the TPM's seal (if any) stays, \
            with its PIN. --tpm seals the keys by this machine's TPM, with a new PIN (asked \
            twice; --new-pin-file, --no-pin) and the PCRs of --tpm-pcrs; the passphrase is then \
            no longer needed, unless --keep-passphrase or --new-passphrase-file gives one to need \
            as well. On keys sealed already, --tpm seals them again: a new PIN, other PCRs. \
            --no-tpm takes the keys out of the TPM: they keep their passphrase, or get a new one \
            (asked twice, or --new-passphrase-file), or none with --remove; the TPM's lockout \
            hierarchy gets back the empty authorization vault found. Each change is one \
            step: interrupted, the keys keep the old protection or have the new one.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var current: PassphraseOption

    @Option(help: ArgumentHelp("Read the new passphrase from the first line of this file.", valueName: "file"))
    var newPassphraseFile: String?

    @Flag(help: "Store the private keys without a passphrase (protected by the file's 0600 mode only, or by the TPM).")
    var remove = false

    @OptionGroup var scrypt: ScryptOption

    @Flag(help: "Seal the private keys by this machine's TPM 2.0 (again, when they are: a new PIN or other PCRs).")
    var tpm = false

    @Flag(help: "Take the private keys out of the TPM: a passphrase protects them again (or nothing, with --remove).")
    var noTpm = false

    @Option(help: ArgumentHelp("With --tpm: read the new PIN from the first line of this file.", valueName: "file"))
    var newPinFile: String?

    @Flag(help: "With --tpm: seal without a PIN (whoever runs programs as you on this machine can then use the keys).")
    var noPin = false

    @Option(name: .customLong("tpm-pcrs"), help: ArgumentHelp(
        "With --tpm: unseal only while these SHA-256 PCRs keep their values (e.g. 7, or 0,2,7).", valueName: "list"))
    var tpmPCRs: String?

    @Flag(help: "With --tpm: keep needing the current passphrase as well as the TPM.")
    var keepPassphrase = false

    func validate() throws {
        if remove && (newPassphraseFile != nil || scrypt.n != nil) {
            throw ValidationError("--remove excludes --new-passphrase-file and --scrypt-n")
        }
        if tpm && noTpm { throw ValidationError("--tpm and --no-tpm exclude each other") }
        if !tpm && (newPinFile != nil || noPin || tpmPCRs != nil || keepPassphrase) {
            throw ValidationError("--new-pin-file, --no-pin, --tpm-pcrs and --keep-passphrase go with --tpm")
        }
        if noPin && newPinFile != nil { throw ValidationError("--no-pin excludes --new-pin-file") }
        _ = try NewPIN.validated(tpmPCRs)
        if keepPassphrase && (remove || newPassphraseFile != nil || scrypt.n != nil) {
            throw ValidationError("--keep-passphrase excludes --remove, --new-passphrase-file and --scrypt-n")
        }
    }

    func run() throws {
        let keystore = try home.openKeystore()
        let before = try keystore.identityInfo().protection
        if noTpm && before.tpm == nil {
            throw CLIError.unavailable("the private keys are not sealed by the TPM", hint: "'vault id' shows how they are protected")
        }
        if keepPassphrase && before.passphrase == nil {
            throw CLIError.unavailable("the private keys have no passphrase to keep", hint: "give one with --new-passphrase-file FILE")
        }
        // New secrets' files are read before the current ones are asked for.
        let fromFile = try newPassphraseFile.map { try PassphraseFile.read($0) }
        let pinFromFile = try newPinFile.map { try PassphraseFile.read($0, what: "PIN") }
        if let pinFromFile { try PINRules.check(pinFromFile) }
        // Check the current passphrase and PIN before asking for new ones.
        let opened = try current.open(keystore)
        let sealing: TPMSealing?
        let new: SecureBytes?
        if tpm {
            let selection = try TPMSelection.fromEnvironment()
            let pcrs = try NewPIN.pcrs(tpmPCRs)
            sealing = TPMSealing(selection: selection, pin: noPin ? nil : try pinFromFile ?? NewPIN.read(file: nil), pcrs: pcrs)
            new = keepPassphrase ? opened.passphrase : fromFile
        } else {
            // The TPM's seal stays as it is (its PIN and PCRs), unless --no-tpm takes it away.
            if !noTpm, let kept = before.tpm {
                sealing = TPMSealing(selection: try TPMSelection.fromEnvironment(), pin: opened.pin, pcrs: kept.pcrs)
            } else {
                sealing = nil
            }
            if remove {
                new = nil
            } else if let fromFile {
                new = fromFile
            } else if noTpm, let kept = opened.passphrase {
                new = kept
            } else {
                new = try Terminal.passphrase(prompt: "New passphrase: ", confirm: true, guarding: PassphraseRules.keystore)
            }
        }
        if let newPassphraseFile, let new { PassphraseRules.warnIfShort(new, from: newPassphraseFile, guarding: PassphraseRules.keystore) }
        let lockout = try keystore.protect(opened.identity, openedWith: UnlockFactors(passphrase: opened.passphrase, pin: opened.pin),
                                           as: NewKeyProtection(passphrase: new, scrypt: scrypt.parameters(), tpm: sealing))
        // Said of keys sealed, so only once they are (no TPM: nothing was sealed).
        if let sealing, sealing.pin == nil, new == nil { NewPIN.warnWithoutPIN() }
        let after = try keystore.identityInfo().protection
        if tpm || noTpm || after.tpm != nil {
            Terminal.standardError("private keys \(after)")
        } else {
            Terminal.standardError(new == nil ? "the private keys are no longer passphrase-protected" : "passphrase set")
        }
        LockoutWords.tell(lockout)
    }
}
