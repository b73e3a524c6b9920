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
        router.get("v1/messages") { request, context in
            await relay.signed(request, context) { caller in try await relay.listMessages(request, caller: caller) }
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
        return router
    }

    /// A path's id: 32 lowercase hex digits.
    private static func id(_ context: RelayContext, _ name: String) throws(RelayFailure) -> [UInt8] {
        guard let text = context.parameters.get(name), let bytes = [UInt8](hexID: text) else {
            throw .malformed("the \(name) id in the path is not 32 lowercase hex digits")
        }
        return bytes
    }
}
