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

    /// Opens chunk `index` (16 to ``sealedChunkLength`` bytes) into `output` (its length −
    /// 16 bytes). On failure `output` is erased, and the error says why: a chunk that opens
    /// under the other last flag was cut from, or appended to, a real stream.
    static func open(_ chunk: UnsafeRawBufferPointer, index: UInt64, last: Bool, with cipher: AESGCMChunkCipher,
                     into output: UnsafeMutableRawBufferPointer) throws(SecretStream.Failure) {
        func opens(last: Bool) -> Bool { nonce(index, last: last).withUnsafeBytes { cipher.open(chunk, nonce: $0, into: output) } }
        guard !opens(last: last) else { return }
        let failure: SecretStream.Failure = opens(last: !last) ? (last ? .truncated : .trailingData) : .forged
        if output.count > 0 { output.initializeMemory(as: UInt8.self, repeating: 0) }
        throw failure
    }

    /// The lanes a stream is sealed or opened in: one a core, at most 8.
    static let lanes = max(1, min(8, ProcessInfo.processInfo.activeProcessorCount))

    /// Runs `body(lane)` on each of the ``lanes``, lane 0 on the caller's own thread, and
    /// returns when every lane has.
    ///
    /// The other lanes run on serial queues made for this call. Not `concurrentPerform`,
    /// nor a concurrent queue: both draw on dispatch's pool of as many threads as cores,
    /// which on Linux Swift concurrency shares, so a payload sealed from a task (a sync
    /// test, an async command) could hold every thread of it and stall every task in the
    /// process, network handlers among them, until dispatch noticed and added threads,
    /// seconds later. A serial queue gets a thread of its own when it has work. Nor queues
    /// shared by every call: a reshare's dealer reads what its recovery writes, in the same
    /// process, and with shared queues one's lane could wait behind the other's for ever.
    static func inLanes(_ body: (Int) -> Void) {
        // The caller waits for every helper before it returns, so nothing the body uses
        // outlives the call.
        withoutActuallyEscaping(body) { body in
            nonisolated(unsafe) let work = body
            let group = DispatchGroup()
            for lane in 1..<lanes { DispatchQueue(label: "vault.lane.\(lane)").async(group: group) { work(lane) } }
            work(0)
            group.wait()
        }
    }
}
