import Testing
@testable import VaultNet

@Suite struct DNSMessageTests {
    static let service = ["_vault", "_tcp", "local"]

    static func response() -> DNSMessage {
        var message = DNSMessage()
        message.isResponse = true
        let instance = ["bob-1a2b3c4d5e6f7a8b"] + service
        message.answers = [.init(name: service, data: .ptr(instance), ttl: 4500)]
        message.additionals = [
            .init(name: instance, data: .srv(priority: 0, weight: 0, port: 7733, target: ["vault-1a2b", "local"]), ttl: 120, cacheFlush: true),
            .init(name: instance, data: .txt([Array("v=1".utf8), Array("fp=1a2b3c4d5e6f7a8b".utf8)]), ttl: 4500, cacheFlush: true),
            .init(name: ["vault-1a2b", "local"], data: .a([127, 0, 0, 1]), ttl: 120, cacheFlush: true),
        ]
        return message
    }

    /// Found by FuzzDNS (Fuzz/Corpus/FuzzDNS/regression-empty-txt.bin): empty TXT data was
    /// parsed as no strings but written back as one empty string.
    @Test func emptyTXTDataIsOneEmptyString() throws {
        let owner: [UInt8] = [3] + Array("bob".utf8) + [5] + Array("local".utf8) + [0]
        let bytes: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0] + owner + [0, 16, 0x80, 1, 0, 0, 0x11, 0x94, 0, 0]
        let message = try DNSMessage(parsing: bytes)
        #expect(message.answers.first?.data == .txt([[]]))
        #expect(try DNSMessage(parsing: message.encoded()) == message)
    }

    @Test func roundTrips() throws {
        let message = Self.response()
        #expect(try DNSMessage(parsing: message.encoded()) == message)
        var query = DNSMessage()
        query.questions = [.init(name: Self.service, type: 12, unicastResponse: true)]
        #expect(try DNSMessage(parsing: query.encoded()) == query)
    }

    @Test func followsBackwardCompressionPointers() throws {
        // Header with one answer: "local" at offset 12 (in the question), then a PTR whose
        // owner is "_tcp" + pointer to it.
        var bytes: [UInt8] = [0, 0, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0]
        bytes += [5] + Array("local".utf8) + [0, 0, 12, 0, 1]
        bytes += [4] + Array("_tcp".utf8) + [0xC0, 12]                       // owner: _tcp.local
        bytes += [0, 12, 0, 1, 0, 0, 0, 10, 0, 2, 0xC0, 12]                   // PTR → local
        let message = try DNSMessage(parsing: bytes)
        #expect(message.answers[0].name == ["_tcp", "local"])
        #expect(message.answers[0].data == .ptr(["local"]))
    }

    @Test func refusesPointerLoopsAndForwardPointers() {
        // A question whose name is a pointer to itself.
        let loop: [UInt8] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 12, 0, 1]
        #expect(throws: DNSMessage.Failure.badName("a compression pointer that does not point backwards")) {
            try DNSMessage(parsing: loop)
        }
        let forward: [UInt8] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 20, 0, 12, 0, 1, 0, 0, 0]
        #expect(throws: DNSMessage.Failure.self) { try DNSMessage(parsing: forward) }
    }

    @Test func refusesTruncatedOversizedAndTrailingData() {
        let bytes = Self.response().encoded()
        for cut in stride(from: 0, to: bytes.count, by: 7) {
            #expect(throws: DNSMessage.Failure.self) { try DNSMessage(parsing: Array(bytes[0..<cut])) }
        }
        #expect(throws: DNSMessage.Failure.trailingBytes) { try DNSMessage(parsing: bytes + [0]) }
        var counts = bytes
        counts[4] = 0xFF
        #expect(throws: DNSMessage.Failure.tooManyRecords) { try DNSMessage(parsing: counts) }
        let long = [String](repeating: String(repeating: "a", count: 63), count: 5)
        var query = DNSMessage()
        query.questions = [.init(name: long, type: 12)]
        #expect(throws: DNSMessage.Failure.badName("a name longer than 255 bytes")) { try DNSMessage(parsing: query.encoded()) }
        var badA = Self.response()
        badA.additionals[2].data = .other(type: 1, [127, 0, 0])
        #expect(throws: DNSMessage.Failure.badRecord("an A record of 3 bytes")) { try DNSMessage(parsing: badA.encoded()) }
    }

    @Test func keepsUnknownTypesAndQUAndCacheFlushBits() throws {
        var message = DNSMessage()
        message.isResponse = true
        message.answers = [.init(name: ["x", "local"], data: .other(type: 47, [1, 2, 3]), ttl: 0, cacheFlush: true)]
        let parsed = try DNSMessage(parsing: message.encoded())
        #expect(parsed.answers[0].data == .other(type: 47, [1, 2, 3]) && parsed.answers[0].cacheFlush)
        #expect(parsed.answers[0].ttl == 0)
    }
}
