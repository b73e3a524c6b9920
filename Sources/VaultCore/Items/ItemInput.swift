/// An item given in any of its forms (binary export, armor, or the text of its QR code),
/// read as the binary export.
public enum ItemInput {
    /// Sniffs `source`: armor is unwrapped as it streams, QR text decoded, binary passed on.
    public static func open(_ source: any ByteSource) throws -> any ByteSource {
        let (head, whole) = try PrefixedSource.peek(source, count: 32)
        if ItemArmor.isArmor(head) { return ArmorReader(whole) }
        if let text = String(validating: head, as: UTF8.self), ItemArmor.isQRText(text) {
            var rest = whole
            // A QR code carries at most maximumQRText characters; one more shows the input is longer.
            let all = try rest.readFully(ItemArmor.maximumQRText + 2)
            return BytesSource(try ItemArmor.export(fromQRText: String(decoding: all, as: UTF8.self)))
        }
        return whole
    }

    /// Reads an export through without its key, as its import will: armor or QR text
    /// unwrapped, the header parsed, the stream counted to its stated length, nothing after
    /// it. For input that can be read twice, before a locked key is recovered for it: a file
    /// cut short, or with bytes after its stream, must not cost its holders a release (and
    /// their consent). Without the key nothing is authenticated: a changed byte shows only
    /// when the import opens the stream.
    public static func checkWhole(_ source: any ByteSource) throws {
        var input = try open(source)
        let (_, streamLength) = try ItemCrypto.readHeader(&input)
        var left = streamLength
        var buffer = [UInt8](repeating: 0, count: SecretStream.sealedChunkLength)
        while left > 0 {
            let wanted = Int(min(left, UInt64(buffer.count)))
            let count = try buffer.withUnsafeMutableBytes { try input.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<wanted])) }
            guard count > 0 else { throw truncated(streamLength: streamLength, left: left) }
            left -= UInt64(count)
        }
        guard try input.readFully(1).isEmpty else { throw trailingBytes }
    }

    /// The refusal of an export whose stream ends `left` bytes short.
    static func truncated(streamLength: UInt64, left: UInt64) -> VaultError {
        .truncated(what: "the item (\(streamLength - left) of \(streamLength) stream bytes arrived)")
    }

    /// The refusal of an export with bytes after its stream.
    static let trailingBytes = VaultError.malformed(what: "the item", detail: "bytes follow its stream")
}
