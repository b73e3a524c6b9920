/// DNS messages (RFC 1035) as mDNS (RFC 6762) and DNS-SD (RFC 6763) use them: the record
/// types vault needs, and a strict, bounded parser for whatever arrives on port 5353.
struct DNSMessage: Equatable {
    enum RecordType: UInt16 {
        case a = 1, ptr = 12, txt = 16, aaaa = 28, srv = 33, any = 255
    }

    struct Question: Equatable {
        var name: [String]
        var type: UInt16
        /// The top bit of the class: "QU", the asker wants a unicast answer (RFC 6762 §5.4).
        var unicastResponse: Bool = false
    }

    enum RecordData: Equatable {
        case a([UInt8])
        case aaaa([UInt8])
        case ptr([String])
        case srv(priority: UInt16, weight: UInt16, port: UInt16, target: [String])
        case txt([[UInt8]])
        /// A type vault does not read; kept as raw bytes.
        case other(type: UInt16, [UInt8])

        var type: UInt16 {
            switch self {
            case .a: 1
            case .aaaa: 28
            case .ptr: 12
            case .srv: 33
            case .txt: 16
            case .other(let type, _): type
            }
        }
    }

    struct Record: Equatable {
        var name: [String]
        var data: RecordData
        var ttl: UInt32
        /// The top bit of the class: "cache flush", the record is unique (RFC 6762 §10.2).
        var cacheFlush: Bool = false
    }

    var id: UInt16 = 0
    var isResponse = false
    var questions: [Question] = []
    var answers: [Record] = []
    var authorities: [Record] = []
    var additionals: [Record] = []

    /// Why a message was refused.
    enum Failure: Error, Equatable, CustomStringConvertible {
        case truncated
        case tooManyRecords
        case badName(String)
        case badRecord(String)
        case trailingBytes

        /// In words, for a log line.
        var description: String {
            switch self {
            case .truncated: "the DNS message is truncated"
            case .tooManyRecords: "the DNS message has too many records"
            case .badName(let detail): "the DNS message has a bad name: \(detail)"
            case .badRecord(let detail): "the DNS message has a bad record: \(detail)"
            case .trailingBytes: "bytes follow the DNS message"
            }
        }
    }

    static let maximumLength = 9000
    static let maximumRecords = 256
    static let classIN: UInt16 = 1

    // MARK: Encoding (no compression: messages vault sends are small)

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        func u16(_ v: UInt16) { out += [UInt8(v >> 8), UInt8(v & 0xff)] }
        func u32(_ v: UInt32) { u16(UInt16(v >> 16)); u16(UInt16(v & 0xffff)) }
        func name(_ labels: [String]) {
            for label in labels {
                let bytes = Array(label.utf8)
                out.append(UInt8(bytes.count))
                out += bytes
            }
            out.append(0)
        }
        u16(id)
        u16(isResponse ? 0x8400 : 0)  // response, authoritative answer
        u16(UInt16(questions.count))
        u16(UInt16(answers.count))
        u16(UInt16(authorities.count))
        u16(UInt16(additionals.count))
        for question in questions {
            name(question.name)
            u16(question.type)
            u16(Self.classIN | (question.unicastResponse ? 0x8000 : 0))
        }
        for record in answers + authorities + additionals {
            name(record.name)
            u16(record.data.type)
            u16(Self.classIN | (record.cacheFlush ? 0x8000 : 0))
            u32(record.ttl)
            let start = out.count
            u16(0)
            switch record.data {
            case .a(let bytes), .aaaa(let bytes), .other(_, let bytes): out += bytes
            case .ptr(let target): name(target)
            case .srv(let priority, let weight, let port, let target):
                u16(priority); u16(weight); u16(port); name(target)
            case .txt(let strings):
                // RFC 6763 §6.1: a TXT record always has at least one string.
                for string in strings.isEmpty ? [[]] : strings {
                    out.append(UInt8(string.count))
                    out += string
                }
            }
            let length = out.count - start - 2
            out[start] = UInt8(length >> 8)
            out[start + 1] = UInt8(length & 0xff)
        }
        return out
    }

    // MARK: Parsing

    init() {}

    init(parsing bytes: [UInt8]) throws(Failure) {
        guard bytes.count <= Self.maximumLength else { throw .truncated }
        var reader = DNSReader(bytes: bytes)
        id = try reader.u16()
        let flags = try reader.u16()
        isResponse = flags & 0x8000 != 0
        let counts = try (0..<4).map { _ throws(Failure) in Int(try reader.u16()) }
        guard counts.reduce(0, +) <= Self.maximumRecords else { throw .tooManyRecords }
        for _ in 0..<counts[0] {
            let name = try reader.name()
            let type = try reader.u16()
            let klass = try reader.u16()
            questions.append(Question(name: name, type: type, unicastResponse: klass & 0x8000 != 0))
        }
        answers = try (0..<counts[1]).map { _ throws(Failure) in try reader.record() }
        authorities = try (0..<counts[2]).map { _ throws(Failure) in try reader.record() }
        additionals = try (0..<counts[3]).map { _ throws(Failure) in try reader.record() }
        guard reader.offset == bytes.count else { throw .trailingBytes }
    }
}

