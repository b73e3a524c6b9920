import Foundation

/// Where to save a file whose name someone else chose (`vault receive`, `vault link open`,
/// `vault recover --save`): its last path component only, without control characters (C0,
/// DEL, C1), format characters (bidi controls, zero-width characters: Unicode's category
/// Cf), whitespace other than spaces or leading dots, at most 200 UTF-8 bytes (so a `999-`
/// prefix still fits NAME_MAX).
///
/// Format characters go because they make a name look like another: `invoice\u{202E}fdp.sh`
/// shows as `invoicehs.pdf`, and a zero-width space hides in `pass\u{200B}port.pdf`. The
/// saved name is then what a file manager or `ls` shows.
enum ReceivedFileName {
    /// A path in `directory` that is not taken: the name, else `2-NAME`, `3-NAME`, …
    static func path(for name: String?, in directory: String, fallback: String) -> String {
        let base = safeName(for: name, fallback: fallback)
        var path = directory + "/" + base
        var n = 2
        while FileManager.default.fileExists(atPath: path), n < 1000 {
            path = directory + "/\(n)-" + base
            n += 1
        }
        return path
    }

    /// The name made safe, or `fallback` when nothing of it is left.
    static func safeName(for name: String?, fallback: String) -> String {
        name.map(clean).flatMap { $0.isEmpty ? nil : $0 } ?? fallback
    }

    private static func clean(_ name: String) -> String {
        let last = name.split(separator: "/").last.map(String.init) ?? ""
        let kept = last.unicodeScalars.filter { scalar in
            (!scalar.properties.isWhitespace || scalar == " ") && scalar.value >= 0x20 && scalar.value != 0x7f
                && !(0x80...0x9f).contains(scalar.value) && scalar.properties.generalCategory != .format
        }
        var result = ""
        for character in String(String.UnicodeScalarView(kept)).drop(while: { $0 == "." }) {
            guard result.utf8.count + character.utf8.count <= 200 else { break }
            result.append(character)
        }
        return result
    }
}
