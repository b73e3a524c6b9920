import ArgumentParser
import Foundation
import VaultCore
import VaultNet
import VaultSync

/// Exit codes, documented in Docs/CLI.md.
enum ExitStatus {
    static let failure: Int32 = 1
    static let cancelled: Int32 = 2
    /// EX_TEMPFAIL: the request went out, the answers are not in yet (`vault recover` through relays).
    static let pending: Int32 = 75
    // 64 (EX_USAGE) for command-line mistakes comes from ArgumentParser.
}

/// Failures that belong to the command line rather than to VaultCore.
enum CLIError: Error {
    case confirmationRequired(what: String)
    case cancelled
    case missingLabel
    case noTerminal(purpose: String, alternative: String)
    case passphrasesDiffer
    case cardSource(String)
    case invalidInput(String)
    case unavailable(String, hint: String)
    case undelivered(secret: String, labels: [String])
    case noAgent
    /// Asked, and the answers are not all in yet: come back later.
    case pending(String, hint: String)
}

extension CLIError: UserFacingError {
    var description: String { Report.describe(self).0 }
}

/// Turns an error into the one `vault: error:` line, an optional `vault: hint:` line and an
/// exit code. Every error a command throws is told in words, whatever its type; only
/// ArgumentParser's own (help, usage) are left to it: for those this returns nil.
enum Report {
    static func handle(_ error: Error) -> Int32? {
        guard let (message, hint, status) = parts(of: error) else { return nil }
        print(message, hint: hint)
        return status
    }

    /// The error line, hint and exit status `handle` prints and returns, printing nothing:
    /// what a serve sends back to the `vault unlock` it recovered a key for.
    static func parts(of error: Error) -> (String, String?, Int32)? {
        // ArgumentParser's own errors (usage, help, version, its internal CommandError that
        // `vault help COMMAND` and `--help` throw from run) are for it to print.
        if String(reflecting: type(of: error)).hasPrefix("ArgumentParser.") { return nil }
        switch error {
        case let error as VaultError:
            return (error.description, hint(for: error), ExitStatus.failure)
        case let error as CLIError:
            let (message, hint) = describe(error)
            if case .cancelled = error { return (message, hint, ExitStatus.cancelled) }
            if case .pending = error { return (message, hint, ExitStatus.pending) }
            return (message, hint, ExitStatus.failure)
        case let error as NetError:
            return (error.description, hint(for: error), ExitStatus.failure)
        case let error as AppError:
            return (error.description, error.hint, ExitStatus.failure)
        case let error as AgentRecoveryFailure:
            // Said by the serve that ran the recovery, as this command would have.
            return (error.error, error.hint, error.status)
        case is CancellationError:
            return ("interrupted", nil, ExitStatus.failure)
        default:
            // Foundation's file errors and the network stack's, in words; never a Swift name.
            return (words(for: error), nil, ExitStatus.failure)
        }
    }

    /// Any error in words, for a line of its own or after a peer's label.
    static func words(for error: Error) -> String {
        if let error = error as? CLIError { return describe(error).0 }
        return NetError.words(for: error)
    }

    /// A command-line mistake, as ArgumentParser describes it, unless the line has a command
    /// or option that does not exist: that is named first, with the nearest that do. The
    /// hint names the command the user ran.
    static func usage(_ message: String, arguments: [String]) {
        var line = message.split(separator: "\n").first.map(String.init) ?? "invalid command line"
        if line.hasPrefix("Error: ") { line.removeFirst(7) }
        if let first = line.first { line = first.lowercased() + line.dropFirst() }
        if line.hasSuffix(".") { line.removeLast() }
        let (refusal, hint) = UsageAdvice(arguments: arguments).report(line)
        print(refusal, hint: hint)
    }

    private static func print(_ message: String, hint: String?) {
        Terminal.standardError("vault: error: \(message)")
        if let hint { Terminal.standardError("vault: hint: \(hint)") }
    }

