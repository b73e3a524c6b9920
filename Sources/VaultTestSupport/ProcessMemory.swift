import Foundation

/// Another process's memory, as root reads it through /proc/PID/maps and /proc/PID/mem:
/// where a secret still lies, in its heap, its stacks or its freed chunks, long after the
/// code that handled it returned.
public enum ProcessMemory {
    /// The addresses at which `needle` occurs in the readable mappings of process `pid`.
    /// Needs root (or CAP_SYS_PTRACE): vault runs non-dumpable. Regions the kernel will not
    /// read (guard pages, vvar) are skipped.
    public static func occurrences(of needle: [UInt8], in pid: pid_t) throws -> [UInt64] {
        precondition(!needle.isEmpty)
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let fd = open("/proc/\(pid)/mem", O_RDONLY)
        guard fd >= 0 else { throw failure("/proc/\(pid)/mem: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var found: [UInt64] = []
        let chunk = 1 << 20
        var buffer = [UInt8](repeating: 0, count: chunk + needle.count - 1)
        defer { buffer.withUnsafeMutableBytes { _ = memset($0.baseAddress!, 0, $0.count) } }
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2 else { continue }
            var start = bounds[0]
            // Chunks overlap by the needle's length less one, so no occurrence straddles two.
            while start < bounds[1] {
                let length = Int(min(UInt64(buffer.count), bounds[1] - start))
                let read = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, length, off_t(Int64(bitPattern: start))) }
                guard read >= needle.count else { break }
                buffer.withUnsafeBytes { bytes in
                    // memchr finds candidates for the first byte; memcmp checks the rest.
                    var offset = 0
                    while offset + needle.count <= read {
                        guard let hit = memchr(bytes.baseAddress! + offset, Int32(needle[0]), read - needle.count + 1 - offset) else { break }
                        let at = UnsafeRawPointer(hit) - bytes.baseAddress!
                        if memcmp(hit, needle, needle.count) == 0 { found.append(start + UInt64(at)) }
                        offset = at + 1
                    }
                }
                if start + UInt64(read) >= bounds[1] { break }
                start += UInt64(read - (needle.count - 1))
            }
        }
        return found
    }

    private static func failure(_ words: String) -> NSError {
        NSError(domain: "ProcessMemory", code: 1, userInfo: [NSLocalizedDescriptionKey: words])
    }
}
