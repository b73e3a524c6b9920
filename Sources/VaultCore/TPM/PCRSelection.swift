import Foundation

/// The SHA-256 PCRs a sealed identity's policy names (`--tpm-pcrs 7`, `--tpm-pcrs 0,2,7`):
/// the keys unseal only while each holds the value it had when they were sealed.
public struct PCRSelection: Sendable, Equatable, CustomStringConvertible {
    /// A bit per PCR, 0 to 23.
    public let mask: UInt32

    /// No PCR: the keys are not bound to the boot state.
    public static let none = PCRSelection(mask: 0)
    /// The PCRs of a bank.
    static let count = 24

    init(mask: UInt32) { self.mask = mask & ((1 << Self.count) - 1) }

    /// The PCRs in a list of numbers separated by commas.
    public init(parsing text: String) throws(VaultError) {
        var mask: UInt32 = 0
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let number = item.trimmingCharacters(in: .whitespaces)
            guard let index = Int(number), (0..<Self.count).contains(index), number.allSatisfy(\.isASCII) else {
                throw .invalidPCRs("\(quoted(text)): give PCR numbers from 0 to 23, separated by commas (e.g. 7 or 0,2,7)")
            }
            mask |= 1 << UInt32(index)
        }
        self.init(mask: mask)
    }

    /// The PCR numbers, lowest first.
    public var indices: [Int] { (0..<Self.count).filter { mask & (1 << UInt32($0)) != 0 } }

    /// "7", "0, 2 and 7".
    public var description: String {
        let numbers = indices.map(String.init)
        guard numbers.count > 1 else { return numbers.first ?? "none" }
        return numbers.dropLast().joined(separator: ", ") + " and " + numbers.last!
    }
}
