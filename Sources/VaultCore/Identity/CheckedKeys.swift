import Synchronization

/// The public keys this process has already found usable, so a card read again is not
/// checked again.
///
/// Checking a card costs two curve operations (an X25519 product for small order, 47 µs
/// here, and Ed25519's subgroup check, 71 µs), and a group record names a card for every
/// relay and member: a record of 30 relays took 4 ms to parse, and a receive parses each of
/// its groups' records once for every relay it asks. The check is a function of the bytes
/// alone, so a key found usable once is usable every time; only keys that passed are kept,
/// so a bad key is refused every time it comes.
enum CheckedKeys {
    /// Keys kept; past it the set starts again empty (keys are 65 bytes: about 0.5 MiB).
    static let capacity = 4096

    private static let usable = Mutex<Set<[UInt8]>>([])

    /// Whether `encoded`, a card's binary form, was found usable before.
    static func contains(_ encoded: [UInt8]) -> Bool {
        usable.withLock { $0.contains(encoded) }
    }

    /// Keeps `encoded`, found usable.
    static func insert(_ encoded: [UInt8]) {
        usable.withLock { keys in
            if keys.count >= capacity { keys.removeAll(keepingCapacity: true) }
            keys.insert(encoded)
        }
    }
}
