import Foundation

/// Where to save a file whose name someone else chose (`vault receive`, `vault link open`):
/// its last path component only, without control characters (C0, DEL, C1), whitespace
/// other than spaces or leading dots, at most 200 UTF-8 bytes (so a `999-` prefix still
/// fits NAME_MAX), and never over an existing file: `2-NAME`, `3-NAME`, … instead.
enum ReceivedFileName {
    static func path(for name: String?, in directory: String, fallback: String) -> String {
        let base = name.map(clean).flatMap { $0.isEmpty ? nil : $0 } ?? fallback
        var path = directory + "/" + base
        var n = 2
        while FileManager.default.fileExists(atPath: path), n < 1000 {
            path = directory + "/\(n)-" + base
            n += 1
        }
        return path
    }

    private static func clean(_ name: String) -> String {
        let last = name.split(separator: "/").last.map(String.init) ?? ""
        let kept = last.unicodeScalars.filter { scalar in
            (!scalar.properties.isWhitespace || scalar == " ") && scalar.value >= 0x20 && scalar.value != 0x7f && !(0x80...0x9f).contains(scalar.value)
        }
        var result = ""
        for character in String(String.UnicodeScalarView(kept)).drop(while: { $0 == "." }) {
            guard result.utf8.count + character.utf8.count <= 200 else { break }
            result.append(character)
        }
        return result
    }
}
