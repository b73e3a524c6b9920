import Foundation
import Testing
import VaultTestSupport

/// Examples/AccountBook (issue 36): Grouper's account book, standalone on its own SQLite
/// file, and the same app synced through vault by the lines of Examples/AccountBook/sync.diff.
@Suite(.serialized) struct AccountBookTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    static let folder = root + "/Examples/AccountBook"

    /// A binary built beside `vault`.
    static func binary(_ name: String) -> String {
        URL(fileURLWithPath: VaultBinary.path).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// `account-book-synced ARGUMENTS` as `label`, on its own book file and the family key.
    @discardableResult
    static func book(_ world: SyncWorld, _ label: String, _ arguments: String...) throws -> String {
        let key = label == "alice" ? "family" : world.keyID
        let result = try ProcessRunner.run(binary("account-book-synced"), arguments + ["--book", world.directory.file("\(label).book"), "--key", key],
                                           environment: world.holders[label].vault.childEnvironment)
        #expect(result.status == 0, "\(label): account-book-synced \(arguments.joined(separator: " ")): \(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Alice keeps a book and Bob gets all of it; both change one record at once and both
    /// books end with the same one (the other kept as a conflict copy in vault); Bob removes
    /// it and it goes from Alice's book too.
    @Test func twoBooksConvergeThroughThreeRelays() throws {
        let world = try SyncWorld()
        let wallet = try Self.book(world, "alice", "add", "account", "wallet")
        try Self.book(world, "alice", "add", "class", "food")
        try Self.book(world, "alice", "add", "class", "salary", "--income")
        try Self.book(world, "alice", "add", "shop", "corner shop")
        try Self.book(world, "alice", "add", "template", "lunch", "--class", "food", "--account", "wallet", "--shop", "corner shop",
                      "--amount", "8.50")
        let lunch = try Self.book(world, "alice", "add", "record", "--template", "lunch", "--note", "monday lunch", "--day", "2026-03-02")
        try Self.book(world, "alice", "add", "record", "2000", "--class", "salary", "--account", wallet, "--note", "march", "--day", "2026-03-01")
        try Self.book(world, "alice", "sync")

        try world.ok("bob", "unlock", world.keyID)
        try world.ok("bob", "sync")
        try Self.book(world, "bob", "sync")
        #expect(try Self.book(world, "bob", "report") == "wallet: 1991.50 EUR\nfood: 8.50\nsalary: 2000.00")
        for kind in ["account", "class", "shop", "template", "record"] {
            #expect(try Self.book(world, "bob", "list", kind) == Self.book(world, "alice", "list", kind), "\(kind)")
        }

        // Both change the lunch before either syncs.
        try Self.book(world, "alice", "edit", lunch, "--amount", "9.00")
        try Self.book(world, "bob", "edit", lunch, "--amount", "7.00", "--note", "monday lunch, with coffee")
        try Self.book(world, "alice", "sync")
        try Self.book(world, "bob", "sync")
        try Self.book(world, "alice", "sync")
        let records = try Self.book(world, "alice", "list", "record")
        #expect(try Self.book(world, "bob", "list", "record") == records)
        #expect(records.contains("9.00  monday lunch") != records.contains("7.00  monday lunch, with coffee"), "\(records)")
        for label in ["alice", "bob"] {
            let objects = try world.holders.ok(label, ["app", "list", "account-book", "--key", label == "alice" ? "family" : world.keyID, "Record"])
            #expect(objects.split(separator: "\n").filter { $0.hasSuffix("CONFLICT") }.count == 1, "\(objects)")
        }

        try Self.book(world, "bob", "rm", "record", lunch)
        try Self.book(world, "bob", "sync")
        try Self.book(world, "alice", "sync")
        #expect(try !Self.book(world, "alice", "list", "record").contains(lunch))
        #expect(try Self.book(world, "alice", "report") == "wallet: 2000.00 EUR\nfood: 0.00\nsalary: 2000.00")
        #expect(try Self.book(world, "bob", "report") == Self.book(world, "alice", "report"))
    }

    /// The standalone app works on its own file, with no vault anywhere.
    @Test func theStandaloneBookNeedsNoVault() throws {
        let directory = TemporaryDirectory("account-book")
        func book(_ arguments: String...) throws -> ProcessResult {
            try ProcessRunner.run(Self.binary("account-book"), arguments + ["--book", directory.file("book.sqlite")],
                                  environment: ["PATH": "/usr/bin:/bin", "HOME": directory.path])
        }
        #expect(try book("add", "account", "wallet", "--currency", "CHF").status == 0)
        #expect(try book("add", "class", "rent").status == 0)
        #expect(try book("add", "record", "12.5", "--class", "rent", "--account", "wallet").status == 64)
        #expect(try book("add", "record", "12.50", "--class", "rent", "--account", "wallet").status == 0)
        #expect(try book("report").stdout == "wallet: -12.50 CHF\nrent: 12.50\n")
        #expect(try book("sync").status == 64)
    }

    /// sync.diff is exactly what turns the standalone app into the synced one, and adds at
    /// most 20 lines; the counts in Examples/AccountBook/README.md are the true ones, counted
    /// as Grouper's table 6.1 counts (lines of code: neither blank nor only a comment).
    @Test func syncTakesTheLinesOfTheCommittedDiff() throws {
        let result = try ProcessRunner.run("/bin/sh", ["-c", "cd \"$1\" && diff -ruN Standalone Synced", "sh", Self.folder],
                                           environment: ["LC_ALL": "C", "PATH": "/usr/bin:/bin"])
        #expect(result.status == 1, "\(result.stderr)")
        // diff's file headers carry modification times: the committed diff has none.
        let diff = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix("--- ") || line.hasPrefix("+++ ") ? line.split(separator: "\t").first.map(String.init) ?? String(line) : String(line)
        }.joined(separator: "\n")
        let committed = try String(contentsOfFile: Self.folder + "/sync.diff", encoding: .utf8)
        #expect(diff == committed, "regenerate it: cd Examples/AccountBook && diff -ruN Standalone Synced | sed -E '/^(---|\\+\\+\\+) /s/\\t.*//' > sync.diff")
        func isCode(_ line: Substring) -> Bool {
            let text = line.trimmingCharacters(in: .whitespaces)
            return !text.isEmpty && !text.hasPrefix("//")
        }
        let lines = diff.split(separator: "\n")
        let added = lines.filter { $0.hasPrefix("+") && !$0.hasPrefix("+++ ") }.map { $0.dropFirst() }
        let removed = lines.filter { $0.hasPrefix("-") && !$0.hasPrefix("--- ") }.map { $0.dropFirst() }
        #expect(added.filter { !$0.allSatisfy(\.isWhitespace) }.count <= 20, "\(added.count) lines added")
        var standalone = 0
        for file in try FileManager.default.contentsOfDirectory(atPath: Self.folder + "/Standalone") where file.hasSuffix(".swift") {
            standalone += try String(contentsOfFile: Self.folder + "/Standalone/" + file, encoding: .utf8).split(separator: "\n").filter(isCode).count
        }
        let row = "| \(standalone) | \(added.filter(isCode).count) | \(removed.filter(isCode).count) |"
        let readme = try String(contentsOfFile: Self.folder + "/README.md", encoding: .utf8)
        #expect(readme.contains(row), "the README's table should read \(row)")
    }
}
