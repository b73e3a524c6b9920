import ArgumentParser
import Foundation
import VaultCore
import VaultRelayClient

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send a secret to members of a group, split across the group's relays.",
        discussion: """
            The secret is encrypted and split into one share per relay: any K rebuild it, and \
            fewer reveal nothing; each relay's share of the key is sealed to every recipient. \
            It succeeds when at least S relays stored their share (default K = max(2, ⌈n/2⌉), \
            S = K), with a warning naming each relay that did not. A send that fails before K \
            relays stored it is deleted from them and gives its numbers back.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Argument(help: ArgumentHelp("The file to send, or - for standard input (default for notes).", valueName: "file"))
    var file: String?

    @Option(help: ArgumentHelp("The group.", valueName: "group"), completion: Completions.group)
    var group: String

    @Option(help: ArgumentHelp("Members to send to, comma-separated (default: every other member).", valueName: "labels"), completion: Completions.peers)
    var to: String?

    @Option(name: [.customShort("k"), .long], help: ArgumentHelp("How many relays' shares rebuild it.", valueName: "k"))
    var threshold: Int?

    @Option(help: ArgumentHelp("How many relays must store their share for the send to succeed.", valueName: "s"))
    var minRelays: Int?

    @Option(help: ArgumentHelp("How long the relays keep it (e.g. 1d, 12h, 30m).", valueName: "duration"))
    var ttl: String = "1d"

    @Flag(help: "Ask the relays to delete it once every recipient confirmed it.")
    var deleteWhenRead = false

    @Option(help: ArgumentHelp("note, file, password, contact or key (default: file for a FILE, else note).", valueName: "type"))
    var type: String?

    @OptionGroup var fields: SecretFieldOptions

    func run() async throws {
        let secretType = try resolvedType()
        let keystore = try home.openKeystore()
        let record = try keystore.group(named: group)
        let own = try keystore.identityInfo().card
        let recipients: [GroupRecord.Member]
        if let to {
            recipients = try to.split(separator: ",").map { name in
                let name = name.trimmingCharacters(in: .whitespaces)
                guard let member = record.member(named: name), member.card != own else {
                    throw CLIError.invalidInput("'\(name)' is not another member of \(record.name)")
                }
                return member
            }
        } else {
            recipients = record.members.filter { $0.card != own }
        }
        guard !recipients.isEmpty else { throw CLIError.invalidInput("the group has no other member to send to") }
        let n = record.relays.count
        let k = threshold ?? max(2, (n + 1) / 2)
        // S = K by default: what K relays stored, the recipients read; a relay down must not
        // fail a send they receive (a retry would then deliver it twice).
        let s = minRelays ?? k
        guard k >= 2, k <= n else { throw ValidationError("--threshold is 2 to \(n), the group's relays") }
        guard s >= k, s <= n else { throw ValidationError("--min-relays is \(k) to \(n)") }
        let lifetime = try Duration.seconds(ttl)
        let input = try SecretInput(type: secretType, file: file, passwordLayer: nil)
        let identity = try keys.unlock(keystore)
        let content = try input.content()
        let report: SendReport
        do {
            report = try await Messenger.send(content, type: secretType, metadata: try fields.metadata(for: secretType, file: file), group: record,
                                              to: recipients, threshold: k, minimumRelays: s, lifetime: lifetime,
                                              deleteWhenConfirmed: deleteWhenRead, keystore: keystore, identity: identity)
        } catch let failure as SendFailure {
            throw CLIError.unavailable(failure.description, hint: failure.hint)
        }
        for refusal in report.refused { Terminal.standardError("vault: warning: \(refusal)") }
        if !report.refused.isEmpty {
            let missing = report.refused.map(\.relay).joined(separator: ", ")
            let stored = report.accepted.count
            Terminal.standardError("vault: warning: stored on \(stored) of \(n) relays, not on \(missing)"
                                   + (stored == k ? ": the recipients need all \(stored) of those to read it" : ""))
        }
        if let notKept = report.notKept { Terminal.standardError("vault: warning: not kept for resend requests: \(notKept)") }
        let numbered = report.sequences.map { "\($0.label) #\($0.sequence)" }.joined(separator: ", ")
        Terminal.standardError("sent \(report.messageID.hex.prefix(8)) to \(numbered): \(k) of \(n) relays rebuild it, \(report.accepted.count) stored it")
        print(report.messageID.hex)
    }

    private func resolvedType() throws -> SecretType {
        guard let type else { return file != nil && file != "-" ? .file : .note }
        guard let resolved = SecretType(name: type) else { throw ValidationError("--type takes note, file, password, contact or key") }
        if resolved == .key && file != nil { throw ValidationError("a key is generated: give no FILE with --type key") }
        if resolved == .file && (file == nil || file == "-") { throw ValidationError("--type file needs a FILE") }
        return resolved
    }
}

struct Receive: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch, check and open the messages waiting on your groups' relays.",
        discussion: """
            Each share is checked against its sender's signature and commitments; a relay that \
            serves a damaged or forged share is named, and the message is rebuilt from the \
            others. Files are saved in --out-dir (default: the current directory) under their \
            own names; other messages are printed, or saved there too with --out-dir. Gaps in \
            a sender's numbering are reported.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption

    @Option(help: ArgumentHelp("Only this group.", valueName: "group"), completion: Completions.group)
    var group: String?

    @Option(help: ArgumentHelp("Save every message in this directory.", valueName: "dir"))
    var outDir: String?

    @Flag(help: "Keep polling: every 2 s after a message, doubling up to 60 s while nothing comes.")
    var follow = false

    func run() async throws {
        let keystore = try home.openKeystore()
        let identity = try keys.unlock(keystore)
        let sink = ReceiveSink(outDir: outDir)
        var pause: UInt64 = 2
        repeat {
            var report = try await Messenger.receive(groupName: group, keystore: keystore, identity: identity, sink: sink)
            await SyncRun.finish(keystore: keystore, identity: identity, report: &report)
            for name in report.groups { Terminal.standardError("accepted group '\(name)'") }
            for problem in report.distinctProblems { Terminal.standardError("vault: warning: \(problem)") }
            for message in report.received {
                Terminal.standardError("received #\(message.sequence) from \(message.sender) in \(message.group) (\(message.type)): \(message.destination)")
            }
            for gap in report.gaps {
                Terminal.standardError("vault: warning: from \(gap.member) in \(gap.group), never received #\(gap.listed)")
            }
            for asked in report.asked {
                Terminal.standardError("asked \(asked.member) in \(asked.group) to resend #\(asked.listed)")
            }
            for resent in report.resent {
                Terminal.standardError("resent #\(resent.listed) to \(resent.member) in \(resent.group), as asked")
            }
            for declined in report.declined {
                Terminal.standardError("told \(declined.member) in \(declined.group) that #\(declined.listed) will not come "
                                       + "(no longer kept here: expired, failed to send, or sent with other relays)")
            }
            for closed in report.closed {
                Terminal.standardError("from \(closed.member) in \(closed.group), #\(closed.listed) will not come: closed by the sender "
                                       + "(a send that failed, or a message it no longer keeps)")
            }
            SyncRun.show(report.sync, quietWhenIdle: true)
            await HolderRun.finish(&report.holders, keystore: keystore, identity: identity)
            if !follow {
                if let reason = sink.unsaved.first {
                    throw CLIError.unavailable("\(sink.unsaved.count == 1 ? "a message" : "\(sink.unsaved.count) messages") could not be saved here: \(reason)",
                                               hint: "make room (or make it writable), then run 'vault receive' again: they stay on the relays until then")
                }
                if report.received.isEmpty && report.resent.isEmpty && report.declined.isEmpty && report.closed.isEmpty && report.sync.isEmpty
                    && report.holders.isEmpty {
                    Terminal.standardError("no new messages")
                }
                if let hint = try Self.setUpHint(keystore) { Terminal.standardError("vault: hint: \(hint)") }
                break
            }
            pause = report.received.isEmpty ? min(60, pause * 2) : 2
            try await Task.sleep(for: .seconds(pause))
        } while true
    }
}

