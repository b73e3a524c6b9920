import ArgumentParser
import Foundation
import GRDB

/// The options every command takes: where the book is.
struct Options: ParsableArguments {
    @Option(help: "The book: a SQLite file, made on first use.")
    var book = ProcessInfo.processInfo.environment["ACCOUNT_BOOK"] ?? "account-book.sqlite"

    func open() async throws -> Book {
        try Book(path: book)
    }
}

/// The account book: one SQLite database, every write through `save` and `delete`.
struct Book {
    static let entities: [any Entity.Type] = [Account.self, Classification.self, Shop.self, Template.self, Record.self]
    let db: DatabaseQueue

    init(path: String) throws {
        db = try DatabaseQueue(path: path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            for entity in Book.entities { try entity.createTable(db) }
        }
        try migrator.migrate(db)
    }

    func save(_ value: some Entity) async throws {
        try await db.write { try value.save($0) }
    }

    func delete<T: Entity>(_: T.Type, id: String) async throws {
        _ = try await db.write { try T.deleteOne($0, key: id) }
    }

    func all<T: Entity>(_: T.Type) async throws -> [T] {
        try await db.read { try T.fetchAll($0) }.sorted { ($0.name, $0.id) < ($1.name, $1.id) }
    }

    /// The row of type `T` whose id starts with `reference`, or whose name is `reference`.
    func find<T: Entity>(_: T.Type, _ reference: String) async throws -> T {
        let rows = try await all(T.self)
        let matches = rows.filter { $0.id == reference }
            + rows.filter { $0.id != reference && ($0.id.hasPrefix(reference.lowercased()) || $0.name.lowercased() == reference.lowercased()) }
        guard let match = matches.first, matches.count == 1 || matches[0].id == reference else {
            throw ValidationError(matches.isEmpty ? "no \(T.databaseTableName) '\(reference)'" : "'\(reference)' names more than one \(T.databaseTableName)")
        }
        return match
    }

    /// A new row's id: 12 random hex digits.
    static func newID() -> String {
        String(UUID().uuidString.lowercased().filter(\.isHexDigit).prefix(12))
    }
}
