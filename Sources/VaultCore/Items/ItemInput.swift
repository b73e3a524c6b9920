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
}
