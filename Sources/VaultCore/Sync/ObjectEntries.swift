import Foundation

/// The plaintext of an object message's body (Docs/FORMAT.md §19): entries one after
/// another, each a change's signed record (§18), a byte saying whether its content follows
/// (1) or not (0), and then the content, `content length` bytes. A put is sent without its
/// content only when the message also carries a change that supersedes it, earlier in the
/// message: entries go newest first, so a receiver meets the successor first and never
/// needs the content it was not sent.
public enum ObjectEntries {
    /// The most entries one message may carry: more than any key's history, and a bound on
    /// the work one message can ask for.
    public static let maximumEntries = 100_000

    /// Writes one entry to `emit`: the record, then the content that `content` writes (nil:
    /// none).
    public static func write(record: [UInt8], content: (((UnsafeRawBufferPointer) throws -> Void) throws -> Void)?,
                             to emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        try record.withUnsafeBytes(emit)
        try [UInt8(content == nil ? 0 : 1)].withUnsafeBytes(emit)
        try content?(emit)
    }

    /// Reads the entries of a body's plaintext, in the file at `path`, one at a time:
    /// `body` gets the change, its record, and its content (nil when not sent) as a source
    /// of exactly its length, which it may read or leave; what it leaves is skipped.
    public static func read(path: String, _ body: (ItemChange, [UInt8], BoundedSource<FileSource>?) throws -> Void) throws {
        var source = try FileSource(path: path)
        var count = 0
        while true {
            let start = try source.readFully(SignedFrame.startLength)
            if start.isEmpty { return }
            count += 1
            guard count <= maximumEntries else {
                throw VaultError.malformed(what: "the object message", detail: "it has more than \(maximumEntries) entries")
            }
            guard let length = ItemChange.recordLength(start: start) else {
                throw VaultError.malformed(what: "the object message", detail: "an entry is not an item change")
            }
            let rest = try source.readFully(length - start.count + 1)
            guard rest.count == length - start.count + 1, rest.last! <= 1 else { throw VaultError.truncated(what: "the object message") }
            let change = try ItemChange(record: start + rest.dropLast())
            let hasContent = rest.last! == 1
            guard !hasContent || change.operation == .put else {
                throw VaultError.malformed(what: "the object message", detail: "a delete carries content")
            }
            let end = source.position + (hasContent ? change.contentLength : 0)
            try body(change, start + rest.dropLast(), hasContent ? BoundedSource(source, length: change.contentLength) : nil)
            // What the content's reader left is skipped (the file source is shared).
            guard source.position <= end else { throw VaultError.unexpected("an entry's content was read past its end") }
            try source.skip(end - source.position)
            guard source.position == end else { throw VaultError.truncated(what: "the object message") }
        }
    }
}
