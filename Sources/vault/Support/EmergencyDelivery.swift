import ArgumentParser
import Foundation
import VaultCore
import VaultHolders
import VaultNet
import VaultRelayClient

/// `--emergency LABEL:WAIT` (`vault share`): who may recover the secret alone, after how long.
struct EmergencyChoice {
    let label: String
    let wait: UInt64

    init(_ text: String) throws {
        guard let colon = text.lastIndex(of: ":"), colon != text.startIndex else {
            throw ValidationError("--emergency takes LABEL:WAIT, for example dave:7d")
        }
        label = String(text[..<colon])
        wait = try EmergencyChoice.wait(String(text[text.index(after: colon)...]), option: "--emergency")
    }

    /// A wait as an option writes it: 7d, 12h, 90s.
    static func option(_ seconds: UInt64) -> String {
        for (size, unit) in [(UInt64(86400), "d"), (3600, "h"), (60, "m")] where seconds % size == 0 { return "\(seconds / size)\(unit)" }
        return "\(seconds)s"
    }

    /// A wait as the options take it: 30s, 12h, 7d; from a second to 90 days.
    static func wait(_ text: String, option: String) throws -> UInt64 {
        guard let seconds = DurationText.seconds(text), (EmergencyRule.shortestWait...EmergencyRule.longestWait).contains(seconds) else {
            throw ValidationError("\(option) takes a wait of \(DurationText.text(EmergencyRule.shortestWait)) to "
                                  + "\(DurationText.text(EmergencyRule.longestWait)) (for example 7d, 12h or 30s)")
        }
        return seconds
    }
}

/// A dealer's emergency rule, set and brought to the secret's holders: over the LAN where a
/// holder's serve answers (the way `vault share` delivers), else through the relays of a
/// group the dealer and that holder share. Each holder's person is asked to take the role.
enum EmergencyDelivery {
    /// Makes the rule of `secret` (dealt here) naming `trustee` after `wait` seconds, or with
    /// nil turning it off; keeps it and delivers it to `holders`. Returns the holders it did
    /// not reach.
    static func set(trustee: Peer?, wait: UInt64, secret: StoredSecret, holders: [Peer], addresses: [String: PeerAddress], route: DeliveryRoute,
                    keystore: Keystore, identity: Identity) async throws -> [String] {
        let header = secret.header
        let rule = try EmergencyRule.make(secretID: header.secretID, dealer: identity, trustee: trustee?.card, wait: wait,
                                          issued: try keystore.nextRuleIssued(secretRow: header.rowID))
        try keystore.setEmergencyRule(rule, role: .dealt)
        if let trustee {
            Terminal.standardError("emergency access to \(header.secretIDHex.prefix(16)): '\(trustee.label)' may recover it "
                + "\(DurationText.text(wait)) after asking, unless you deny ('vault requests' shows the request, 'vault deny ID' stops it)")
            if wait < 86_400 {
                Terminal.standardError("vault: warning: a wait under a day leaves you little time to deny a request you did not expect")
            }
        } else {
            Terminal.standardError("emergency access to \(header.secretIDHex.prefix(16)) is off: each holder is told")
        }
        var missed: [String] = []
        for holder in holders {
            if try await deliver(rule, to: holder, address: addresses[holder.label.value], route: route, keystore: keystore, identity: identity) == false {
                missed.append(holder.label.value)
            }
        }
        return missed
    }

    /// Delivers `rule` to `holder` and records how its role stands; false when it could not.
    private static func deliver(_ rule: EmergencyRule, to holder: Peer, address: PeerAddress?, route: DeliveryRoute, keystore: Keystore,
                                identity: Identity) async throws -> Bool {
        let row = rule.secretRow, key = holder.card.agreementKey, label = holder.label.value
        var lanFailure: String?
        if case .auto = route, let address {
            do {
                let answer = try await PeerClient.deliverRule(rule, to: holder, at: address, identity: identity)
                let state = EmergencyRole.State(rawValue: answer) ?? .waitingForConsent
                try keystore.setRole(secretRow: row, holderKey: key, label: label, issued: rule.issued, state: state, via: "LAN \(address)")
                Terminal.standardError("  \(label): emergency rule delivered to \(address): \(answer)")
                return true
            } catch {
                lanFailure = Report.words(for: error)
            }
        }
        let named: String? = if case .group(let name) = route { name } else { nil }
        guard let group = try HolderMail.sharedGroup(with: holder.card, keystore: keystore, identity: identity, named: named) else {
            try keystore.setRole(secretRow: row, holderKey: key, label: label, issued: rule.issued, state: .notYetReached, via: "-")
            Terminal.standardError("  \(label): " + (lanFailure.map { "\($0); " } ?? "")
                + "no group of yours has '\(label)' as a member, to send the emergency rule through relays")
            return false
        }
        // Recorded first: the holder's answer can come back before the slowest relay took it.
        try keystore.setRole(secretRow: row, holderKey: key, label: label, issued: rule.issued, state: .sent, via: "relays of \(group.name)")
        do {
            let stored = try await EmergencyMail.offer(rule, to: holder, in: group, keystore: keystore, identity: identity)
            if let shortfall = stored.shortfall(HolderMail.minimumRelays(group), of: group) {
                throw CLIError.invalidInput(shortfall)
            }
            Terminal.standardError("  \(label): " + (lanFailure.map { "\($0); " } ?? "")
                + "emergency rule sent through the relays of \(group.name) (\(stored.count) of \(group.relays.count) stored it)")
            return true
        } catch {
            try keystore.setRole(secretRow: row, holderKey: key, label: label, issued: rule.issued, state: .notYetReached, via: "relays of \(group.name)")
            Terminal.standardError("  \(label): " + (lanFailure.map { "\($0); " } ?? "") + "through the relays of \(group.name): \(Report.words(for: error))")
            return false
        }
    }
}
