import Foundation

/// Why a measurement could not be made (a relay that did not start, a group not accepted):
/// the harness stops and prints it, as `vault` prints its errors.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The `vault` binary beside this one: the relays a bench starts are real `vault relay
/// serve` processes, built with it (`swift build` builds both into one directory).
enum VaultExecutable {
    static var url: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("vault")
    }
}
