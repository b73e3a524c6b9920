/// What message shares (§17) and object messages (§19) share as they arrive: a signed
/// frame (§15) whose header says how many 104-byte boxes follow and how long the rest (the
/// piece, the body) is. The prefix is checked as soon as it is in, so a message's length is
/// known before any of its body is kept; the boxes are kept; the rest goes to the caller's
/// hash; bytes past the length are refused.
struct BoxedFrameReader {
    /// What the header says about what follows it.
    struct Layout {
        let boxes: Int
        let rest: UInt64
    }

    let magic: [UInt8]
    let version: UInt8
    /// How errors name it: "the message share", "the object message".
    let what: String
    let maximumHeaderLength: Int
    let maximumLength: UInt64

    /// Bytes of the prefix (magic to signature), once the header is in.
    private(set) var prefixLength = 0
    /// The whole message's length, by its header; 0 before.
    private(set) var length: UInt64 = 0
    /// The boxes, as they come.
    private(set) var boxes: [UInt8] = []
    private var prefix: [UInt8] = []
    private var boxesLength = 0
    private var taken: UInt64 = 0

    init(magic: [UInt8], version: UInt8, what: String, maximumHeaderLength: Int, maximumLength: UInt64) {
        self.magic = magic
        self.version = version
        self.what = what
        self.maximumHeaderLength = maximumHeaderLength
        self.maximumLength = maximumLength
    }

    /// Takes the next bytes. `header` reads the header (its encoding and the signature over
    /// it), checks them and says what follows; `rest` gets the bytes after the boxes.
    mutating func take(_ bytes: UnsafeRawBufferPointer, header: ([UInt8], [UInt8]) throws(VaultError) -> Layout,
                       rest: (UnsafeRawBufferPointer) -> Void) throws(VaultError) {
        var bytes = bytes
        while length == 0, bytes.count > 0 {
            let want = prefixWanted()
            let part = min(bytes.count, want - prefix.count)
            prefix += bytes[..<part]
            bytes = UnsafeRawBufferPointer(rebasing: bytes[part...])
            // A wrong start is refused at once, not after the length it claims.
            if prefix.count == SignedFrame.startLength { try checkStart() }
            if prefix.count == want, want > SignedFrame.startLength { try parsePrefix(header) }
        }
        guard length > 0, bytes.count > 0 else { return }
        guard taken + UInt64(bytes.count) <= length - UInt64(prefixLength) else {
            throw .malformed(what: what, detail: "bytes follow its end")
        }
        if boxes.count < boxesLength {
            let part = min(bytes.count, boxesLength - boxes.count)
            boxes += bytes[..<part]
            bytes = UnsafeRawBufferPointer(rebasing: bytes[part...])
            taken += UInt64(part)
        }
        if bytes.count > 0 {
            rest(bytes)
            taken += UInt64(bytes.count)
        }
    }

    /// Whether all of it came.
    var isComplete: Bool { length > 0 && taken == length - UInt64(prefixLength) }

    /// How many prefix bytes are wanted now: the first 9, then the rest.
    private func prefixWanted() -> Int {
        guard prefix.count >= SignedFrame.startLength else { return SignedFrame.startLength }
        return SignedFrame.startLength + SignedFrame.bodyLength(prefix) + 64
    }

    private func checkStart() throws(VaultError) {
        guard Array(prefix[0..<4]) == magic else { throw .malformed(what: what, detail: "not a vault \(what.dropFirst(4))") }
        guard prefix[4] == version else { throw .unsupportedVersion(what: what, version: prefix[4], supported: version) }
        guard prefixWanted() - SignedFrame.startLength - 64 <= maximumHeaderLength else {
            throw .malformed(what: what, detail: "header too long")
        }
    }

    private mutating func parsePrefix(_ header: ([UInt8], [UInt8]) throws(VaultError) -> Layout) throws(VaultError) {
        let headerLength = prefixWanted() - SignedFrame.startLength - 64
        let encoded = Array(prefix[SignedFrame.startLength..<(SignedFrame.startLength + headerLength)])
        let layout = try header(encoded, Array(prefix[(SignedFrame.startLength + headerLength)...]))
        let total = UInt64(prefix.count) + UInt64(layout.boxes * MessageShare.boxLength) + layout.rest
        guard total <= maximumLength else {
            throw .malformed(what: what, detail: "it is \(total) bytes, over the limit of \(maximumLength)")
        }
        prefixLength = prefix.count
        boxesLength = layout.boxes * MessageShare.boxLength
        length = total
    }
}