extension Receive {
    /// What to do when this identity is in no group, so that receiving can find nothing:
    /// pin relays, then create a group or be added to one. Names the relays and peers it has.
    static func setUpHint(_ keystore: Keystore) throws -> String? {
        guard try keystore.groups().isEmpty else { return nil }
        let relays = try keystore.pinnedRelays().map(\.label.value)
        let peers = try keystore.peers().map(\.label.value)
        func list(_ names: [String]) -> String {
            let joined = names.joined(separator: ",")
            return joined.contains(" ") ? "'\(joined)'" : joined
        }
        let members = peers.isEmpty ? "LABEL" : list(peers)
        let ask = "or ask a group's owner to add you"
        switch relays.count {
        case 0:
            return "you pin no relay and are in no group: pin one with 'vault relay add NAME URL', then create a group "
                + "('vault group create NAME --relays R1,R2 --members \(members)') \(ask)"
        case 1:
            return "you are in no group: a group needs 2 relays or more; pin another with 'vault relay add NAME URL', then "
                + "create one ('vault group create NAME --relays \(list(relays)),R2 --members \(members)') \(ask)"
        default:
            return "you are in no group: create one with 'vault group create NAME --relays \(list(relays)) --members \(members)' \(ask)"
        }
    }
}

/// Where `vault receive` puts a message: a new file in --out-dir (for a file, under its own
/// name made safe; never over an existing file), or standard output for other kinds when
/// no --out-dir is given. A file appears only once its message checked out whole.
final class ReceiveSink: MessageSink {
    private let outDir: String?
    private var file: OutputFile?
    private var presenter: PlaintextPresenter?
    private var fields: [String] = []
    /// --out-dir, once made sure of (created at the first message that goes there).
    private var directory: OutputDirectory?

