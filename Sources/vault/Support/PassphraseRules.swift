import VaultCore

/// The rules for passphrases and passwords that people type (Docs/CLI.md, "Passphrases").
enum PassphraseRules {
    /// How many times a new passphrase is asked for (empty, refused as short, or not repeated
    /// the same), and a keystore passphrase typed on the terminal is tried, as sudo does.
    /// A passphrase read from a file is tried once: a script would only repeat the mistake.
    static let tries = 3
    /// Fewer characters than this are warned about: scrypt slows each guess down, but a
    /// short passphrase still falls to a search of the few it could be.
    static let advisedLength = 8

    /// Why `passphrase` is short, or nil when it is long enough (characters are counted as
    /// Unicode scalars, from the UTF-8 bytes, without making a string of it).
    static func shortness(_ passphrase: SecureBytes) -> String? {
        let characters = passphrase.withUnsafeBytes { $0.reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) } }
        guard characters < advisedLength else { return nil }
        return "This has only \(characters) character\(characters == 1 ? "" : "s"), fewer than the \(advisedLength) advised"
    }

    /// A warning on stderr when a new passphrase read from `file` is short: there is nobody
    /// to ask whether it will do.
    static func warnIfShort(_ passphrase: SecureBytes, from file: String, guarding: String) {
        guard let short = shortness(passphrase) else { return }
        Terminal.standardError("vault: warning: the passphrase in \(file): \(short.prefix(1).lowercased() + short.dropFirst()); \(guarding)")
    }

    /// What guessing a keystore passphrase gives away.
    static let keystore = "whoever copies the keystore could guess it, and act as you"
    /// What guessing a password layer gives away.
    static let passwordLayer = "holders who pool their pieces could guess it"
}
