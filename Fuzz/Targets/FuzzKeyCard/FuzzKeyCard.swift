import FuzzSupport
@testable import VaultCore

/// Key card text (and the QR code's `CARD#label` form): parse, serialize, parse again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    guard let text = String(validating: bytes, as: UTF8.self) else { return 0 }
    if let card = try? KeyCard(text: text) {
        fuzzCheck((try? KeyCard(text: card.text)) == card, "card text round trip")
        fuzzCheck((try? KeyCard(encoded: card.encoded)) == card, "card binary round trip")
    }
    if let offer = try? CardOffer(text: text) {
        let again = try? CardOffer(text: offer.qrPayload)
        fuzzCheck(again?.card == offer.card && again?.suggestedLabel == offer.suggestedLabel, "offer round trip")
    }
    _ = try? KeyCard(encoded: bytes)
    return 0
}
