import Foundation

/// Why a measurement could not be made (a relay that did not start, a group not accepted):
/// the harness stops and prints it, as `vault` prints its errors.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
