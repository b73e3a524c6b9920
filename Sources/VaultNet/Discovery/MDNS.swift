import Foundation
import NIOCore
import NIOPosix

/// mDNS/DNS-SD (RFC 6762, RFC 6763) for `_vault._tcp.local.`: a responder that makes
/// `vault serve` findable, and a browser that finds servers nearby.
public enum MDNS {
    static let group = try! SocketAddress(ipAddress: "224.0.0.251", port: 5353)
    static let port = 5353
    static let serviceType = ["_vault", "_tcp", "local"]

    /// Opens UDP 5353, shared with other responders (SO_REUSEADDR, SO_REUSEPORT), joined to
    /// 224.0.0.251 on every IPv4 interface that supports multicast.
    static func open(_ receive: @escaping @Sendable (AddressedEnvelope<ByteBuffer>) -> Void) async throws -> Channel {
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(ChannelOptions.socketOption(.init(rawValue: SO_REUSEPORT)), value: 1)
            .channelInitializer { $0.pipeline.addHandler(DatagramReceiver(receive)) }
            .bind(host: "0.0.0.0", port: port).get()
        let devices = try System.enumerateDevices().filter {
            $0.multicastSupported && $0.address.map { if case .v4 = $0 { true } else { false } } ?? false
        }
        guard let multicast = channel as? MulticastChannel, !devices.isEmpty else {
            try? await channel.close()
            throw NetError.unreachable("no IPv4 interface supports multicast")
        }
        for device in Dictionary(devices.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a }).values {
            try await multicast.joinGroup(group, device: device).get()
        }
        return channel
    }

    /// IPv4 addresses of the multicast-capable interfaces, to advertise.
    static func localAddresses() -> [[UInt8]] {
        ((try? System.enumerateDevices()) ?? []).compactMap { device -> [UInt8]? in
            guard device.multicastSupported, case .v4(let address)? = device.address else { return nil }
            return withUnsafeBytes(of: address.address.sin_addr.s_addr) { Array($0) }
        }
    }

    static func send(_ message: DNSMessage, on channel: Channel, to address: SocketAddress = group) async throws {
        let bytes = message.encoded()
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: buffer))
    }
}

private final class DatagramReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let receive: @Sendable (AddressedEnvelope<ByteBuffer>) -> Void

    init(_ receive: @escaping @Sendable (AddressedEnvelope<ByteBuffer>) -> Void) { self.receive = receive }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        receive(unwrapInboundIn(data))
    }
}

/// Answers for one `vault serve`: PTR, SRV, TXT and A records, announced on start and
/// withdrawn with TTL 0 on stop.
public final class MDNSResponder: @unchecked Sendable {
    private let instance: [String]
    private let host: [String]
    private let port: UInt16
    private let fingerprint: String
    private let addresses: [[UInt8]]
    private var channel: Channel?

    /// The first 8 hex digits of the fingerprint it announces.
    public var fingerprintPrefix: String { String(fingerprint.prefix(8)) }

    /// A responder for a server on `port` whose identity has `shortFingerprint`.
    public init(label: String, shortFingerprint: String, port: UInt16, addresses: [[UInt8]]? = nil) {
        // An instance name is one DNS label of at most 63 bytes: the label, cut, and the
        // fingerprint's start to tell two machines with the same label apart.
        let cut = String(decoding: Array(label.utf8.prefix(40)), as: UTF8.self).replacingOccurrences(of: ".", with: "-")
        instance = ["\(cut)-\(shortFingerprint.prefix(8))"] + MDNS.serviceType
        host = ["vault-\(shortFingerprint.prefix(12))", "local"]
        self.port = port
        fingerprint = shortFingerprint
        self.addresses = addresses ?? MDNS.localAddresses()
    }

    func records(ttl scale: UInt32) -> (answer: DNSMessage.Record, extra: [DNSMessage.Record]) {
        let ptr = DNSMessage.Record(name: MDNS.serviceType, data: .ptr(instance), ttl: 4500 * scale)
        var extra: [DNSMessage.Record] = [
            .init(name: instance, data: .srv(priority: 0, weight: 0, port: port, target: host), ttl: 120 * scale, cacheFlush: true),
            .init(name: instance, data: .txt([Array("v=1".utf8), Array("fp=\(fingerprint)".utf8)]), ttl: 4500 * scale, cacheFlush: true),
        ]
        extra += addresses.map { .init(name: host, data: .a($0), ttl: 120 * scale, cacheFlush: true) }
        return (ptr, extra)
    }

    /// Joins the group and announces twice, a second apart (RFC 6762 §8.3).
    public func start() async throws {
        let channel = try await MDNS.open { [weak self] envelope in self?.answer(envelope) }
        self.channel = channel
        let (answer, extra) = records(ttl: 1)
        var announcement = DNSMessage()
        announcement.isResponse = true
        announcement.answers = [answer] + extra
        try await MDNS.send(announcement, on: channel)
        Task {
            try? await Task.sleep(nanoseconds: 1_000_000_000)
            try? await MDNS.send(announcement, on: channel)
        }
    }

    /// Sends the goodbye (every record with TTL 0) and closes.
    public func stop() async {
        guard let channel else { return }
        let (answer, extra) = records(ttl: 0)
        var goodbye = DNSMessage()
        goodbye.isResponse = true
        goodbye.answers = [answer] + extra
        try? await MDNS.send(goodbye, on: channel)
        try? await channel.close()
        self.channel = nil
    }

