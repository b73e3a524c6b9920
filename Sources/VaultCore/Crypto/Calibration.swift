import CSodium
import Foundation

/// Reference figures for benchmarks: what libsodium alone achieves on this machine.
public enum Calibration {
    /// Raw `crypto_secretstream_xchacha20poly1305` throughput in MB/s (10^6 bytes), one core,
    /// 64 KiB chunks, over `megabytes` MB.
    public static func secretStreamMBps(megabytes: Int = 256) -> Double {
        Sodium.ready
        var state = crypto_secretstream_xchacha20poly1305_state()
        var header = [UInt8](repeating: 0, count: SecretStream.headerLength)
        let key = SecureRandom().bytes(32)
        crypto_secretstream_xchacha20poly1305_init_push(&state, &header, key)
        let chunk = [UInt8](repeating: 0x5A, count: SecretStream.chunkLength)
        var out = [UInt8](repeating: 0, count: SecretStream.sealedChunkLength)
        let chunks = megabytes * 1_000_000 / SecretStream.chunkLength
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<chunks {
            crypto_secretstream_xchacha20poly1305_push(&state, &out, nil, chunk, UInt64(chunk.count), nil, 0, 0)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Double(chunks * SecretStream.chunkLength) / 1e6 / seconds
    }

    /// BLAKE2b, as the piece commitments use it, in MB/s: one core, 64 KiB updates.
    public static func blake2bMBps(megabytes: Int = 256) -> Double {
        let hasher = BundleHeader.commitmentHasher()
        let chunk = [UInt8](repeating: 0x5A, count: SecretStream.chunkLength)
        let chunks = megabytes * 1_000_000 / chunk.count
        return rate(bytes: chunks * chunk.count) {
            chunk.withUnsafeBytes { for _ in 0..<chunks { hasher.update($0) } }
            _ = hasher.finish()
        }
    }

    /// The k-of-n dispersal in MB/s of data in: one core, every segment computed, none kept.
    public static func dispersalMBps(k: Int, n: Int, megabytes: Int = 256) -> Double {
        let encoder = Dispersal.Encoder(k: k, n: n) { _ in }
        let chunk = [UInt8](repeating: 0x5A, count: SecretStream.chunkLength)
        let chunks = megabytes * 1_000_000 / chunk.count
        return rate(bytes: chunks * chunk.count) {
            try? chunk.withUnsafeBytes { for _ in 0..<chunks { try encoder.write($0) } }
            try? encoder.finish()
        }
    }

    /// The fastest `vault share` this design allows on `cores` cores, in MB/s, from the
    /// one-core rates above. Per payload byte the dealer runs one secretstream pass and the
    /// dispersal, in order on one thread, and, for n/k bytes of pieces, BLAKE2b (the signed
    /// commitments), which spreads over the cores. Writing the pieces out is not counted.
    public static func shareCeilingMBps(k: Int, n: Int, cores: Int, stream: Double, blake2b: Double, dispersal: Double) -> Double {
        let serial = 1 / stream + 1 / dispersal
        // Pieces are hashed, not sealed again (format version 2).
        let pieces = Double(n) / Double(k) / blake2b
        return 1 / max(serial, (serial + pieces) / Double(max(cores, 1)))
    }

    private static func rate(bytes: Int, _ body: () -> Void) -> Double {
        Sodium.ready
        let start = DispatchTime.now().uptimeNanoseconds
        body()
        return Double(bytes) / 1e6 / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
}
