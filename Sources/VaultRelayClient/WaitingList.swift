import Foundation
import NIOCore
import VaultRelayProtocol

extension RelayConnection {
    /// One page (up to 500) of what waits for this identity on the relay after `cursor`,
    /// in the order the relay stored it (`GET /v1/messages`), with the cursor of the last
    /// message listed: pass it as `cursor` next time to hear only of what came since. It is
    /// nil when nothing is listed; keep the cursor you had then.
    ///
    /// With `wait` (seconds, in ``RelayAPI/waits``), a relay with nothing to list holds the
    /// request until a message for this identity is stored there or the time is up, so a
    /// client watching its relays hears of a message at once without polling
    /// (Docs/RELAY.md, "Waiting for messages"). An empty list that comes before the time is
    /// up means the relay could not hold one more request (too many from this identity, or
    /// in all): wait a while before asking again.
    ///
    /// Throws ``RelayError`` when the relay cannot be reached, refuses, or answers without
    /// its pinned card's signature.
    public func messages(after cursor: Int64 = 0, wait: Int? = nil) async throws -> (messages: [RelayAPI.MessageEntry], last: Int64?) {
        precondition(cursor >= 0 && wait.map(RelayAPI.waits.contains) ?? true, "a cursor is not negative, and a wait is 1 to 30 s")
        var path = "/v1/messages?limit=\(RelayAPI.maximumPage)&after=\(cursor)"
        if let wait { path += "&wait=\(wait)" }
        // The relay may be silent for all of the wait; the small deadline is the margin.
        let deadline = RelayHTTPClient.smallDeadline + .seconds(Int64(wait ?? 0))
        let (status, body) = try await send(.GET, path, deadline: deadline, waiting: wait != nil)
        guard status == 200 else { throw Self.failure(relay: name, status: status, body: body) }
        guard let page = try? JSONDecoder().decode(RelayAPI.Messages.self, from: Data(body)), page.messages.count <= RelayAPI.maximumPage,
              page.last.map({ $0 > cursor && !page.messages.isEmpty }) ?? true else {
            throw RelayError(relay: name, code: "malformed", words: "its list of messages is not valid")
        }
        // A relay from before cursors were given (and waits held) would have a watcher ask
        // again at once, forever.
        guard page.messages.isEmpty || page.last != nil else {
            throw RelayError(relay: name, code: "malformed", words: "its list of messages has no cursor (a relay older than this vault?)")
        }
        return (page.messages, page.last)
    }
}
