import Foundation

/// Sizes and rates as people read them: binary units for sizes, decimal for rates (as
/// `vault-bench` prints them).
public enum ByteCount {
    /// `bytes` with one decimal in the largest unit it reaches: "812 B", "4.0 MiB" (the
    /// progress line, whose width then stays put).
    public static func text(_ bytes: UInt64) -> String {
        let (value, unit) = scaled(bytes)
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f", value) + " " + units[unit]
    }

    /// A limit or a setting, as people set them: whole units without a decimal ("32 MiB",
    /// "1 GiB", "1000 B"), else as ``text(_:)`` does.
    public static func limit(_ bytes: UInt64) -> String {
        let (_, unit) = scaled(bytes)
        let size = UInt64(1) << (10 * unit)
        return bytes % size == 0 ? "\(bytes / size) \(units[unit])" : text(bytes)
    }

    /// A rate in MB/s, one decimal.
    public static func rate(_ bytesPerSecond: Double) -> String {
        String(format: "%.1f MB/s", bytesPerSecond / 1e6)
    }

    private static let units = ["B", "KiB", "MiB", "GiB", "TiB"]

    private static func scaled(_ bytes: UInt64) -> (Double, Int) {
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return (value, unit)
    }
}
