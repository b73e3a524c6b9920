import CSodium
import Dispatch
import Foundation

/// The payload stream (FORMAT §7): AES-256-GCM over 64 KiB chunks, each sealed on its own
/// under the nonce `counter (11 bytes, big-endian) ‖ last (1 byte: 0, or 1 on the final
/// chunk)`, with no additional data. This is age's STREAM construction (Hoang, Reyhanitabar,
/// Rogaway and Vizár, "Online authenticated-encryption and its nonce-reuse
/// misuse-resistance"), with AES-256-GCM for ChaCha20-Poly1305 by measurement.
///
/// Every chunk but the last seals exactly 65536 plaintext bytes; the last 0 to 65536, so an
/// empty plaintext is one empty final chunk. Each chunk grows by its 16-byte tag, and the
/// lengths determine each other. The counter orders the chunks (reordering fails), the
/// last flag ends the stream (cutting it at a chunk boundary, or appending after the end,
/// fails), and the tag authenticates each chunk on its own, so chunks can be sealed and
/// opened on several cores at once.
///
/// Each stream has a key of its own: a fresh random data key for the threshold layer, and a
/// key derived with a fresh random salt for the password layer. So a counter nonce never
/// repeats under a key. 2^40 bytes make 2^24 chunks, far inside GCM's bounds.
enum PayloadStream {
    static let chunkLength = 65536
    static let tagLength = AESGCMChunkCipher.tagLength
    static let sealedChunkLength = chunkLength + tagLength
    /// Chunks sealed or opened together, spread over the cores.
    static let batch = 8

    /// The sealed length of `plaintext` bytes.
    static func sealedLength(plaintext: UInt64) -> UInt64 {
        let chunks = max(1, (plaintext + UInt64(chunkLength) - 1) / UInt64(chunkLength))
        return plaintext + chunks * UInt64(tagLength)
    }

    /// The plaintext length of a stream of `sealed` bytes, or nil if no stream has it.
    static func plaintextLength(sealed: UInt64) -> UInt64? {
        guard sealed >= UInt64(tagLength) else { return nil }
        let fullChunks = sealed / UInt64(sealedChunkLength)
        let rest = sealed % UInt64(sealedChunkLength)
        if rest == 0 { return fullChunks * UInt64(chunkLength) }
        // An empty chunk is the last only of an empty stream: after a full chunk, the full
        // chunk is the last one. So each length has one stream.
        guard rest > UInt64(tagLength) || (rest == UInt64(tagLength) && fullChunks == 0) else { return nil }
        return fullChunks * UInt64(chunkLength) + rest - UInt64(tagLength)
    }

    /// Chunk `index`'s nonce.
    static func nonce(_ index: UInt64, last: Bool) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: AESGCMChunkCipher.nonceLength)
        for byte in 0..<8 { nonce[3 + byte] = UInt8(truncatingIfNeeded: index >> (56 - 8 * byte)) }
        nonce[11] = last ? 1 : 0
        return nonce
    }

    /// Seals chunk `index` (at most ``chunkLength`` bytes, fewer only when `last`) into
    /// `output` (its length + 16 bytes).
    static func seal(_ chunk: UnsafeRawBufferPointer, index: UInt64, last: Bool, with cipher: AESGCMChunkCipher,
                     into output: UnsafeMutableRawBufferPointer) {
        precondition(chunk.count == chunkLength || last)
        nonce(index, last: last).withUnsafeBytes { cipher.seal(chunk, nonce: $0, into: output) }
    }

    /// How many cores to spread a batch over.
    static let workers = max(1, min(batch, ProcessInfo.processInfo.activeProcessorCount))

    /// Where the other workers run: one serial queue each, of vault's own. Not
    /// `concurrentPerform`, nor a concurrent queue: both draw on dispatch's pool of as many
    /// threads as cores, which on Linux Swift concurrency shares, so a payload sealed from a
    /// task (a sync test, an async command) could hold every thread of it and stall every
    /// task in the process, network handlers among them, until dispatch noticed and added
    /// threads, seconds later. A serial queue gets a thread of its own when it has work.
    private static let helpers = (1..<workers).map { DispatchQueue(label: "vault.payload-stream.\($0)") }

    /// Runs `body(worker, chunk)` for chunks 0..<count, spread over the workers; worker w
    /// takes chunks w, w + workers, … so that each worker's cipher is used by one thread.
    /// Worker 0 is the caller's own thread; at most `workers` (of ``workers``) take part.
    static func spread(_ count: Int, workers: Int = workers, _ body: (Int, Int) -> Void) {
        let workers = min(workers, count)
        // Each worker touches only its own chunks and its own cipher; the caller waits for
        // every helper before it returns, so nothing outlives the caller's buffers.
        withoutActuallyEscaping(body) { body in
            nonisolated(unsafe) let work = body
            let run: @Sendable (Int) -> Void = { worker in
                for chunk in stride(from: worker, to: count, by: workers) { work(worker, chunk) }
            }
            let group = DispatchGroup()
            for worker in 1..<max(workers, 1) { helpers[worker - 1].async(group: group) { run(worker) } }
            run(0)
            group.wait()
        }
    }
}