    /// Why messages could not be saved here (a full or read-only disk): they stay on the
    /// relays, and the command ends in an error once it has taken the rest.
    private(set) var unsaved: [String] = []

    init(outDir: String?) { self.outDir = outDir }

    /// `body`, noting a failure of this machine's disk.
    private func saving<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            if case VaultError.fileSystem = error { unsaved.append(Report.words(for: error)) }
            throw error
        }
    }

    func begin(_ header: MessageHeader, sender: GroupRecord.Member, metadata: SecretMetadata) throws {
        try saving { try start(header, sender: sender, metadata: metadata) }
    }

    private func start(_ header: MessageHeader, sender: GroupRecord.Member, metadata: SecretMetadata) throws {
        let toStandardOutput = outDir == nil && header.type != .file
        if !toStandardOutput {
            if let outDir, directory == nil { directory = try OutputDirectory(outDir) }
            let path = ReceivedFileName.path(for: metadata.fileName, in: outDir ?? ".",
                                             fallback: "\(sender.label)-\(header.messageIDHex.prefix(8)).txt")
            file = try OutputFile(path: path, hiddenUntilCommit: true)
        }
        // Plaintext goes straight from vault's buffers to the descriptor, as in `recover`.
        let file = self.file
        presenter = PlaintextPresenter(type: header.type, toStandardOutput: toStandardOutput) { bytes in
            if let file { try file.write(bytes) } else { try writeStandardOutput(bytes) }
        }
        fields = PlaintextPresenter.fieldLines(metadata)
        try presenter?.begin(metadata)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        try saving { try presenter?.write(bytes) }
    }

    func commit() throws -> String {
        defer { discard() }
        return try saving {
            try presenter?.finish()
            for line in fields where !line.hasPrefix("file name: ") { Terminal.standardError(line) }
            guard let file else { return "printed" }
            try file.commit()
            return file.path
        }
    }

    func discard() {
        file = nil
        presenter = nil
        fields = []
    }
}
