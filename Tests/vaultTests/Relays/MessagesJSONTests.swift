import Foundation
import Testing
import VaultCore
import VaultRelayProtocol

/// A relay writes its list answers by hand (`RelayAPI.Messages.json`), not through
/// `JSONEncoder`: the two must give the same bytes for every page, or clients that
/// verify the answer's signature over one would read the other.
@Suite struct MessagesJSONTests {
    @Test func aPageIsWrittenAsJSONEncoderWritesIt() {
        let page = RelayAPI.Messages(messages: [RelayAPI.MessageEntry(group: "00ff", id: "ab", size: 3, expires: 9)], next: 7, last: 7)
        #expect(String(decoding: page.json, as: UTF8.self) == #"{"last":7,"messages":[{"expires":9,"group":"00ff","id":"ab","size":3}],"next":7}"#)
        let empty = RelayAPI.Messages(messages: [], next: nil, last: nil)
        #expect(String(decoding: empty.json, as: UTF8.self) == #"{"messages":[]}"#)
    }

    @Test func everyPageMatchesJSONEncoder() {
        var random = SystemRandomNumberGenerator()
        let odd = ["a/b", "quote\"d", "back\\slash", "tab\there", "new\nline", "\u{1}", "ünïcode", "é/\u{7f}", ""]
        for round in 0..<500 {
            let count = round % 7 == 0 ? 0 : Int.random(in: 1...100, using: &random)
            let entries = (0..<count).map { _ in
                RelayAPI.MessageEntry(group: round % 5 == 0 ? odd.randomElement(using: &random)! : SecureRandom().bytes(16).hex,
                                      id: SecureRandom().bytes(16).hex,
                                      size: [0, UInt64.max, UInt64.random(in: 0...UInt64.max, using: &random)].randomElement(using: &random)!,
                                      expires: UInt64.random(in: 0...UInt64.max, using: &random))
            }
            let cursors: [Int64?] = [nil, 0, Int64.max, Int64.min, Int64.random(in: Int64.min...Int64.max, using: &random)]
            let page = RelayAPI.Messages(messages: entries, next: cursors.randomElement(using: &random)!, last: cursors.randomElement(using: &random)!)
            #expect(page.json == page.encodedByFoundation, "\(String(decoding: page.encodedByFoundation, as: UTF8.self))")
        }
    }

    @Test func hexIsTwoLowercaseDigitsAByte() {
        #expect([UInt8]().hex == "")
        #expect([0x00, 0x0f, 0xa0, 0xff].hex == "000fa0ff")
        let bytes = SecureRandom().bytes(300)
        #expect(bytes.hex == bytes.map { String(format: "%02x", $0) }.joined())
        #expect(bytes[7..<40].hex == Array(bytes[7..<40]).hex)
    }
}
