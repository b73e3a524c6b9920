import Foundation

/// Sealing and opening an item's stream (Docs/FORMAT.md §13), apart from where it is kept:
/// the keystore stores streams in rows, URL requests keep small ones in memory.
public enum ItemCrypto {
    /// Seals `content` with `metadata` under `itemKey`, inside a password layer when
    /// `password` is given, and emits the stream. Returns the content's length.
    static func sealStream(
        _ header: ItemHeader, metadata: SecretMetadata, content: inout some ByteSource, itemKey: SecureBytes,
        password: SecureBytes?, scrypt: ScryptParameters, random: some RandomSource, emit: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> UInt64 {
        precondition(header.passwordProtected == (password != nil))
        try metadata.validate()
        let sealer = try StreamSealer(key: itemKey, emit: emit)
        // The same layers as a secret's payload (FORMAT.md §10): a password layer byte, then
        // the payload, inside an scrypt-keyed stream when there is a password.
        let salt = random.bytes(PasswordLayer.saltLength)
        try PasswordLayer.header(parameters: password.map { _ in scrypt }, salt: salt).withUnsafeBytes { try sealer.write($0) }
        let inner = try password.map { try StreamSealer(key: scrypt.deriveKey(passphrase: $0, salt: salt), emit: sealer.write) }
        let payload: (UnsafeRawBufferPointer) throws -> Void = inner?.write ?? sealer.write
        try PayloadHeader.encode(type: header.type.rawValue, metadata: metadata).withUnsafeBytes { try payload($0) }
        var size: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: SecretStream.chunkLength)
        defer { buffer.wipe() }
        while true {
            let count = try buffer.withUnsafeMutableBytes { try content.read(into: $0) }
            if count == 0 { break }
            size += UInt64(count)
            guard size <= Limits.maximumCiphertext / 2 else { throw VaultError.invalidSecret("larger than 512 GiB") }
            try buffer.withUnsafeBytes { try payload(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        try inner?.finish()
        try sealer.finish()
        return size
    }

    /// Opens a stream read from `source`; only authenticated plaintext reaches `content`.
    static func openStream(
        _ header: ItemHeader, source: inout some ByteSource, itemKey: SecureBytes, password: @escaping () throws -> SecureBytes,
        metadataReady: @escaping (SecretMetadata) throws -> Void, content: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> SecretMetadata {
        let parser = PayloadParser(expectedType: header.type.rawValue, metadataReady: metadataReady, content: content)
        let layer = PasswordLayerParser(payload: parser, password: password)
        let opener = StreamOpener(key: itemKey, emit: layer.write)
        do {
            try source.forEachChunk(of: SecretStream.sealedChunkLength, opener.write)
            try opener.finish()
            try layer.finish()
        } catch {
            throw Keystore.openingFailure(error)
        }
        return parser.metadata ?? SecretMetadata()
    }

    /// Reads an export's header from `source`, leaving it at the stream.
    public static func readHeader(_ source: inout some ByteSource) throws -> (header: ItemHeader, streamLength: UInt64) {
        try ItemExport.parsePrefix { try source.readFully($0) }
    }

    /// The whole export of a new item, in memory (for small items: URL requests).
    public static func export(
        _ header: ItemHeader, metadata: SecretMetadata, content: inout some ByteSource, itemKey: SecureBytes,
        password: SecureBytes? = nil, scrypt: ScryptParameters = .default, random: some RandomSource = SecureRandom()
    ) throws -> [UInt8] {
        var stream: [UInt8] = []
        _ = try sealStream(header, metadata: metadata, content: &content, itemKey: itemKey, password: password, scrypt: scrypt,
                           random: random) { stream += $0 }
        return ItemExport.prefix(header, streamLength: UInt64(stream.count)) + stream
    }

    /// Opens an export's stream (after ``readHeader(_:)``) without storing it, checking that
    /// it is exactly `streamLength` bytes.
    public static func open(
        _ header: ItemHeader, streamLength: UInt64, source: inout some ByteSource, itemKey: SecureBytes,
        password: @escaping () throws -> SecureBytes = { throw VaultError.passwordRequired },
        metadataReady: @escaping (SecretMetadata) throws -> Void = { _ in }, content: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws -> SecretMetadata {
        var bounded = BoundedSource(source, length: streamLength)
        let metadata: SecretMetadata
        do {
            metadata = try openStream(header, source: &bounded, itemKey: itemKey, password: password, metadataReady: metadataReady,
                                      content: content)
        } catch {
            // A stream that ended early is truncated, not altered.
            if bounded.endedEarly { throw VaultError.truncated(what: "the item") }
            throw error
        }
        guard !bounded.endedEarly else { throw VaultError.truncated(what: "the item") }
        guard try bounded.base.readFully(1).isEmpty else { throw VaultError.malformed(what: "the item", detail: "bytes follow its stream") }
        return metadata
    }
}

/// At most `length` bytes of another source.
public struct BoundedSource<Base: ByteSource>: ByteSource {
    /// The source itself, positioned after what was read through this one.
    var base: Base
    private(set) var remaining: UInt64
    /// The source ended before `length` bytes.
    private(set) var endedEarly = false

    /// The next `length` bytes of `base`.
    public init(_ base: Base, length: UInt64) {
        self.base = base
        remaining = length
    }

    public mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard remaining > 0 else { return 0 }
        let count = try base.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(min(UInt64(buffer.count), remaining))]))
        remaining -= UInt64(count)
        if count == 0 { endedEarly = true }
        return count
    }
}
