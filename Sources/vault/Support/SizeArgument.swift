import ArgumentParser
import VaultCore

/// A size on the command line: bytes (`67108864`), or a number with a binary unit
/// (`64MiB`, `64M`, `512KiB`, `1GiB`, `1G`); shown in help as people read it ("64 MiB").
struct SizeArgument: ExpressibleByArgument {
    let bytes: UInt64

    init(_ bytes: UInt64) { self.bytes = bytes }

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces)
        let units: [(String, UInt64)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1)]
        let (digits, scale) = units.first { text.hasSuffix($0.0) }.map { (String(text.dropLast($0.0.count)), $0.1) } ?? (text, 1)
        guard let value = UInt64(digits.trimmingCharacters(in: .whitespaces)), value <= UInt64.max / scale else { return nil }
        bytes = value * scale
    }

    var defaultValueDescription: String { ByteCount.limit(bytes) }
}
