import ArgumentParser
import Foundation
import VaultCore
import VaultRelayProtocol

struct ItemHistory: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "List the versions of a synced item this machine has seen.",
        discussion: """
            One line a change, oldest first: its version (COUNTER.AUTHOR), put or delete, its \
            author, when it was made, and what it is now: current, conflict (a copy kept beside \
            the item), or superseded.
            """)

    @OptionGroup var home: HomeOption

    @Argument(help: ArgumentHelp("The item's id (or a conflict copy's).", valueName: "id"))
    var item: String

    @Flag(help: "Print JSON.")
    var json = false

    struct Entry: Encodable {
        let version: String
        let operation: String
        let author: String
        let created: Date
        let received: Date
        let state: String
    }

    func run() throws {
        let keystore = try home.openKeystore()
        // A deleted item has no row: its id is then taken as it is given.
        let itemID: [UInt8]
        if let row = try? keystore.item(matching: item) {
            itemID = row.header.itemID
        } else if let id = [UInt8](hexID: item.lowercased()) {
            itemID = id
        } else {
            throw VaultError.unknownItem(item)
        }
        let authors = try AuthorNames(keystore)
        let entries = try keystore.history(item: itemID).map { entry in
            Entry(version: entry.change.version.description, operation: entry.change.operation == .put ? "put" : "delete",
                  author: authors.name(entry.change.version.author), created: Date(timeIntervalSince1970: TimeInterval(entry.change.createdAt)),
                  received: entry.receivedAt, state: Self.words(entry.state))
        }
        if json { return try printJSON(entries) }
        guard !entries.isEmpty else {
            return Terminal.standardError("no versions of \(item) are known: its key is not synced ('vault key sync'), or its history was collected")
        }
        let time = DateFormatter()
        time.dateFormat = "yyyy-MM-dd HH:mm"
        for e in entries {
            print("\(e.version)  \(e.operation)  \(TerminalText.escaped(e.author))  \(time.string(from: e.created))  \(e.state)")
        }
    }

    static func words(_ state: ChangeOutcome) -> String {
        switch state {
        case .current: "current"
        case .conflict: "conflict"
        case .superseded, .duplicate: "superseded"
        }
    }
}
