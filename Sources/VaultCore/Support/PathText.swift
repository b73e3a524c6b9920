/// Path arithmetic on strings. Foundation's `NSString.deletingLastPathComponent` traps on a
/// path of one character (`vault init --home a`, `-o x`) on this toolchain's
/// swift-corelibs-foundation, so vault does it itself.
public enum PathText {
    /// The directory part of `path`, as `dirname` gives it but "" for a bare name: `a/b` →
    /// `a`, `/a` → `/`, `a` → "", `a//b/` → `a`.
    public static func directory(of path: String) -> String {
        var scalars = Substring(path)
        while scalars.count > 1 && scalars.hasSuffix("/") { scalars.removeLast() }
        guard let slash = scalars.lastIndex(of: "/") else { return "" }
        var parent = scalars[..<slash]
        while parent.hasSuffix("/") { parent.removeLast() }
        return parent.isEmpty ? "/" : String(parent)
    }
}
