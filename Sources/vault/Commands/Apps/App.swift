import ArgumentParser
import Foundation
import VaultCore
import VaultSync

struct AppCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app",
        abstract: "Store an application's objects on a synced key, from any language (Docs/API.md).",
        discussion: """
            Each object is JSON, named APP/TYPE/ID, and kept as an item of the key: signed, sealed \
            to the key's holders, and sent through the key's group's relays ('vault key sync'). \
            Every holder ends with the same value; a write made without seeing another is kept \
            as a conflict copy. 'vault serve' must run, with the key unlocked ('vault unlock \
            KEY'): values are sealed and opened with keys its agent derives. --json prints JSON \
            for programs; 'watch --json' prints one JSON line a change, as it happens.
            """,
        subcommands: [AppPut.self, AppGet.self, AppList.self, AppRemove.self, AppWatch.self])
}

/// The application and the key its objects live on.
struct AppTarget: ParsableArguments {
    @Argument(help: ArgumentHelp("The application's id (a-z, 0-9, '.', '_', '-'): its namespace among the key's items.", valueName: "app"))
    var app: String

    @Option(help: ArgumentHelp("The shared key the objects are items of: its name or id.", valueName: "key"), completion: Completions.secret)
    var key: String

    @Option(help: ArgumentHelp("Tie the key to this group first, if it is not synced yet (as 'vault key sync' does).", valueName: "group"),
            completion: Completions.group)
    var group: String?

    /// The app's store, as `identity` (nil: for reading only).
    func open(_ keystore: Keystore, identity: Identity?) async throws -> AppStore {
        try await AppStore.open(app, keystore: keystore, identity: identity, key: key, group: group)
    }
}