/// Reads DNS wire data with every length checked and compression bounded.
private struct DNSReader {
    let bytes: [UInt8]
    var offset = 0

    mutating func u8() throws(DNSMessage.Failure) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() throws(DNSMessage.Failure) -> UInt16 { UInt16(try u8()) << 8 | UInt16(try u8()) }
    mutating func u32() throws(DNSMessage.Failure) -> UInt32 { UInt32(try u16()) << 16 | UInt32(try u16()) }

    mutating func raw(_ count: Int) throws(DNSMessage.Failure) -> [UInt8] {
        guard count >= 0, offset + count <= bytes.count else { throw .truncated }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// A name, following compression pointers. A pointer must point strictly backwards
    /// from where the name started, which rules out loops; a name has at most 255 bytes.
    mutating func name() throws(DNSMessage.Failure) -> [String] {
        var labels: [String] = []
        var position = offset
        var floor = offset
        var jumped = false
        var total = 0
        while true {
            guard position < bytes.count else { throw .truncated }
            let length = Int(bytes[position])
            switch length & 0xC0 {
            case 0xC0:
                guard position + 1 < bytes.count else { throw .truncated }
                let target = (length & 0x3F) << 8 | Int(bytes[position + 1])
                guard target < floor else { throw .badName("a compression pointer that does not point backwards") }
                if !jumped { offset = position + 2 }
                jumped = true
                floor = target
                position = target
            case 0x00:
                if length == 0 {
                    if !jumped { offset = position + 1 }
                    return labels
                }
                guard position + 1 + length <= bytes.count else { throw .truncated }
                total += length + 1
                guard total <= 255 else { throw .badName("a name longer than 255 bytes") }
                let label = bytes[position + 1..<position + 1 + length]
                guard let text = String(validating: label, as: UTF8.self) else { throw .badName("a label that is not UTF-8") }
                labels.append(text)
                position += 1 + length
            default:
                throw .badName("a reserved label type")
            }
        }
    }

    mutating func record() throws(DNSMessage.Failure) -> DNSMessage.Record {
        let owner = try name()
        let type = try u16()
        let klass = try u16()
        let ttl = try u32()
        let length = Int(try u16())
        guard offset + length <= bytes.count else { throw .truncated }
        let end = offset + length
        let data: DNSMessage.RecordData
        switch type {
        case 1:
            guard length == 4 else { throw .badRecord("an A record of \(length) bytes") }
            data = .a(try raw(4))
        case 28:
            guard length == 16 else { throw .badRecord("an AAAA record of \(length) bytes") }
            data = .aaaa(try raw(16))
        case 12:
            data = .ptr(try name())
        case 33:
            data = .srv(priority: try u16(), weight: try u16(), port: try u16(), target: try name())
        case 16:
            var strings: [[UInt8]] = []
            while offset < end { strings.append(try raw(Int(try u8()))) }
            // RFC 6763 §6.1: empty TXT data means one empty string, as it is written back.
            data = .txt(strings.isEmpty ? [[]] : strings)
        default:
            data = .other(type: type, try raw(length))
        }
        guard offset == end else { throw .badRecord("record data of the wrong length") }
        return DNSMessage.Record(name: owner, data: data, ttl: ttl, cacheFlush: klass & 0x8000 != 0)
    }
}
