import Dispatch
import Foundation
import Glibc
import VaultCore
import VaultRelayClient

/// Wakes a watch when another process writes the keystore (an object put by `vault app put`,
/// changes applied by `vault sync`, items opened by `vault unlock`): inotify on the home
/// directory, for the database and its write-ahead log. Every commit touches the log, so
/// no write goes unnoticed, and nothing is read until one happens.
final class KeystoreWatch: @unchecked Sendable {
    private let descriptor: Int32
    private let source: DispatchSourceRead

    /// Signals `wakeup` whenever the keystore of `home` is written; nil when inotify is
    /// unavailable (the watch then hears of local writes at its next pass).
    init?(home: VaultHome, wakeup: Wakeup) {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        guard inotify_add_watch(descriptor, home.directory, UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE)) >= 0 else {
            close(descriptor)
            return nil
        }
        let names: Set<String> = ["vault.sqlite", "vault.sqlite-wal"]
        let descriptor = descriptor
        source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: DispatchQueue(label: "vault.keystore-watch"))
        source.setEventHandler {
            // Drain every queued event; one wake-up for all of them.
            var buffer = [UInt8](repeating: 0, count: 4096)
            var touched = false
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                var offset = 0
                while offset + MemoryLayout<inotify_event>.size <= count {
                    let (length, name) = buffer.withUnsafeBytes { raw -> (Int, String) in
                        let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                        let start = offset + MemoryLayout<inotify_event>.size
                        let bytes = raw[start..<min(count, start + Int(event.len))].prefix { $0 != 0 }
                        return (Int(event.len), String(decoding: bytes, as: UTF8.self))
                    }
                    if names.contains(name) { touched = true }
                    offset += MemoryLayout<inotify_event>.size + length
                }
            }
            if touched { wakeup.signal() }
        }
        source.setCancelHandler { close(descriptor) }
        source.resume()
    }

    deinit { source.cancel() }
}
