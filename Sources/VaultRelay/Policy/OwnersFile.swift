import Foundation
import VaultCore

/// `vault relay serve --owners FILE`: the cards the operator lets own groups (and make
/// links bound by no per-address quota), one a line as `vault id` prints them
/// (`vault1…`, optionally `#label`); blank lines and lines starting with `#` are skipped.
public enum OwnersFile {
    /// The largest file read: 10,000 cards with long labels.
    static let maximumBytes = 4 << 20

    /// The Ed25519 keys of the cards in the file at `path`; a line that is not a card is
    /// named by its number.
    public static func read(_ path: String) throws -> Set<[UInt8]> {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw RelayStartFailure("cannot read the owners file \(path)")
        }
        guard data.count <= maximumBytes else { throw RelayStartFailure("the owners file \(path) is over \(ByteCount.limit(UInt64(maximumBytes)))") }
        guard let text = String(data: data, encoding: .utf8) else { throw RelayStartFailure("the owners file \(path) is not UTF-8") }
        var keys: Set<[UInt8]> = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            do {
                keys.insert(try CardOffer(text: trimmed).card.signingKey)
            } catch {
                throw RelayStartFailure("line \(number + 1) of the owners file \(path) is not a key card (vault1…): \(error)")
            }
        }
        return keys
    }
}
