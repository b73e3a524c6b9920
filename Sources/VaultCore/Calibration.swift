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
}
