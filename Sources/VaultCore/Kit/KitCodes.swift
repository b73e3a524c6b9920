/// A kit share cut into QR codes, and codes gathered back into shares, in any order, from
/// any number of images (Docs/FORMAT.md, "Recovery kits"). Each code is Bech32, uppercase
/// (QR's compact alphanumeric mode), human-readable part "vaultkit", over
///
///     version 0x01 ‖ secret id (16) ‖ holder index (1) ‖ part (1, from 1) ‖ parts (1) ‖ bytes
///
/// The codes of one share are its payload's bytes in order, `chunkLength` at most each.
public enum KitCodes {
    static let prefix = "vaultkit"
    static let version: UInt8 = 1
    static let codeHeader = 1 + 16 + 1 + 1 + 1
    /// Payload bytes a code: with its header, about 630 alphanumeric characters, a QR code
    /// of 85 modules a side at level M, which a page printed at 150 dpi shows at 4 pixels a
    /// module in 7 cm.
    static let chunkLength = 360
    /// Codes a kit at most: a share that needs more does not fit on paper.
    public static let maximumCodes = 12
    static let maximumPayload = chunkLength * maximumCodes
    /// The longest code text read.
    static let maximumText = 8 + 1 + ((codeHeader + chunkLength) * 8 + 4) / 5 + 6

    /// Whether a scanned payload looks like a kit code (its prefix only).
    public static func isKitCode(_ payload: [UInt8]) -> Bool {
        payload.count > prefix.count && payload.prefix(prefix.count + 1).map { $0 | 0x20 } == Array((prefix + "1").utf8)
    }

    /// The texts of `share`'s codes, in order, in locked memory.
    static func texts(for share: KitShare) -> [SecureBytes] {
        let payload = share.encoded()
        let parts = (payload.count + chunkLength - 1) / chunkLength
        precondition(parts >= 1 && parts <= maximumCodes)
        return (0..<parts).map { part in
            let range = part * chunkLength..<min(payload.count, (part + 1) * chunkLength)
            let data = SecureBytes(count: codeHeader + range.count)
            data.withUnsafeMutableBytes { out in
                out[0] = version
                for (i, byte) in share.header.secretID.enumerated() { out[1 + i] = byte }
                out[17] = UInt8(share.header.holderIndex)
                out[18] = UInt8(part + 1)
                out[19] = UInt8(parts)
                payload.withUnsafeBytes { (out.baseAddress! + codeHeader).copyMemory(from: $0.baseAddress! + range.lowerBound, byteCount: range.count) }
            }
            return Bech32.encodeUppercase(hrp: prefix, data: data)
        }
    }

    /// Codes gathered from scans, grouped by share, each share parsed once all its parts
    /// are in. A code seen twice (two photos of one page) counts once.
    public struct Collector {
        private struct Key: Hashable {
            let secretID: [UInt8]
            let index: Int
        }

        private var parts: [Key: (count: Int, chunks: [Int: [UInt8]])] = [:]

        public init() {}

        /// Adds a scanned code; a code that is not a kit's, or contradicts the others of its
        /// share, is refused.
        public mutating func add(_ payload: [UInt8]) throws(VaultError) {
            guard payload.count <= maximumText, let text = String(validating: payload, as: UTF8.self) else {
                throw .invalidKit("a code is too long")
            }
            var data: [UInt8]
            do {
                let decoded = try Bech32.decode(text, maximumLength: maximumText)
                guard decoded.hrp == prefix else { throw VaultError.invalidKit("a code is not a vault kit's") }
                data = decoded.data
            } catch let error as VaultError {
                throw error
            } catch {
                throw .invalidKit("a code does not decode (\(error))")
            }
            defer { data.wipe() }
            guard data.count > codeHeader, data.count <= codeHeader + chunkLength else { throw .invalidKit("a code has the wrong length") }
            guard data[0] == version else { throw .unsupportedVersion(what: "the recovery kit", version: data[0], supported: version) }
            let key = Key(secretID: Array(data[1..<17]), index: Int(data[17]))
            let part = Int(data[18]), count = Int(data[19])
            guard key.index >= 1, count >= 1, count <= maximumCodes, part >= 1, part <= count else {
                throw .invalidKit("a code's part \(part) of \(count) is out of range")
            }
            var entry = parts[key] ?? (count, [:])
            guard entry.count == count else { throw .invalidKit("two codes of holder \(key.index)'s share disagree on their number") }
            let chunk = Array(data[codeHeader...])
            if let seen = entry.chunks[part] {
                guard seen == chunk else { throw .invalidKit("two codes claim part \(part) of holder \(key.index)'s share") }
                return
            }
            entry.chunks[part] = chunk
            parts[key] = entry
        }

        /// Every share whose codes are all in, parsed (the dealer's signature checked); and,
        /// for the others, which parts are missing.
        public func shares() throws(VaultError) -> (complete: [KitShare], incomplete: [(secretID: [UInt8], index: Int, have: Int, of: Int)]) {
            var complete: [KitShare] = []
            var incomplete: [(secretID: [UInt8], index: Int, have: Int, of: Int)] = []
            for (key, entry) in parts.sorted(by: { ($0.key.secretID.hex, $0.key.index) < ($1.key.secretID.hex, $1.key.index) }) {
                guard entry.chunks.count == entry.count else {
                    incomplete.append((key.secretID, key.index, entry.chunks.count, entry.count))
                    continue
                }
                let length = entry.chunks.values.reduce(0) { $0 + $1.count }
                let payload = SecureBytes(count: length)
                payload.withUnsafeMutableBytes { out in
                    var offset = 0
                    for part in 1...entry.count {
                        for byte in entry.chunks[part]! { out[offset] = byte; offset += 1 }
                    }
                }
                let share = try KitShare(parsing: payload)
                guard share.header.secretID == key.secretID, share.header.holderIndex == key.index else {
                    throw .invalidKit("holder \(key.index)'s codes hold another holder's share")
                }
                complete.append(share)
            }
            return (complete, incomplete)
        }
    }
}
