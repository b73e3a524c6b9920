import Hummingbird
import NIOCore

/// A request's context: Hummingbird's, the client's address for the rate limit (never
/// logged or stored), and its connection, which a waiting request watches.
struct RelayContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    let connection: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        connection = source.channel
    }

    /// The address as bytes for the rate limiter's table and per-address quotas.
    var addressKey: [UInt8] { AddressPrefix.key(remoteAddress) }
}

/// A client address as quotas count it: an IPv4 address whole, an IPv6 address by its /64.
/// One IPv6 host is commonly given a /64 and can use any address in it, so counting by
/// address would give it 2^64 allowances; a /64 is what one subscriber gets at the least.
enum AddressPrefix {
    /// 4 bytes for IPv4 (IPv4-mapped IPv6 included), 8 for IPv6, `unknown` otherwise.
    static func key(_ address: SocketAddress?) -> [UInt8] {
        switch address {
        case .v4(let v4):
            return withUnsafeBytes(of: v4.address.sin_addr.s_addr) { Array($0) }
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // ::ffff:a.b.c.d, as a dual-stack socket shows an IPv4 client.
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff { return Array(bytes[12..<16]) }
            return Array(bytes[0..<8])
        default:
            return Array("unknown".utf8)
        }
    }
}
