import CSodium
import Foundation

/// Locked memory for small secrets: keys, key shares, chaining keys, DH outputs.
///
/// `sodium_malloc` gives every buffer pages of its own between guard pages: an `mmap`, two
/// `mprotect`s, an `mlock` and a `madvise` to allocate, as many calls again to free, and a
/// TLB shootdown on every other core each time. A recovery handles some forty 32-byte keys
/// per holder (Noise handshakes, one-time keys, signatures), and those system calls were
/// two fifths of its CPU time (`perf`, `vault-bench --lan`). Small secrets therefore share
/// regions that `sodium_malloc` hands out once and that stay mapped, locked and excluded
/// from core dumps for the life of the process: a slot is zeroed when it is released and
/// handed out again. The page-granular reasons for `sodium_malloc` hold for the region as
/// a whole: it is never unlocked (a neighbour's release cannot unlock a secret), and it has
/// guard pages at both ends. What a slot gives up is a guard page and a canary of its own;
/// every access to it goes through a buffer pointer of its own length (``SecureBytes``).
final class SecretArena: @unchecked Sendable {
    /// The largest secret a slot holds; larger ones get pages of their own.
    static let slotLength = 128
    /// Bytes asked of `sodium_malloc` when the free slots run out: 511 slots, so that with
    /// its 16-byte canary a region is 16 pages, locked whole under a 64 KiB lock limit.
    static let regionLength = (64 << 10) - slotLength

    /// The one arena of the process.
    static let shared = SecretArena()

    private let lock = NSLock()
    /// Released slots, zeroed, and slots never handed out.
    private var free: [UnsafeMutableRawPointer] = []

    /// A zero-filled slot of ``slotLength`` bytes.
    func allocate() -> UnsafeMutableRawPointer {
        lock.withLock {
            if free.isEmpty { grow() }
            return free.removeLast()
        }
    }

    /// Zeroes `slot` and takes it back.
    func release(_ slot: UnsafeMutableRawPointer) {
        sodium_memzero(slot, Self.slotLength)
        lock.withLock { free.append(slot) }
    }

    /// Adds a region's slots, lowest address on top. Regions are never returned: the arena
    /// keeps as many as the most small secrets ever alive at once needed.
    private func grow() {
        Sodium.ready
        guard let region = sodium_malloc(Self.regionLength) else { fatalError("out of memory for secret bytes") }
        sodium_memzero(region, Self.regionLength)
        for offset in stride(from: Self.regionLength - Self.slotLength, through: 0, by: -Self.slotLength) {
            free.append(region + offset)
        }
    }
}