struct AppPut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Write an object: its value, as JSON, from the argument or standard input.",
        discussion: """
            The write replaces the object's value (and its conflict copies) here, signed by you, \
            and is sent to the key's other holders at once (--no-send: at the next 'vault sync' or \
            change). A value is one JSON value of at most 1 MiB.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption
    @OptionGroup var target: AppTarget

    @Argument(help: ArgumentHelp("The object's type (A-Z, a-z, 0-9, '.', '_', '-').", valueName: "type"))
    var type: String

    @Argument(help: ArgumentHelp("The object's id (any text without control characters, at most 128 bytes).", valueName: "id"))
    var id: String

    @Argument(help: ArgumentHelp("The value as JSON, or - for standard input (the default, and the way to keep it out of the process list).",
                                 valueName: "json"))
    var value: String = "-"

    @Flag(help: "Do not send it now.")
    var noSend = false

    @Flag(help: "Print the outcome as JSON.")
    var json = false

    func run() async throws {
        // A value given as an argument is in /proc/PID/cmdline for every local user to read:
        // taken out at once (standard input, the default, keeps it out of it altogether).
        if value != "-" { ArgumentHiding.hide(value) }
        let json = try value == "-" ? AppInput.standardInput() : AppInput.checked(Data(value.utf8))
        let keystore = try home.openKeystore()
        let store = try await target.open(keystore, identity: try keys.unlock(keystore))
        let version = try await store.put(type: type, id: id, json: json)
        var problem: String?
        if !noSend {
            do { try await store.send() } catch { problem = Report.words(for: error) }
        }
        if self.json {
            return try AppOutput.line(["type": type, "id": id, "version": version.description, "sent": !noSend && problem == nil])
        }
        Terminal.standardError("wrote \(type)/\(TerminalText.escaped(id)) (version \(version))"
            + (noSend ? "; it goes at the next 'vault sync'" : problem == nil ? "; sent" : ""))
        if let problem { Terminal.standardError("vault: warning: \(problem)") }
    }
}

struct AppGet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print an object's current value (JSON).",
        discussion: "With --json: its version, author, value and conflict copies, as one JSON object.")

    @OptionGroup var home: HomeOption
    @OptionGroup var target: AppTarget

    @Argument(help: ArgumentHelp("The object's type.", valueName: "type"))
    var type: String

    @Argument(help: ArgumentHelp("The object's id.", valueName: "id"))
    var id: String

    @Flag(help: "Print the object with its version, author and conflict copies.")
    var json = false

    func run() async throws {
        let store = try await target.open(try home.openKeystore(), identity: nil)
        let object = try await store.object(type: type, id: id)
        if json {
            guard let object else { throw CLIError.unavailable("app \(target.app) has no object \(type)/\(TerminalText.escaped(id))", hint: AppOutput.listHint(target)) }
            return try AppOutput.line(AppOutput.object(object))
        }
        guard let current = object?.current else {
            let what = object == nil ? "has no object" : "has only conflict copies of"
            throw CLIError.unavailable("app \(target.app) \(what) \(type)/\(TerminalText.escaped(id))", hint: AppOutput.listHint(target))
        }
        try (current.json + Data("\n".utf8)).withUnsafeBytes(writeStandardOutput)
    }
}

struct AppList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List an application's objects: type, id, version, author and value.",
        discussion: "Conflict copies are listed after their object, marked CONFLICT. --json prints an array of objects as 'get --json' does.")

    @OptionGroup var home: HomeOption
    @OptionGroup var target: AppTarget

    @Argument(help: ArgumentHelp("Only objects of this type.", valueName: "type"))
    var type: String?

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        let store = try await target.open(try home.openKeystore(), identity: nil)
        let objects = try await store.objects(type: type)
        if json { return try AppOutput.write(objects.map(AppOutput.object), pretty: true) }
        guard !objects.isEmpty else { return Terminal.standardError("app \(target.app) has no objects on this key") }
        for object in objects {
            let name = "\(object.type)/\(TerminalText.escaped(object.id))"
            if let current = object.current { print("\(name)  v\(current.version) by \(current.author)  \(AppOutput.text(current.json))") }
            for copy in object.conflicts { print("\(name)  v\(copy.version) by \(copy.author)  \(AppOutput.text(copy.json))  CONFLICT") }
        }
    }
}

struct AppRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Delete an object, and its conflict copies, on every holder's machine.",
        discussion: "The delete is signed by you and sent at once (--no-send: at the next 'vault sync' or change).")

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption
    @OptionGroup var target: AppTarget

    @Argument(help: ArgumentHelp("The object's type.", valueName: "type"))
    var type: String

    @Argument(help: ArgumentHelp("The object's id.", valueName: "id"))
    var id: String

    @Flag(help: "Do not send it now.")
    var noSend = false

    func run() async throws {
        let keystore = try home.openKeystore()
        let store = try await target.open(keystore, identity: try keys.unlock(keystore))
        guard let version = try await store.delete(type: type, id: id) else {
            throw CLIError.unavailable("app \(target.app) has no object \(type)/\(TerminalText.escaped(id))", hint: AppOutput.listHint(target))
        }
        var problem: String?
        if !noSend {
            do { try await store.send() } catch { problem = Report.words(for: error) }
        }
        Terminal.standardError("deleted \(type)/\(TerminalText.escaped(id)) (version \(version))"
            + (noSend ? "; it goes at the next 'vault sync'" : problem == nil ? "; sent" : ""))
        if let problem { Terminal.standardError("vault: warning: \(problem)") }
    }
}

/// Reading a value and printing objects and changes.
enum AppOutput {
    /// One JSON value on one line of standard output, written at once (a program reads it
    /// as it comes, even through a pipe).
    static func line(_ value: Any) throws {
        try write(value, pretty: false)
    }

    static func write(_ value: Any, pretty: Bool) throws {
        var options: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed]
        if pretty { options.insert(.prettyPrinted) }
        try (try JSONSerialization.data(withJSONObject: value, options: options) + Data("\n".utf8)).withUnsafeBytes(writeStandardOutput)
    }

    /// A stored value as a JSON value (`null` if a holder stored something that is not JSON
    /// by hand, with 'vault item edit').
    static func value(_ json: Data) -> Any {
        (try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed])) ?? NSNull()
    }

    /// A value on one line, escaped for a terminal.
    static func text(_ json: Data) -> String {
        let compact = (try? JSONSerialization.data(withJSONObject: value(json), options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed]))
        return TerminalText.escaped(String(decoding: compact ?? json, as: UTF8.self), limit: 120)
    }

    static func object(_ object: AppObjectState) -> [String: Any] {
        func held(_ value: AppObjectState.Value) -> [String: Any] {
            ["version": value.version.description, "author": value.author, "value": Self.value(value.json)]
        }
        var out: [String: Any] = ["type": object.type, "id": object.id, "conflicts": object.conflicts.map(held)]
        if let current = object.current { out.merge(held(current)) { $1 } } else { out["deleted"] = true }
        return out
    }

    /// A change as `watch --json` prints it.
    static func change(_ change: AppChange) -> [String: Any] {
        var out: [String: Any] = ["seq": change.sequence, "event": change.kind.rawValue, "type": change.type, "id": change.id,
                                  "version": change.version.description, "author": change.author, "local": change.isLocal,
                                  "date": ISO8601DateFormatter().string(from: change.date)]
        if let json = change.json { out["value"] = value(json) }
        return out
    }

    static func listHint(_ target: AppTarget) -> String {
        "'vault app list \(ShellWord.quoted(target.app)) --key \(ShellWord.quoted(target.key))' lists its objects"
    }
}

/// A value from standard input: one JSON value, at most ``Keystore/maximumAppValue`` bytes.
enum AppInput {
    static func standardInput() throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while data.count <= Keystore.maximumAppValue {
            let count = read(STDIN_FILENO, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            data.append(contentsOf: buffer[..<count])
        }
        return try checked(data)
    }

    /// `data`, once it is known to be a value: checked by the store too, but refused here
    /// before any passphrase is asked.
    static func checked(_ data: Data) throws -> Data {
        try Keystore.checkAppValue([UInt8](data))
        return data
    }
}

struct AppWatch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print an application's objects, then each change as it happens, until stopped.",
        discussion: """
            First every object held now (as 'put' and 'conflict' lines, all with the same seq; \
            with --json, then a 'ready' line with that seq), then a line for each change, as it happens: as soon as a relay holds one for you (the \
            relays answer a waiting request the moment it comes, so nothing polls), or a program \
            on this machine writes one, which is also sent then. With --after SEQ, only the \
            changes after that sequence number (each line carries its seq): a program that \
            stopped resumes where it was. Each change says what an object is now; an object that \
            changed several times while nobody watched is told once. Problems (a relay down, \
            the key locked) go to standard error, once each.
            """)

    @OptionGroup var home: HomeOption
    @OptionGroup var keys: PassphraseOption
    @OptionGroup var target: AppTarget

    @Option(help: ArgumentHelp("Print the changes after this sequence number, instead of the objects first.", valueName: "seq"))
    var after: Int64?

    @Flag(help: "Print one JSON object a line.")
    var json = false

    func validate() throws {
        if let after, after < 0 { throw ValidationError("--after takes a sequence number, 0 or more") }
    }

    func run() async throws {
        let keystore = try home.openKeystore()
        let store = try await target.open(keystore, identity: try keys.unlock(keystore))
        let json = self.json
        func emit(_ change: AppChange) throws {
            if json { return try AppOutput.line(AppOutput.change(change)) }
            let value = change.json.map { ": " + AppOutput.text($0) } ?? ""
            let line = "\(change.kind.rawValue) \(change.type)/\(TerminalText.escaped(change.id)) v\(change.version) by \(change.author)\(value)\n"
            try Data(line.utf8).withUnsafeBytes(writeStandardOutput)
        }
        var start = after
        if start == nil {
            let (objects, through) = try await store.snapshot()
            for object in objects { try emit(object) }
            // The end of what is held now, so that a program shows its starting state once,
            // not once per object.
            if json { try AppOutput.line(["event": "ready", "seq": through]) }
            start = through
        }
        try await store.watch(after: start, reporting: { Terminal.standardError("vault: warning: \($0)") }, emit)
    }
}
