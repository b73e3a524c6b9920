import Foundation

/// Durations as people write and read them: `90`, `90s`, `30m`, `12h` or `7d` on the
/// command line; "90 seconds", "30 minutes", "12 hours", "7 days" in what vault prints.
public enum DurationText {
    /// The longest duration read: ten years.
    public static let longest: UInt64 = 10 * 365 * 86400

    /// The seconds that `text` says, or nil when it is not a duration of 1 s to ten years.
    public static func seconds(_ text: String) -> UInt64? {
        let unit = text.last.flatMap { units[$0] }
        // Bounded after the unit: "315360000d" is not ten years.
        guard let value = UInt64(unit == nil ? text : String(text.dropLast())), value > 0, value <= longest / (unit ?? 1) else {
            return nil
        }
        return value * (unit ?? 1)
    }

    /// `seconds` in the largest unit that divides it: "7 days", "1 hour", "30 minutes",
    /// "90 seconds". A duration that no larger unit divides stays in seconds (exact, as a
    /// limit must be).
    public static func text(_ seconds: UInt64) -> String {
        for (size, name) in [(UInt64(86400), "day"), (3600, "hour"), (60, "minute")] where seconds >= size && seconds % size == 0 {
            return plural(seconds / size, name)
        }
        return plural(seconds, "second")
    }

    /// `seconds` to the nearest of the largest unit it reaches, for how far off a clock or
    /// a time is ("10 days" for 863,999 s, "3 hours", "90 seconds" under five minutes): a
    /// second taken by a slow request must not turn "10 days" into "863999 seconds".
    public static func rounded(_ seconds: UInt64) -> String {
        for (size, name) in [(UInt64(86400), "day"), (3600, "hour"), (60, "minute")] where seconds >= max(size, 300) {
            return plural((seconds + size / 2) / size, name)
        }
        return plural(seconds, "second")
    }

    private static let units: [Character: UInt64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]

    private static func plural(_ count: UInt64, _ name: String) -> String { "\(count) \(name)\(count == 1 ? "" : "s")" }
}
