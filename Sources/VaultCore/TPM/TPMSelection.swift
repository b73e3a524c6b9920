import Foundation

/// Which TPM vault talks to: a tpm2-tss TCTI configuration, from `VAULT_TPM`, by default
/// `device:/dev/tpmrm0` (the kernel's resource manager, which lets several processes share
/// the TPM). Tests point it at a software TPM: `swtpm:host=127.0.0.1,port=N`.
public struct TPMSelection: Sendable, Equatable, CustomStringConvertible {
    /// The environment variable that names the TPM.
    public static let environmentVariable = "VAULT_TPM"
    /// The kernel's resource manager.
    public static let defaultDevice = TPMSelection(checked: "device:/dev/tpmrm0")
    /// The TCTIs vault accepts: a device, swtpm's and the simulator's sockets, and the
    /// user-space resource manager. (tpm2-tss's others run commands or record traffic.)
    static let kinds = ["device", "swtpm", "mssim", "tabrmd"]

    /// The configuration as tpm2-tss reads it: `KIND:CONF`.
    public let tcti: String

    private init(checked tcti: String) { self.tcti = tcti }

    /// A configuration given by the user, checked for its kind.
    public init(_ text: String) throws(VaultError) {
        let kind = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard Self.kinds.contains(kind), !text.contains("\0"), text.utf8.count <= 200 else {
            throw .noTPM("\(Self.environmentVariable)=\(quoted(text)) is not a TPM this vault can use: give device:PATH, swtpm:host=HOST,port=PORT, mssim:… or tabrmd:…")
        }
        // tpm2-tss reads "device" alone as /dev/tpm0, which one process at a time may open.
        tcti = text == "device" || text == "device:" ? Self.defaultDevice.tcti : text
    }

    /// `VAULT_TPM`, or the default device.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(VaultError) -> TPMSelection {
        guard let text = environment[environmentVariable], !text.isEmpty else { return defaultDevice }
        return try TPMSelection(text)
    }

    /// The device file, for a `device:` TCTI.
    var devicePath: String? {
        guard tcti.hasPrefix("device:") else { return nil }
        return String(tcti.dropFirst("device:".count))
    }

    public var description: String { devicePath ?? tcti }
}
