import Foundation
import Hummingbird
import VaultCore
import VaultRelayProtocol

/// The relay's API (Docs/RELAY.md, "API"): every path but `/card` takes signed requests.
enum RelayRoutes {
    static func router(for relay: Relay) -> Router<RelayContext> {
        let router = Router(context: RelayContext.self)

        router.get("card") { request, _ -> Response in
            // Unsigned, for first contact: its answer is signed over the caller's nonce, so it
            // proves the card's key is here now. Clients confirm the card by fingerprint.
            let nonce = request.headers[Relay.field(RelayHeader.nonce)].flatMap { Base64URL.decode($0, length: RequestSignature.nonceLength) }
            return relay.answer(json: RelayAPI.Card(card: relay.identity.card.text, time: Relay.now(),
                                                    maxMessage: relay.configuration.maximumMessage, maxTTL: relay.configuration.maximumTTL),
                                nonce: nonce)
        }

        router.get("v1/groups") { request, context in
            await relay.signed(request, context) { caller in try await relay.listGroups(caller: caller) }
        }
        router.put("v1/groups/:group") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.putGroup(request, group: try id(context, "group"), caller: caller)
            }
        }
        router.get("v1/groups/:group") { request, context in
            await relay.signed(request, context) { caller in try await relay.getGroup(group: try id(context, "group"), caller: caller) }
        }
        router.get("v1/invitations") { request, context in
            await relay.signed(request, context) { caller in try await relay.listInvitations(caller: caller) }
        }
        router.post("v1/groups/:group/accept") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.answerGroup(request, group: try id(context, "group"), accepted: true, caller: caller)
            }
        }
        router.post("v1/groups/:group/decline") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.answerGroup(request, group: try id(context, "group"), accepted: false, caller: caller)
            }
        }
        router.post("v1/owners") { request, context in
            await relay.signed(request, context) { caller in try await relay.redeemInvite(request, caller: caller) }
        }
        router.get("v1/messages") { request, context in
            await relay.signed(request, context) { caller in try await relay.listMessages(request, context, caller: caller) }
        }
        router.put("v1/groups/:group/messages/:message") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.putMessage(request, group: try id(context, "group"), id: try id(context, "message"), caller: caller)
            }
        }
        router.get("v1/groups/:group/messages/:message") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.getMessage(group: try id(context, "group"), id: try id(context, "message"), caller: caller)
            }
        }
        router.delete("v1/groups/:group/messages/:message") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.deleteMessage(group: try id(context, "group"), id: try id(context, "message"), caller: caller)
            }
        }
        router.post("v1/groups/:group/messages/:message/confirm") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.confirmMessage(group: try id(context, "group"), id: try id(context, "message"), caller: caller)
            }
        }
        router.get("v1/groups/:group/messages/:message/receipts") { request, context in
            await relay.signed(request, context) { caller in
                try await relay.receipts(group: try id(context, "group"), id: try id(context, "message"), caller: caller)
            }
        }
        links(router, relay)
        return router
    }

    /// Share links (Docs/LINKS.md, "API") and the page that opens them.
    private static func links(_ router: Router<RelayContext>, _ relay: Relay) {
        router.post("links") { request, context in
            await relay.unsigned(request, context) { try await relay.createLink(request, context) }
        }
        router.get("links/:link/status") { request, context in
            await relay.unsigned(request, context) { try await relay.linkStatus(id: try linkID(context), nonce: nonce(request)) }
        }
        router.post("links/:link/claim") { request, context in
            await relay.unsigned(request, context) { try await relay.claimLink(request, id: try linkID(context), nonce: nonce(request)) }
        }
        router.get("links/:link") { request, context in
            await relay.unsigned(request, context) { try await relay.linkInfo(request, id: try linkID(context), nonce: nonce(request)) }
        }
        router.delete("links/:link") { request, context in
            await relay.unsigned(request, context) { try await relay.deleteLink(request, id: try linkID(context), nonce: nonce(request)) }
        }
        router.get("s/:link") { request, context in
            await relay.unsigned(request, context) { LinkPage.page }
        }
        router.get("assets/link.js") { request, context in
            await relay.unsigned(request, context) { LinkPage.script }
        }
        router.get("assets/link.css") { request, context in
            await relay.unsigned(request, context) { LinkPage.style }
        }
    }

    private static func nonce(_ request: Request) -> [UInt8]? {
        request.headers[Relay.field(RelayHeader.nonce)].flatMap { Base64URL.decode($0, length: RequestSignature.nonceLength) }
    }

    /// A path's link id: 16 bytes of base64url.
    private static func linkID(_ context: RelayContext) throws(RelayFailure) -> [UInt8] {
        guard let text = context.parameters.get("link"), let bytes = Base64URL.decode(text, length: LinkAPI.idLength) else {
            throw .gone()
        }
        return bytes
    }

    /// A path's id: 32 lowercase hex digits.
    private static func id(_ context: RelayContext, _ name: String) throws(RelayFailure) -> [UInt8] {
        guard let text = context.parameters.get(name), let bytes = [UInt8](hexID: text) else {
            throw .malformed("the \(name) id in the path is not 32 lowercase hex digits")
        }
        return bytes
    }
}
