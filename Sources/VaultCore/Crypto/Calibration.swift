import CSodium
import Foundation

/// Reference figures for benchmarks: what the primitives alone achieve on this machine.
public enum Calibration {
    /// Raw `crypto_secretstream_xchacha20poly1305` throughput in MB/s (10^6 bytes), one core,
    /// 64 KiB chunks, over `megabytes` MB: the items' and the password layer's stream.
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

    /// The payload stream's AES-256-GCM (FORMAT §7) in MB/s: one core, 64 KiB chunks.
    public static func payloadCipherMBps(megabytes: Int = 256) -> Double {
        let cipher = SecureRandom().secureBytes(32).withUnsafeBytes { AESGCMChunkCipher(key: $0, sealing: true) }
        let chunk = [UInt8](repeating: 0x5A, count: PayloadStream.chunkLength)
        var out = [UInt8](repeating: 0, count: PayloadStream.sealedChunkLength)
        let chunks = megabytes * 1_000_000 / chunk.count
        return rate(bytes: chunks * chunk.count) {
            chunk.withUnsafeBytes { plain in
                out.withUnsafeMutableBytes { out in
                    for index in 0..<chunks {
                        PayloadStream.nonce(UInt64(index), last: false).withUnsafeBytes { cipher.seal(plain, nonce: $0, into: out) }
                    }
                }
            }
        }
    }

    /// SHA-256, as the piece commitments use it, in MB/s: one core, 64 KiB updates.
    public static func commitmentMBps(megabytes: Int = 256) -> Double {
        let hasher = PieceHasher(threshold: 3)
        let chunk = [UInt8](repeating: 0x5A, count: PayloadStream.chunkLength)
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
    /// one-core rates above. Every core runs the whole pipeline on chunks of its own
    /// (``DealLanes``): per payload byte, the payload cipher, the dispersal and, for n/k
    /// bytes of pieces, the commitment hash. Reading the input and writing the pieces out
    /// are not counted.
    public static func shareCeilingMBps(k: Int, n: Int, cores: Int, cipher: Double, hash: Double, dispersal: Double) -> Double {
        let perByte = 1 / cipher + 1 / dispersal + Double(n) / Double(k) / hash
        return Double(max(cores, 1)) / perByte
    }

    private static func rate(bytes: Int, _ body: () -> Void) -> Double {
        Sodium.ready
        let start = DispatchTime.now().uptimeNanoseconds
        body()
        return Double(bytes) / 1e6 / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
}