    static func describe(_ error: CLIError) -> (String, String?) {
        switch error {
        case .confirmationRequired(let what) where what == "pairing":
            ("pairing needs confirmation and there is no terminal to ask on", "pair from a terminal: both people must compare the code")
        case .confirmationRequired(let what):
            ("\(what) needs confirmation and there is no terminal to ask on", "pass --yes to confirm in advance")
        case .cancelled:
            ("cancelled; nothing was changed", nil)
        case .missingLabel:
            ("the card carries no label", "name the peer with --label NAME")
        case .noTerminal(let purpose, let alternative):
            ("no terminal to ask for \(purpose)", alternative)
        case .passphrasesDiffer:
            ("the passphrases do not match", nil)
        case .cardSource(let message):
            (message, "give the card as an argument, '-' to read it from standard input, or --image FILE")
        case .invalidInput(let message):
            (message, nil)
        case .unavailable(let message, let hint), .pending(let message, let hint):
            (message, hint)
        case .noAgent:
            ("no 'vault serve' runs for this keystore, so there is no agent to hold keys",
             "start 'vault serve' (it runs the agent); without it, item commands recover the key for each command")
        case .undelivered(let secret, let labels):
            ("\(labels.count) holder\(labels.count == 1 ? "" : "s") did not receive a share: \(labels.joined(separator: ", "))",
             "their bundles wait in the outbox; once they run 'vault serve', send them with 'vault secrets push \(secret) --to \(labels.joined(separator: ","))'")
        }
    }

    /// What the user can do about a file the system refused, by the system's reason.
    private static func fileSystemHint(_ reason: String) -> String? {
        func says(_ code: Int32) -> Bool { reason == String(cString: strerror(code)) }
        if says(ENOSPC) || says(EDQUOT) { return "free some space on that disk, or write to another one; nothing was kept" }
        if says(EROFS) { return "that file system is read-only: write somewhere else" }
        if says(ENOENT) { return "check the path: the file, or a directory on the way to it, does not exist" }
        if says(EACCES) || says(EPERM) { return "check the permissions of the file and its directory" }
        if says(EISDIR) { return "give the path of a file, not of a directory" }
        return nil
    }

