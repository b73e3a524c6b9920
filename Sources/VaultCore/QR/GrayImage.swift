import CVaultImage
import Foundation

/// An 8-bit grayscale image: what QR codes are drawn into and scanned from.
public struct GrayImage: Sendable {
    /// Pixels per row.
    public let width: Int
    /// Rows.
    public let height: Int
    /// Row-major, 0 black to 255 white.
    public let pixels: [UInt8]

    /// Wraps pixels; `pixels.count` must be `width * height`.
    public init(width: Int, height: Int, pixels: [UInt8]) {
        precondition(pixels.count == width * height)
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// Loads a PNG, JPEG or binary PGM (P5) file, told apart by their first bytes.
    public init(contentsOf path: String) throws(VaultError) {
        let data = try Self.readBounded(path)
        if data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            self = try Self.decode(path, data, vault_png_decode_gray)
        } else if data.starts(with: [0xFF, 0xD8, 0xFF]) {
            self = try Self.decode(path, data, vault_jpeg_decode_gray)
        } else if data.starts(with: Array("P5".utf8)) {
            self = try Self.parsePGM(path, data)
        } else {
            throw .unreadableImage(path: path, reason: "not a PNG, JPEG or binary PGM file")
        }
    }

    /// The image at half its width and height, each pixel the mean of four: noise (a
    /// photo's grain, a scanner's speckle) averages out where a QR reader lost a code to it.
    public func halved() -> GrayImage {
        let (w, h) = (width / 2, height / 2)
        guard w > 0, h > 0 else { return self }
        var out = [UInt8](repeating: 0, count: w * h)
        pixels.withUnsafeBufferPointer { p in
            for y in 0..<h {
                let top = 2 * y * width, bottom = top + width
                for x in 0..<w {
                    let sum = Int(p[top + 2 * x]) + Int(p[top + 2 * x + 1]) + Int(p[bottom + 2 * x]) + Int(p[bottom + 2 * x + 1])
                    out[y * w + x] = UInt8((sum + 2) / 4)
                }
            }
        }
        return GrayImage(width: w, height: h, pixels: out)
    }

    /// The image as PNG bytes.
    public func png() throws(VaultError) -> [UInt8] {
        var output: UnsafeMutablePointer<UInt8>?
        var length = 0
        let status = vault_png_encode_gray(pixels, UInt32(width), UInt32(height), &output, &length)
        guard status == VAULT_IMAGE_OK, let output else {
            throw .unreadableImage(path: "(new image)", reason: "PNG encoding failed")
        }
        defer { free(output) }
        return Array(UnsafeBufferPointer(start: output, count: length))
    }

    private typealias Decoder = (
        UnsafePointer<UInt8>?, Int, Int, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
        UnsafeMutablePointer<UInt32>?, UnsafeMutablePointer<UInt32>?
    ) -> Int32

    private static func decode(_ path: String, _ data: [UInt8], _ decoder: Decoder) throws(VaultError) -> GrayImage {
        var pixels: UnsafeMutablePointer<UInt8>?
        var width: UInt32 = 0, height: UInt32 = 0
        let status = decoder(data, data.count, Limits.imagePixels, &pixels, &width, &height)
        switch Int(status) {
        case Int(VAULT_IMAGE_OK):
            guard let pixels else { break }
            defer { free(pixels) }
            let count = Int(width) * Int(height)
            return GrayImage(width: Int(width), height: Int(height),
                             pixels: Array(UnsafeBufferPointer(start: pixels, count: count)))
        case Int(VAULT_IMAGE_TOO_LARGE):
            throw .unreadableImage(path: path, reason: "more than \(Limits.imagePixels) pixels")
        case Int(VAULT_IMAGE_NO_MEMORY):
            throw .unreadableImage(path: path, reason: "out of memory")
        default: break
        }
        throw .unreadableImage(path: path, reason: "the image data is damaged or truncated")
    }

    /// Binary PGM: `P5`, width, height and maxval as decimal tokens separated by white
    /// space (with `#` comments), one white-space byte, then exactly the pixel data.
    static func parsePGM(_ path: String, _ data: [UInt8]) throws(VaultError) -> GrayImage {
        var index = 2
        func token() -> Int? {
            while index < data.count {
                if data[index] == UInt8(ascii: "#") {
                    while index < data.count && data[index] != 0x0A { index += 1 }
                } else if [0x20, 0x09, 0x0A, 0x0D].contains(data[index]) {
                    index += 1
                } else { break }
            }
            var value = 0, digits = 0
            while index < data.count, data[index] >= 0x30, data[index] <= 0x39, digits < 9 {
                value = value * 10 + Int(data[index] - 0x30)
                index += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        guard let width = token(), let height = token(), let maxValue = token(),
              index < data.count, [0x20, 0x09, 0x0A, 0x0D].contains(data[index])
        else { throw .unreadableImage(path: path, reason: "malformed PGM header") }
        index += 1
        guard width > 0, height > 0, width <= Limits.imagePixels / height else {
            throw .unreadableImage(path: path, reason: "PGM dimensions out of range")
        }
        guard maxValue >= 1, maxValue <= 65535 else {
            throw .unreadableImage(path: path, reason: "PGM maximum value out of range")
        }
        let bytesPerPixel = maxValue < 256 ? 1 : 2
        guard data.count - index == width * height * bytesPerPixel else {
            throw .unreadableImage(path: path, reason: "PGM pixel data has the wrong length")
        }
        var pixels = [UInt8](repeating: 0, count: width * height)
        for i in 0..<pixels.count {
            let sample = bytesPerPixel == 1
                ? Int(data[index + i]) : Int(data[index + 2 * i]) << 8 | Int(data[index + 2 * i + 1])
            pixels[i] = UInt8(min(255, sample * 255 / maxValue))
        }
        return GrayImage(width: width, height: height, pixels: pixels)
    }

    private static func readBounded(_ path: String) throws(VaultError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadableImage(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while data.count <= Limits.imageFileBytes {
            let count = read(fd, &chunk, chunk.count)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadableImage(path: path, reason: String(cString: strerror(errno)))
            }
            data += chunk[0..<count]
        }
        guard data.count <= Limits.imageFileBytes else {
            throw .unreadableImage(path: path, reason: "larger than \(Limits.imageFileBytes >> 20) MiB")
        }
        guard !data.isEmpty else { throw .unreadableImage(path: path, reason: "the file is empty") }
        return data
    }
}
