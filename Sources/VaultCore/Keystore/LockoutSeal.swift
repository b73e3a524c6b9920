/// The TPM's lockout authorization as the keystore keeps it (security review M1;
/// Docs/FORMAT.md, "The TPM's lockout authorization").
///
/// The PIN's guess limit is the TPM's dictionary-attack lockout, and whoever has the lockout
/// hierarchy's authorization can reset it, raise it, or clear the TPM. Most Linux machines
/// (and swtpm) leave that authorization empty, so anyone with the machine could clear the
/// lockout after each wrong PIN. While a PIN guards the keys, vault gives the lockout
/// hierarchy a random authorization and keeps it sealed by the TPM under the same PIN and
/// PCRs: a thief without the PIN can use it no more than the keys, and nobody ever types it.
/// Keys sealed without a PIN are outside the lockout (noDA), so there it guards nothing and
/// vault leaves the hierarchy alone.
///
/// Layout: version `0x01` ‖ the TPM's object (``TPMSealedObject``, always with a PIN)
/// sealing the 1 to 32 bytes of the authorization.
struct LockoutSeal {
    static let version: UInt8 = 1
    /// The authorization's bytes before trailing zeros are removed: a SHA-256 digest's
    /// length, the most a hierarchy's authorization holds.
    static let length = 32

    let object: TPMSealedObject

    init(object: TPMSealedObject) { self.object = object }

    /// Reads a seal strictly: an unknown version, or any byte past the object, is refused.
    init(_ bytes: [UInt8]) throws(VaultError) {
        var reader = ByteReader(bytes)
        do throws(ByteReader.Failure) {
            let version = try reader.u8()
            guard version == Self.version else { throw .invalid("unknown version \(version)") }
            object = try TPMSealedObject(reading: &reader)
            // Kept only while a PIN guards the keys; one without would open for anybody.
            guard object.hasPIN else { throw .invalid("it is sealed without a PIN") }
            try reader.end()
        } catch {
            throw .keystoreCorrupt("the sealed lockout authorization: \(error)")
        }
    }

    var encoded: [UInt8] { [Self.version] + object.encoded }

    /// A new random authorization, without trailing zero bytes (the TPM removes them from
    /// what it keeps, and tpm2-tss versions differ on whether they do too).
    static func random(_ random: some RandomSource) -> SecureBytes {
        let value = random.secureBytes(length)
        let kept = value.withUnsafeBytes { bytes in (bytes.lastIndex { $0 != 0 } ?? -1) + 1 }
        return value.slice(0..<kept)
    }

    /// What a new protection of the keys does with the lockout hierarchy: worked out before
    /// the keystore's transaction (which stores ``stored`` with the keys' new protection),
    /// and finished by ``take(_:)`` after it. So the TPM never has an authorization of
    /// vault's that the keystore does not hold: it is set only once its seal is stored, and
    /// taken off before the seal is forgotten. Run again after a crash, each step finds what
    /// the last one left and goes on from there.
    struct Plan {
        /// The seal to store with the keys' new protection (nil: none).
        let stored: [UInt8]?
        /// What was done, or will be once ``toTake`` is set.
        let change: TPMLockoutChange
        /// The authorization to set on the TPM once the keystore holds its seal.
        let toTake: SecureBytes?
        let selection: TPMSelection?

        static var untouched: Plan { Plan(stored: nil, change: .untouched, toTake: nil, selection: nil) }
    }

    /// The plan for keys about to be protected as `new` says (nil: not by the TPM), where the
    /// keystore keeps `kept` (the seal stored now, if any) and `opened` opened the keys. A
    /// kept authorization is unsealed with the PIN that opened them, then sealed again under
    /// the new PIN, or, with no PIN any more, given back here: the lockout hierarchy's
    /// authorization is made empty again, if it is still the one vault set.
    static func plan(
        kept: [UInt8]?, opened: UnlockFactors, new: TPMSealing?, random: some RandomSource
    ) throws(VaultError) -> Plan {
        let pin = new?.pin
        guard kept != nil || pin != nil else { return .untouched }
        let selection = if let new { new.selection } else if let tpm = opened.tpm { tpm } else { try TPMSelection.fromEnvironment() }
        let tpm = try TPMConnection(selection)
        let isSet = try tpm.lockoutState().lockout_auth_set != 0
        let value: SecureBytes?
        if let kept {
            let object = try LockoutSeal(kept).object
            guard let current = opened.pin else { throw .pinRequired }
            value = try tpm.unseal(object, auth: object.authValue(pin: current))
        } else {
            value = nil
        }
        if let new, let pin {
            if value == nil && isSet { return Plan(stored: nil, change: .leftAsItWas, toTake: nil, selection: selection) }
            let authorization = value ?? Self.random(random)
            let object = try TPMSealedObject.seal(authorization, pin: pin, pcrs: new.pcrs, on: tpm, random: random)
            return Plan(stored: LockoutSeal(object: object).encoded, change: isSet ? .kept : .taken,
                        toTake: isSet ? nil : authorization, selection: selection)
        }
        // No PIN any more, so nothing for the lockout to guard: it goes back to its owner.
        // A hierarchy without an authorization was never given vault's, or was given back by
        // a run cut short after that step.
        guard let value, isSet else { return Plan(stored: nil, change: .givenBack, toTake: nil, selection: selection) }
        switch try tpm.changeLockoutAuthorization(from: value, to: nil) {
        case .changed: return Plan(stored: nil, change: .givenBack, toTake: nil, selection: selection)
        case .wrongAuthorization: return Plan(stored: nil, change: .notGivenBack, toTake: nil, selection: selection)
        }
    }

    /// Sets the planned authorization on the TPM, now that the keystore holds its seal, if
    /// the lockout hierarchy still has none. A failure is said, not thrown: the keys are
    /// stored already, and the next seal of them tries again.
    static func take(_ plan: Plan) -> TPMLockoutChange {
        guard let value = plan.toTake, let selection = plan.selection else { return plan.change }
        do throws(VaultError) {
            let tpm = try TPMConnection(selection)
            // Another program took the hierarchy since the plan: vault's value goes unused.
            guard try tpm.lockoutState().lockout_auth_set == 0 else { return .leftAsItWas }
            switch try tpm.changeLockoutAuthorization(from: nil, to: value) {
            case .changed: return plan.change
            case .wrongAuthorization: return .leftAsItWas
            }
        } catch {
            return .notTaken(error)
        }
    }
}