    static func hint(for error: VaultError) -> String? {
        switch error {
        case .inFile(_, let error):
            hint(for: error)
        case .unsupportedVersion(_, let version, let supported) where version < supported:
            "it was made by an earlier vault: ask whoever made it to make it again with this one"
        case .unsupportedVersion:
            "it was made by a newer vault: update this one"
        case .noKeystore:
            "run 'vault init' to create an identity, or point --home or VAULT_HOME at an existing keystore"
        case .emptyKeystore(let path):
            "put back \(path) from a backup of its directory; 'vault init' would make a new identity, "
                + "which cannot open the shares held in pieces/"
        case .identityExists:
            "pass --force to replace it; your peers will then have to import your new key card"
        case .identityHoldsShares:
            "keep this identity, or remove the shares first with 'vault secrets rm' (recovery will then need other holders)"
        case .identityHoldsTPMLockout:
            "give the lockout back first with 'vault passphrase --no-tpm' (it asks for the PIN), then run 'vault init --force' again"
        case .keystoreTooNew:
            "upgrade vault to open this keystore"
        case .alreadyServing:
            "one serve answers for a keystore: stop that one first, or use it ('vault requests', 'vault unlock')"
        case .passphraseRequired:
            "enter it on a terminal, or pass --passphrase-file FILE"
        case .wrongPassphrase:
            "it is the passphrase of this keystore's identity (set by 'vault init' or 'vault passphrase'); a --passphrase-file gives it on its first line"
        case .pinRequired:
            "enter it on a terminal, or pass --pin-file FILE"
        case .tpmLibraryMissing:
            "install tpm2-tss: apt install libtss2-esys-3.0.2-0 libtss2-tctildr0 (Debian 12)"
        case .noTPM:
            "this machine has no TPM 2.0, or it is turned off in the firmware settings; \(TPMSelection.environmentVariable) names another (Docs/CLI.md, 'Keys bound to this machine')"
        case .tpmAccessDenied:
            "the TPM belongs to the group tss: 'sudo usermod -aG tss $USER', then log in again"
        case .tpmOtherMachine:
            "keys sealed by a TPM open only on the machine that sealed them: on this one, run 'vault init' in a new home and recover your secrets through their holders"
        case .wrongPIN(let left, _) where left == 0:
            "wait, then try again; every wrong PIN counts, and the TPM forgets them one at a time"
        case .tpmLockedOut:
            "wait, then try again; a lockout authorization the machine's owner set (not one vault keeps) resets it ('tpm2_dictionarylockout --clear-lockout --auth=…')"
        case .tpmLockoutAuthorizationRefused:
            "wait, then run the command again: the keys keep their protection, and the TPM's lockout hierarchy vault's authorization, until it can be given back"
        case .invalidPIN(let detail) where detail.hasPrefix("a PIN has at least"):
            "choose a longer PIN: a thief gets only the TPM's few tries, and each character more makes them worth less (letters may be used as well as digits)"
        case .invalidPIN:
            "choose a shorter PIN: it is typed, and 6 to 20 characters are plenty against the TPM's few tries"
        case .tpmPCRsChanged:
            "after an expected update (firmware, Secure Boot, boot loader), these keys are lost: make a new identity and recover your secrets through their holders (Docs/SECURITY.md, 'Keys bound to this machine'); otherwise find out who changed how this machine boots"
        case .tpmOwnerPassword:
            "clear the owner hierarchy's password, or use a TPM without one"
        case .invalidCard(let defect), .notAKeyCard(_, let defect):
            switch defect {
            case .unknownVersion: "this card comes from a newer vault; upgrade vault to import it"
            case .wrongPrefix: "a key card starts with 'vault1'; ask for the output of 'vault id'"
            default: "check the card for typing errors, or import it from its QR code with --image FILE"
            }
        case .invalidLabel:
            "labels use letters, digits, spaces and . _ - @ + ' (at most 64 characters and 255 bytes)"
        case .ownCard:
            "import the other person's key card; 'vault id' shows yours"
        case .duplicatePeerKey(let label):
            "'vault peer show \(ShellWord.quoted(label))' shows it"
        case .duplicatePeerLabel:
            "choose another name ('vault peer add' takes one with --label NAME); 'vault peer list' shows the names taken"
        case .unknownPeer:
            "'vault peer list' shows the trusted peers"
        case .unknownRelay:
            "'vault relay list' shows the pinned relays; 'vault relay add NAME URL' pins one"
        case .duplicateRelay(let name):
            "choose another name, or remove the old one with 'vault relay rm \(ShellWord.quoted(name))'"
        case .unknownGroup:
            "'vault group list' shows your groups ('--left', those you left); 'vault receive' fetches groups you were added to"
        case .ambiguousGroup:
            "name the group by the first digits of its id ('vault group list' shows them)"
        case .ambiguousDestination(let text):
            "write 'https://\(text)' for the web site, or '\(text.prefix { $0 != ":" }):' for an application's scheme"
        case .ownerCannotLeave:
            "remove its members with 'vault group remove' instead"
        case .noQRCode:
            "use a sharper image in which the whole code and its white border are visible"
        case .kdfParametersOutOfRange:
            "--scrypt-n takes a power of two from 32768 to 4194304"
        case .tooFewPieces:
            "the holders missing must answer: ask them to run 'vault serve' and to approve your request, then try again"
        case .untrustedDealer:
            "import the dealer's key card first ('vault peer add'), comparing fingerprints"
        case .untrustedOwner:
            "import the owner's key card first ('vault peer add'), comparing fingerprints"
        case .wrongPassword, .passwordRequired:
            "the password layer was set by the dealer; --password-file FILE reads it from a file"
        case .fileExists:
            "remove it, choose another name, or pass --force where the command offers it"
        case .keyLocked(let name):
            "unlock it with 'vault unlock \(name)'"
        case .storage(let message) where message.contains("disk is full"):
            "free some disk space; nothing was changed"
        case .storage(let message) where message.hasPrefix("cannot open or write the keystore"):
            "vault writes its keystore's directory even to read it (the log beside the database): it must be yours and writable"
        case .fileSystem(_, let reason):
            fileSystemHint(reason)
        case .invalidWords(let detail) where detail.contains("passphrase is printable ASCII"):
            "SLIP-39 passphrases are plain ASCII so that every implementation reads them alike; choose one without accents or symbols beyond ASCII"
        case .invalidWords(let detail) where detail.contains("more are needed") || detail.contains("groups are complete"):
            "give the other holders' mnemonics too, one a line (or separated by empty lines)"
        case .invalidWords:
            "check the words against the paper: each is one of SLIP-39's 1024 words, and their order matters"
        case .wordsDoNotFit:
            "share it as vault shares only ('vault secrets kit' prints those on paper for any size the page holds)"
        case .invalidKit(let detail) where detail.contains("more needed") || detail.contains("codes are missing"):
            "scan the other pages too: give every image with --image, in any order"
        case .invalidKit:
            "scan the kit's codes again, from a sharper picture of the printed page"
        default:
            nil
        }
    }

    static func hint(for error: NetError) -> String? {
        switch error {
        case .unreachable:
            "check the address, and that 'vault serve' runs there"
        case .unexpectedPeer(let label):
            "another machine answers at that address; ask \(label) for the right one, or check the peer with 'vault peer show \(label)'"
        default:
            nil
        }
    }
}

/// Runs `body`, which reads the input `file`; a refusal then names the file
/// (``VaultError/about(file:)``), as every error about an input file does.
func naming<T>(_ file: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as VaultError {
        throw error.about(file: file)
    }
}