    private func answer(_ envelope: AddressedEnvelope<ByteBuffer>) {
        guard let channel, let query = try? DNSMessage(parsing: Array(envelope.data.readableBytesView)), !query.isResponse else { return }
        let (ptr, extra) = records(ttl: 1)
        var answers: [DNSMessage.Record] = []
        var unicast = false
        for question in query.questions {
            let name = question.name.map { $0.lowercased() }
            let matches = { (record: DNSMessage.Record) in
                record.name.map { $0.lowercased() } == name && (question.type == 255 || question.type == record.data.type)
            }
            let found = ([ptr] + extra).filter(matches)
            if !found.isEmpty { unicast = unicast || question.unicastResponse }
            answers += found.filter { !answers.contains($0) }
        }
        guard !answers.isEmpty else { return }
        var response = DNSMessage()
        response.isResponse = true
        response.answers = answers
        // A PTR answer brings the records needed to reach the instance (RFC 6763 §12.1).
        if answers.contains(ptr) { response.additionals = extra.filter { !answers.contains($0) } }
        // A query from another port than 5353 is a legacy unicast query (RFC 6762 §6.7): the
        // answer goes back to it with its id and questions, as does a QU question's.
        let legacy = envelope.remoteAddress.port != MDNS.port
        if legacy {
            response.id = query.id
            response.questions = query.questions
        }
        let target = legacy || unicast ? envelope.remoteAddress : MDNS.group
        Task { try? await MDNS.send(response, on: channel, to: target) }
    }
}

/// A vault server found on the network.
public struct DiscoveredService: Sendable, Equatable {
    /// The DNS-SD instance name (first label).
    public let instance: String
    /// The host name it announced.
    public let host: String
    /// The TCP port.
    public let port: UInt16
    /// Its IPv4 addresses.
    public let addresses: [String]
    /// The `fp=` value of its TXT record, if any.
    public let fingerprint: String?
    /// The `v=` value of its TXT record, if any.
    public let version: String?
}

/// Finds `_vault._tcp.local.` services by asking on the group and listening for answers.
public enum MDNSBrowser {
    /// Listens up to `timeout` seconds; returns early once every fingerprint in `wanted`
    /// belongs to a resolved service (one with an address).
    public static func browse(timeout: Double, wanted: Set<String> = []) async throws -> [DiscoveredService] {
        let cache = RecordCache()
        let channel = try await MDNS.open { envelope in
            guard let message = try? DNSMessage(parsing: Array(envelope.data.readableBytesView)), message.isResponse else { return }
            cache.add(message.answers + message.additionals)
        }
        defer { channel.close(promise: nil) }
        var query = DNSMessage()
        query.questions = [.init(name: MDNS.serviceType, type: DNSMessage.RecordType.ptr.rawValue)]
        try await MDNS.send(query, on: channel)
        let start = Date()
        var askedAgain = false
        while Date().timeIntervalSince(start) < timeout {
            try await Task.sleep(nanoseconds: 10_000_000)
            let services = cache.services()
            let resolved = Set(services.filter { !$0.addresses.isEmpty }.compactMap(\.fingerprint))
            if !wanted.isEmpty && wanted.isSubset(of: resolved) { return services }
            // Half way, ask for whatever the answers left out (SRV, TXT, A of found instances).
            if !askedAgain && Date().timeIntervalSince(start) >= timeout / 2 {
                askedAgain = true
                let missing = cache.unresolvedQuestions()
                if !missing.isEmpty {
                    var followUp = DNSMessage()
                    followUp.questions = missing
                    try await MDNS.send(followUp, on: channel)
                }
            }
        }
        return cache.services()
    }
}

/// What the browser heard, keyed by lowercased name; goodbyes (TTL 0) remove records.
private final class RecordCache: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [DNSMessage.Record] = []

    func add(_ incoming: [DNSMessage.Record]) {
        lock.withLock {
            for record in incoming {
                records.removeAll { $0.name.map { $0.lowercased() } == record.name.map { $0.lowercased() } && $0.data == record.data }
                if record.ttl > 0 { records.append(record) }
            }
        }
    }

    private func key(_ name: [String]) -> [String] { name.map { $0.lowercased() } }

    private func instances() -> [[String]] {
        records.compactMap { record -> [String]? in
            guard key(record.name) == MDNS.serviceType, case .ptr(let target) = record.data else { return nil }
            return target
        }
    }

    func unresolvedQuestions() -> [DNSMessage.Question] {
        lock.withLock {
            instances().flatMap { instance -> [DNSMessage.Question] in
                let own = records.filter { key($0.name) == key(instance) }
                var questions: [DNSMessage.Question] = []
                if !own.contains(where: { $0.data.type == 33 }) { questions.append(.init(name: instance, type: 33)) }
                if !own.contains(where: { $0.data.type == 16 }) { questions.append(.init(name: instance, type: 16)) }
                for case .srv(_, _, _, let target) in own.map(\.data) where !records.contains(where: { key($0.name) == key(target) && $0.data.type == 1 }) {
                    questions.append(.init(name: target, type: 1))
                }
                return questions
            }
        }
    }

    func services() -> [DiscoveredService] {
        lock.withLock {
            instances().compactMap { instance -> DiscoveredService? in
                let own = records.filter { key($0.name) == key(instance) }
                guard case .srv(_, _, let port, let target)? = own.first(where: { $0.data.type == 33 })?.data else { return nil }
                var txt: [String: String] = [:]
                if case .txt(let strings)? = own.first(where: { $0.data.type == 16 })?.data {
                    for string in strings {
                        let text = String(decoding: string, as: UTF8.self)
                        if let equals = text.firstIndex(of: "=") { txt[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
                    }
                }
                let addresses = records.compactMap { record -> String? in
                    guard key(record.name) == key(target), case .a(let bytes) = record.data else { return nil }
                    return bytes.map(String.init).joined(separator: ".")
                }
                return DiscoveredService(instance: instance[0], host: target.joined(separator: "."), port: port,
                                         addresses: addresses, fingerprint: txt["fp"], version: txt["v"])
            }
        }
    }
}
