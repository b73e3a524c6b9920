import AsyncHTTPClient
import NIOCore

/// The one HTTP client every relay connection shares.
///
/// Not `HTTPClient.shared`: its pool retries a refused connection until the request's
/// deadline, so a relay that is down held `vault send` for minutes. A relay that does not
/// answer should be reported at once and the others used; k of n is there for that.
enum RelayHTTPClient {
    static let shared: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        // A relay that stops sending for this long is stalled, whatever the body's size.
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        // A relay is addressed by its pinned URL; it has no business sending us elsewhere.
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// The deadline of a request with a small body (`/card`, groups, lists, confirms).
    static let smallDeadline = TimeAmount.seconds(30)
    /// The deadline of a streamed message share: generous, as the read timeout above
    /// already catches a relay that stalls.
    static let streamDeadline = TimeAmount.hours(1)
}
