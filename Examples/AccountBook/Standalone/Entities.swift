import GRDB

/// What the book keeps: five kinds of rows, each with a random id (so that books kept apart
/// never give two rows one id).
protocol Entity: Codable, Sendable, CustomStringConvertible, FetchableRecord, PersistableRecord {
    var id: String { get }
    /// A name to find it by and to list it with.
    var name: String { get }
    static func createTable(_ db: Database) throws
}

/// Where money is kept: a wallet, a bank account, a card.
struct Account: Entity {
    var id: String
    var name: String
    var currency: String

    var description: String { "\(name) (\(currency))" }

    static func createTable(_ db: Database) throws {
        try db.create(table: databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("name", .text).notNull()
            t.column("currency", .text).notNull()
        }
    }
}

/// What money went to or came from: food, rent, salary.
struct Classification: Entity {
    var id: String
    var name: String
    var income: Bool

    var description: String { name + (income ? " (income)" : "") }

    static func createTable(_ db: Database) throws {
        try db.create(table: databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("name", .text).notNull()
            t.column("income", .boolean).notNull()
        }
    }
}

/// Where money was spent.
struct Shop: Entity {
    var id: String
    var name: String

    var description: String { name }

    static func createTable(_ db: Database) throws {
        try db.create(table: databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("name", .text).notNull()
        }
    }
}

/// A record made often, ready to fill in.
struct Template: Entity {
    var id: String
    var name: String
    var classification: String
    var account: String
    var shop: String?
    /// In cents; nil: asked each time.
    var amount: Int?

    var description: String { "\(name): \(amount.map(Cents.text) ?? "any amount")" }

    static func createTable(_ db: Database) throws {
        try db.create(table: databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("name", .text).notNull()
            t.column("classification", .text).notNull()
            t.column("account", .text).notNull()
            t.column("shop", .text)
            t.column("amount", .integer)
        }
    }
}

/// One entry: an amount on a day, for a classification, from or to an account.
struct Record: Entity {
    var id: String
    /// In cents, always positive: the classification says whether it is spent or earned.
    var amount: Int
    /// YYYY-MM-DD.
    var day: String
    var classification: String
    var account: String
    var shop: String?
    var note: String

    var name: String { note }
    var description: String { "\(day)  \(Cents.text(amount))  \(note)" }

    static func createTable(_ db: Database) throws {
        try db.create(table: databaseTableName) { t in
            t.primaryKey("id", .text)
            t.column("amount", .integer).notNull()
            t.column("day", .text).notNull()
            t.column("classification", .text).notNull()
            t.column("account", .text).notNull()
            t.column("shop", .text)
            t.column("note", .text).notNull()
        }
    }
}
