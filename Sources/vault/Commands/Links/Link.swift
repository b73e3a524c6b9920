import ArgumentParser
import Foundation
import VaultCore
import VaultRelayClient
import VaultRelayProtocol

struct LinkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "link",
        abstract: "Share links: a secret any browser opens, a set number of times, with its key never on the relay.",
        subcommands: [LinkCreate.self, LinkOpen.self, LinkList.self, LinkRemove.self])
}

struct LinkCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Encrypt a note or file here, store it on a relay, and print its link.",
        discussion: """
            The link is URL/s/ID#KEY: the key is in the fragment, which browsers never send, \
            so the relay holds only ciphertext. Anyone with the link opens it, in a browser or \
            with `vault link open`, until its views are used up or it expires. The link is \
            printed once and not kept; the token that deletes it is kept here.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The file to share, or - for standard input (default).", valueName: "file"))
    var file: String?

    @Flag(help: ArgumentHelp("Sign the request with your identity: a relay whose operator lists your card keeps the link past its anonymous lifetime and quotas (and some relays make links only for such cards)."))
    var signed = false

    @Option(help: ArgumentHelp("The pinned relay (default: the only one).", valueName: "name"), completion: Completions.relay)
    var relay: String?

    @Option(help: ArgumentHelp("How long the relay keeps it (e.g. 1h, 1d, 7d).", valueName: "duration"))
    var expires = "1d"

    @Option(help: ArgumentHelp("How many times it may be opened, 1 to \(LinkAPI.maximumViews).", valueName: "n"))
    var views = 1

    @Flag(help: "Also ask for a password, twice on the terminal; the link alone then opens nothing.")
    var password = false

    @Option(help: ArgumentHelp("The password, from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("note or file (default: file for a FILE, else note).", valueName: "type"))
    var type: String?

    @Flag(help: "Also show the link as a QR code.")
    var qr = false

    func validate() throws {
        guard (1...LinkAPI.maximumViews).contains(views) else { throw ValidationError("--views is 1 to \(LinkAPI.maximumViews)") }
        if password && passwordFile != nil { throw ValidationError("--password and --password-file exclude each other") }
        if let type, LinkMeta.Kind(rawValue: type) == nil { throw ValidationError("--type takes note or file") }
        if type == "file" && (file == nil || file == "-") { throw ValidationError("--type file needs a FILE") }
    }

    func run() async throws {
        let keystore = try home.openKeystore()
        let pinned: PinnedRelay
        if let relay {
            pinned = try keystore.pinnedRelay(named: relay)
        } else {
            let all = try keystore.pinnedRelays()
            guard all.count == 1, let only = all.first else {
                let names = all.map(\.label.value).joined(separator: ", ")
                throw CLIError.unavailable(all.isEmpty ? "no relay is pinned" : "\(all.count) relays are pinned (\(names)); say which",
                                            hint: all.isEmpty ? "pin one with: vault relay add NAME URL" : "give --relay NAME")
            }
            pinned = only
        }
        let lifetime = try Duration.seconds(expires)
        let fromFile = file != nil && file != "-"
        let kind = type.flatMap(LinkMeta.Kind.init(rawValue:)) ?? (fromFile ? .file : .note)
        let name = kind == .file ? file.map { URL(fileURLWithPath: $0).lastPathComponent } : nil
        let meta = try LinkMeta(kind: kind, name: name)
        let secret = try passwordFile.map { try PassphraseFile.read($0, what: "password") }
            ?? (password ? try Terminal.passphrase(prompt: "Password for the link: ", confirm: true) : nil)
        let signer = signed ? try keys.unlock(keystore) : nil
        var source = fromFile ? try FileSource(path: file!) : FileSource(standardInput: ())
        let created = try await LinkClient.create(&source, meta: meta, relay: pinned, lifetime: lifetime, views: views, password: secret,
                                                  signer: signer, home: keystore.home)
        try keystore.keepLink(KeptLink(id: created.id, relayURL: pinned.url, relayLabel: pinned.label.value, kind: kind.rawValue,
                                       size: created.size, views: views, createdAt: VaultClock.seconds(),
                                       expiresAt: created.expires, deleteToken: created.deleteToken))
        print(created.text)
        if qr { print(try QRCode(text: created.text).terminalText(color: Terminal.stdoutWantsColor), terminator: "") }
        let id = Base64URL.encode(created.id)
        Terminal.standardError("link \(id) on \(pinned.label): \(views) view\(views == 1 ? "" : "s"), until \(LinkList.date(created.expires))"
            + (secret == nil ? "" : "; it also needs the password"))
        // An id may start with "-", which would read as an option without "--".
        Terminal.standardError("delete it with: vault link rm \(id.hasPrefix("-") ? "-- " : "")\(id)")
    }
}

struct LinkOpen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a share link here, using one of its views.",
        discussion: """
            Checks as the page does: nothing is shown or kept unless all of it decrypts. A note \
            goes to standard output; a file is saved under its own name in the current \
            directory (never over a file), or to -o FILE. A wrong password uses no view. \
            Needs no identity: anyone with the link can open it. Without LINK, or with -, the \
            link is read from the terminal (not echoed) or from standard input: a command \
            line is readable by every local user (/proc/PID/cmdline) while vault runs.
            """)

    @Argument(help: ArgumentHelp("The link, URL/s/ID#KEY; - reads it from standard input; none asks on the terminal.", valueName: "link"))
    var link: String?

    @Option(name: .shortAndLong, help: ArgumentHelp("Write the content here (- for standard output).", valueName: "file"))
    var output: String?

    @Flag(help: "Replace the -o file if it exists.")
    var force = false

    @Option(help: ArgumentHelp("The link's password, from the first line of this file.", valueName: "file"))
    var passwordFile: String?

    func run() async throws {
        let address = try LinkAddress(parsing: try Self.linkText(link))
        // Everything that can fail here fails before the view is claimed, which cannot be
        // given back: the password file read, and -o's file made (nameless until the end).
        let password = try layerPasswordReadingFirst(file: passwordFile, prompt: "Password for the link: ")
        let sink = try LinkSink(output: output, force: force)
        let (meta, left) = try await LinkClient.open(address, password: { status in
            guard status.password else { return nil }
            return try password()
        }, metaReady: sink.begin, content: sink.write)
        let destination = try sink.commit()
        let what = meta.kind == .file ? "file" + (meta.name.map { " \(TerminalText.escaped($0))" } ?? "") : "note"
        Terminal.standardError("opened \(what)" + (destination.map { " into \($0)" } ?? "")
            + (left == 0 ? "; that was the last view: the relay has deleted it" : "; \(left) view\(left == 1 ? "" : "s") left"))
    }
}

extension LinkOpen {
    /// The link: the argument, the first line of standard input (`-`), or typed on the
    /// terminal without echo. The key is in the link, so the last two keep it off the
    /// command line, which any local user can read while vault runs.
    static func linkText(_ argument: String?) throws -> String {
        try SecretLine.read(argument, what: "link", prompt: "Link (not shown as you type or paste it): ", longest: longestLink,
                            hint: "give it on standard input: vault link open - < FILE (a link given as an argument is visible to every local user)")
    }

    /// A link is at most this long (LinkAddress's bound); a longer line is refused there.
    private static let longestLink = 4096
}

/// Where `vault link open` puts what it opens, shown or kept only once all of it
/// authenticated: a file has no name until then (O_TMPFILE), and standard output gets a
/// note from locked memory at the end.
final class LinkSink {
    /// The most a note held for standard output may be.
    static let largestNote = 64 << 20
    private let output: String?
    private let force: Bool
    private var file: OutputFile?
    private var held: [SecureBytes] = []
    private var heldBytes = 0

    /// Makes `output`'s file at once (without a name until ``commit()``): a file that
    /// exists, or a directory that cannot be written, is refused before the link's view is
    /// used. A file named by the link is made once its name is known, after the claim.
    init(output: String?, force: Bool) throws {
        self.output = output
        self.force = force
        if let output, output != "-" { file = try OutputFile(path: output, replace: force, hiddenUntilCommit: true) }
    }

    func begin(_ meta: LinkMeta) throws {
        if output == nil, meta.kind == .file {
            file = try OutputFile(path: ReceivedFileName.path(for: meta.name, in: ".", fallback: "link-file"), hiddenUntilCommit: true)
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if let file { return try file.write(bytes) }
        heldBytes += bytes.count
        guard heldBytes <= Self.largestNote else {
            throw CLIError.unavailable("the content is over \(ByteCount.limit(UInt64(Self.largestNote))), too much to hold for the terminal",
                                        hint: "give -o FILE")
        }
        held.append(SecureBytes(copying: bytes.bindMemory(to: UInt8.self)))
    }

    /// Keeps the file, or prints what was held; returns the file's path.
    func commit() throws -> String? {
        if let file {
            try file.commit()
            return file.path
        }
        // Whoever made the link wrote the note: on a terminal it must not drive it (L1).
        let terminal = isatty(STDOUT_FILENO) == 1 ? TerminalTextStream(sink: writeStandardOutput) : nil
        for part in held { try part.withUnsafeBytes(terminal?.write ?? writeStandardOutput) }
        try terminal?.finish()
        held = []
        return nil
    }
}

struct LinkList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "The links you created that have not expired, with views left (asked of each relay).")

    @OptionGroup var home: HomeOption

    func run() async throws {
        let keystore = try home.openKeystore()
        let links = try keystore.keptLinks(now: VaultClock.seconds())
        guard !links.isEmpty else {
            Terminal.standardError("no links; 'vault link create' makes one")
            return
        }
        var rows = [["ID", "RELAY", "TYPE", "SIZE", "EXPIRES", "VIEWS"]]
        for link in links {
            var left: String
            do {
                if let info = try await LinkClient.info(base: link.relayURL, id: link.id, token: link.deleteToken) {
                    left = "\(info.views) of \(link.views) views left"
                } else {
                    left = "gone (used up or deleted)"
                    try keystore.forgetLink(id: link.id)
                }
            } catch {
                left = "unknown: \(Report.words(for: error))"
            }
            rows.append([Base64URL.encode(link.id), link.relayLabel, link.kind, ByteCount.text(link.size), Self.date(link.expiresAt), left])
        }
        // Columns as the other lists have them; the last (words of any length) is not padded.
        let widths = (0..<rows[0].count - 1).map { column in rows.map { $0[column].count }.max()! }
        for row in rows {
            print(zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) + "  " }.joined() + row[row.count - 1])
        }
    }

    static func date(_ seconds: UInt64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}

struct LinkRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Delete a link you created from its relay, before anyone else opens it.",
        discussion: "Asks: \"Delete link ID on RELAY?\" (--yes answers yes).")

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The link's id (as `vault link list` shows it), or the link itself.", valueName: "id"))
    var link: String

    @OptionGroup var confirmation: ConfirmOption

    func run() async throws {
        let keystore = try home.openKeystore()
        let id: [UInt8]
        // The id alone, or a whole link: the part between /s/ and #.
        let text = link.range(of: "/s/", options: .backwards).map { String(link[$0.upperBound...].prefix { $0 != "#" }) } ?? link
        if let bytes = Base64URL.decode(text, length: LinkAPI.idLength) {
            id = bytes
        } else {
            throw CLIError.unavailable("'\(TerminalText.escaped(link))' is not a link id", hint: "see: vault link list")
        }
        guard let kept = try keystore.keptLinks(now: VaultClock.seconds()).first(where: { $0.id == id }) else {
            throw CLIError.unavailable("no link of yours has that id, or it expired", hint: "see: vault link list")
        }
        let shown = Base64URL.encode(id)
        try confirmation.confirm("Delete link \(shown) on \(kept.relayLabel)?", what: "deleting a link")
        let deleted = try await LinkClient.delete(base: kept.relayURL, id: id, token: kept.deleteToken)
        try keystore.forgetLink(id: id)
        Terminal.standardError(deleted ? "deleted link \(shown)" : "link \(shown) was already gone (used up or deleted)")
    }
}