/// Opens a payload stream fed in pieces of any size, a batch of chunks at a time, emitting
/// only authenticated plaintext.
final class PayloadOpener {
    private let ciphers: [AESGCMChunkCipher]
    private let workers: Int
    private let pending = ChunkAccumulator(capacity: PayloadStream.batch * PayloadStream.sealedChunkLength)
    /// Opened plaintext, in locked memory, erased on release.
    private let plain = SecureBytes(count: PayloadStream.batch * PayloadStream.chunkLength)
    private var counter: UInt64 = 0
    private let emit: (UnsafeRawBufferPointer) throws -> Void

    /// Opens a stream under `key` (32 bytes), on up to `workers` cores (fewer when the
    /// caller keeps the others busy).
    init(key: SecureBytes, workers: Int = PayloadStream.workers, emit: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        precondition(key.count == 32 && workers >= 1)
        self.workers = min(workers, PayloadStream.workers)
        ciphers = (0..<self.workers).map { _ in key.withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: false) } }
        self.emit = emit
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        try pending.append(bytes) { try open($0, final: false) }
    }

    /// Ends the stream: what remains ends with the final chunk.
    func finish() throws {
        guard pending.count >= PayloadStream.tagLength else { throw SecretStream.Failure.truncated }
        try pending.drain { try open($0, final: true) }
    }

    private func open(_ input: UnsafeRawBufferPointer, final: Bool) throws {
        let chunks = (input.count + PayloadStream.sealedChunkLength - 1) / PayloadStream.sealedChunkLength
        let lastLength = input.count - (chunks - 1) * PayloadStream.sealedChunkLength
        // A short chunk is the final one; a final chunk shorter than a tag is no chunk.
        guard lastLength >= PayloadStream.tagLength else { throw SecretStream.Failure.truncated }
        let first = counter
        var failures = [SecretStream.Failure?](repeating: nil, count: chunks)
        plain.withUnsafeMutableBytes { out in
            failures.withUnsafeMutableBufferPointer { failures in
                PayloadStream.spread(chunks, workers: workers) { worker, chunk in
                    let start = chunk * PayloadStream.sealedChunkLength
                    let size = chunk == chunks - 1 ? lastLength : PayloadStream.sealedChunkLength
                    let last = final && chunk == chunks - 1
                    let sealedChunk = UnsafeRawBufferPointer(rebasing: input[start..<start + size])
                    let target = UnsafeMutableRawBufferPointer(
                        rebasing: out[chunk * PayloadStream.chunkLength..<chunk * PayloadStream.chunkLength + size - PayloadStream.tagLength])
                    func opens(last: Bool) -> Bool {
                        PayloadStream.nonce(first + UInt64(chunk), last: last).withUnsafeBytes {
                            ciphers[worker].open(sealedChunk, nonce: $0, into: target)
                        }
                    }
                    guard !opens(last: last) else { return }
                    // Why it failed, for the message: a chunk that opens under the other
                    // flag was cut from, or appended to, a real stream.
                    failures[chunk] = opens(last: !last) ? (last ? .truncated : .trailingData) : .forged
                    if target.count > 0 { target.initializeMemory(as: UInt8.self, repeating: 0) }
                }
            }
        }
        if let failure = failures.lazy.compactMap({ $0 }).first { throw failure }
        counter += UInt64(chunks)
        try plain.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<input.count - chunks * PayloadStream.tagLength])) }
    }
}
