import ArgumentParser
import Foundation

@main
struct AccountBook: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account-book",
        abstract: "Keep an account book: accounts, classifications, shops, templates and records.",
        subcommands: [Add.self, Edit.self, Remove.self, List.self, Summary.self, Sync.self])
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send this book's changes to the key's other holders, and apply theirs.")
    @OptionGroup var options: Options
    func run() async throws { let book = try await options.open(); try await book.vault.sync(book.apply) }
}

/// What a command names: one of the five kinds of rows.
enum Kind: String, CaseIterable, ExpressibleByArgument {
    case account, `class`, shop, template, record

    var type: any Entity.Type {
        switch self {
        case .account: Account.self
        case .class: Classification.self
        case .shop: Shop.self
        case .template: Template.self
        case .record: Record.self
        }
    }
}

/// An amount as people write it (12.50, 3), in cents.
struct Cents: ExpressibleByArgument {
    let value: Int

    init?(argument: String) {
        let parts = argument.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let units = Int(parts[0]), units >= 0,
              parts.count == 1 || (parts[1].count == 2 && parts[1].allSatisfy(\.isNumber)) else { return nil }
        value = units * 100 + (parts.count == 2 ? Int(parts[1])! : 0)
    }

    static func text(_ cents: Int) -> String {
        String(format: "%@%d.%02d", cents < 0 ? "-" : "", abs(cents) / 100, abs(cents) % 100)
    }
}

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add a row; prints its id.",
        subcommands: [AddAccount.self, AddClass.self, AddShop.self, AddTemplate.self, AddRecord.self])
}

struct AddAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "account", abstract: "Add an account.")
    @OptionGroup var options: Options
    @Argument var name: String
    @Option(help: "Its currency.") var currency = "EUR"

    func run() async throws {
        let account = Account(id: Book.newID(), name: name, currency: currency)
        try await options.open().save(account)
        print(account.id)
    }
}

struct AddClass: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "class", abstract: "Add a classification.")
    @OptionGroup var options: Options
    @Argument var name: String
    @Flag(help: "Money earned (salary), not spent.") var income = false

    func run() async throws {
        let classification = Classification(id: Book.newID(), name: name, income: income)
        try await options.open().save(classification)
        print(classification.id)
    }
}

struct AddShop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "shop", abstract: "Add a shop.")
    @OptionGroup var options: Options
    @Argument var name: String

    func run() async throws {
        let shop = Shop(id: Book.newID(), name: name)
        try await options.open().save(shop)
        print(shop.id)
    }
}

struct AddTemplate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "template", abstract: "Add a template for records made often.")
    @OptionGroup var options: Options
    @Argument var name: String
    @Option(name: .customLong("class"), help: "Its classification.") var classification: String
    @Option(help: "Its account.") var account: String
    @Option(help: "Its shop.") var shop: String?
    @Option(help: "Its amount.") var amount: Cents?

    func run() async throws {
        let book = try await options.open()
        let template = Template(id: Book.newID(), name: name, classification: try await book.find(Classification.self, classification).id,
                                account: try await book.find(Account.self, account).id,
                                shop: try await shop.asyncMap { try await book.find(Shop.self, $0).id }, amount: amount?.value)
        try await book.save(template)
        print(template.id)
    }
}

struct AddRecord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "record", abstract: "Add a record, from a template or in full.")
    @OptionGroup var options: Options
    @Argument(help: "The amount (the template's if it has one).") var amount: Cents?
    @Option(help: "A template to start from.") var template: String?
    @Option(name: .customLong("class"), help: "Its classification.") var classification: String?
    @Option(help: "Its account.") var account: String?
    @Option(help: "Its shop.") var shop: String?
    @Option(help: "A note.") var note = ""
    @Option(help: "Its day, YYYY-MM-DD (default: today).") var day: String?

    func run() async throws {
        let book = try await options.open()
        let start = try await template.asyncMap { try await book.find(Template.self, $0) }
        guard let cents = amount?.value ?? start?.amount else { throw ValidationError("give an amount") }
        guard let classification = try await classification.asyncMap({ try await book.find(Classification.self, $0).id }) ?? start?.classification,
              let account = try await account.asyncMap({ try await book.find(Account.self, $0).id }) ?? start?.account else {
            throw ValidationError("give --class and --account, or a --template")
        }
        let record = Record(id: Book.newID(), amount: cents, day: day ?? Self.today(), classification: classification, account: account,
                            shop: try await shop.asyncMap { try await book.find(Shop.self, $0).id } ?? start?.shop, note: note)
        try await book.save(record)
        print(record.id)
    }

    static func today() -> String {
        let format = DateFormatter()
        format.dateFormat = "yyyy-MM-dd"
        return format.string(from: Date())
    }
}

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Change a record.")
    @OptionGroup var options: Options
    @Argument(help: "The record's id (its first digits will do).") var record: String
    @Option(help: "A new amount.") var amount: Cents?
    @Option(help: "A new note.") var note: String?
    @Option(help: "A new day.") var day: String?
    @Option(name: .customLong("class"), help: "A new classification.") var classification: String?

    func run() async throws {
        let book = try await options.open()
        var edited = try await book.find(Record.self, record)
        edited.amount = amount?.value ?? edited.amount
        edited.note = note ?? edited.note
        edited.day = day ?? edited.day
        if let classification { edited.classification = try await book.find(Classification.self, classification).id }
        try await book.save(edited)
    }
}

struct Remove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a row.")
    @OptionGroup var options: Options
    @Argument(help: "account, class, shop, template or record.") var kind: Kind
    @Argument(help: "Its id (its first digits will do) or name.") var reference: String

    func run() async throws {
        try await remove(kind.type, from: options.open())
    }

    private func remove<T: Entity>(_ type: T.Type, from book: Book) async throws {
        try await book.delete(T.self, id: try await book.find(T.self, reference).id)
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the rows of one kind.")
    @OptionGroup var options: Options
    @Argument(help: "account, class, shop, template or record.") var kind: Kind

    func run() async throws {
        for line in try await lines(kind.type, of: options.open()) { print(line) }
    }

    private func lines<T: Entity>(_: T.Type, of book: Book) async throws -> [String] {
        try await book.all(T.self).map { "\($0.id)  \($0)" }
    }
}

struct Summary: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "report", abstract: "Each account's balance and each classification's total.")
    @OptionGroup var options: Options

    func run() async throws {
        let book = try await options.open()
        let records = try await book.all(Record.self)
        let classes = Dictionary(uniqueKeysWithValues: try await book.all(Classification.self).map { ($0.id, $0) })
        func signed(_ record: Record) -> Int { classes[record.classification]?.income == true ? record.amount : -record.amount }
        for account in try await book.all(Account.self) {
            let balance = records.filter { $0.account == account.id }.reduce(0) { $0 + signed($1) }
            print("\(account.name): \(Cents.text(balance)) \(account.currency)")
        }
        for classification in classes.values.sorted(by: { $0.name < $1.name }) {
            let total = records.filter { $0.classification == classification.id }.reduce(0) { $0 + $1.amount }
            print("\(classification.name): \(Cents.text(total))")
        }
    }
}

extension Optional {
    /// `map` for an asynchronous transform.
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
