/// Hands `bytes` to `write` `step` bytes at a time (the last step may be shorter): a stream's
/// input arriving in pieces of a size the test chooses.
public func feed(_ bytes: [UInt8], step: Int, to write: (UnsafeRawBufferPointer) throws -> Void) rethrows {
    precondition(step > 0)
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + step)
        try bytes[offset..<end].withUnsafeBytes { try write($0) }
        offset = end
    }
}
