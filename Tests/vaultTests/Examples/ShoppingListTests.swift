import Foundation
import Testing
import VaultTestSupport

/// Examples/ShoppingList (issue 36): a Python program on `vault app`, standard library
/// only, run by two holders on their own homes through three relays on loopback.
@Suite(.serialized) struct ShoppingListTests {
    static let script = AccountBookTests.root + "/Examples/ShoppingList/shopping_list.py"

    /// The environment of `label`'s commands, with the built `vault` first on PATH.
    static func environment(_ world: SyncWorld, _ label: String) -> [String: String] {
        var environment = world.holders[label].vault.childEnvironment
        environment["PATH"] = URL(fileURLWithPath: VaultBinary.path).deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        return environment
    }

    static func key(_ world: SyncWorld, _ label: String) -> String { label == "alice" ? "family" : world.keyID }

    @discardableResult
    static func list(_ world: SyncWorld, _ label: String, _ arguments: String...) throws -> String {
        let result = try ProcessRunner.run("/usr/bin/python3", [script, key(world, label)] + arguments, environment: environment(world, label))
        #expect(result.status == 0, "\(label): shopping_list.py \(arguments.joined(separator: " ")): \(result.stderr)")
        return result.stdout
    }

    static func watch(_ world: SyncWorld, _ label: String, log: String) throws -> BackgroundProcess {
        try BackgroundProcess("/usr/bin/python3", ["-u", script, key(world, label), "watch"], environment: environment(world, label),
                              logPath: world.directory.file(log))
    }

    /// Stops a watch: the program and the `vault app watch` it runs (its process group; the
    /// test's spawned processes start with SIGTERM blocked, which Python does not unblock).
    static func stop(_ watch: BackgroundProcess) {
        kill(-watch.pid, SIGKILL)
        watch.stop(SIGKILL)
    }

    @Test func twoListsConvergeWithAConflictAndADelete() throws {
        let world = try SyncWorld()
        #expect(try String(contentsOfFile: Self.script, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).count <= 41)
        try Self.list(world, "alice", "add", "milk", "2")
        try world.ok("bob", "unlock", world.keyID)
        try world.ok("bob", "sync")
        let watch = try Self.watch(world, "bob", log: "watch.log")
        defer { Self.stop(watch) }
        try watch.waitFor("(?m)^2 milk$")
        try Self.list(world, "alice", "add", "eggs", "12")
        try watch.waitFor("12 eggs; 2 milk", timeout: 12)
        Self.stop(watch)

        // Nobody listens while both change the milk.
        try Self.list(world, "alice", "add", "milk", "3")
        try Self.list(world, "bob", "add", "milk", "4")
        try world.ok("alice", "sync")
        try world.ok("bob", "sync")
        try world.ok("alice", "sync")
        let alice = try Self.list(world, "alice", "list")
        #expect(alice == (try Self.list(world, "bob", "list")) && (alice == "12 eggs; 3 milk\n" || alice == "12 eggs; 4 milk\n"), "\(alice)")
        let again = try Self.watch(world, "bob", log: "watch2.log")
        defer { Self.stop(again) }
        try again.waitFor("conflict: (alice|bob) also wrote")
        // The list as it is is shown once, for all its objects (issue 47: once per object).
        try again.waitFor("(?m)^12 eggs; [34] milk$")
        #expect(again.log.split(separator: "\n").filter { $0.hasPrefix("12 eggs; ") || $0.hasSuffix(" milk") }.count == 1, "\(again.log)")
        try Self.list(world, "alice", "rm", "eggs")
        try again.waitFor("(?m)^[34] milk$", timeout: 12)
        Self.stop(again)
        #expect(try Self.list(world, "alice", "list") == Self.list(world, "bob", "list"))
    }
}
