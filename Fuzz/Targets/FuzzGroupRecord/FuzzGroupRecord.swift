import FuzzSupport
@testable import VaultCore

/// A group record (FORMAT §16), as relays and members read it: a record that parses is the
/// one encoding of itself, and its relays' URLs read one way (RelayURL).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    if let record = try? GroupRecord(parsing: bytes) {
        fuzzCheck(record.encoded == bytes, "a record is kept as it came")
        fuzzCheck((2...GroupRecord.maximumRelays).contains(record.relays.count), "relay count")
        for relay in record.relays {
            fuzzCheck((try? RelayURL.check(relay.url)) == relay.url, "a record's URL is in its one form")
        }
        fuzzCheck(record.members.contains { $0.card == record.owner }, "the owner is a member")
    }
    // The same bytes as a typed URL: checked without crashing, and a URL taken is taken again.
    if let text = String(validating: bytes.prefix(4096), as: UTF8.self), let url = try? RelayURL.check(text) {
        fuzzCheck((try? RelayURL.check(url)) == url, "a checked URL checks again unchanged")
    }
    return 0
}
