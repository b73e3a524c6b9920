import Foundation

/// A directory under the system's temporary directory, removed with everything in it when
/// the value is released.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The absolute path.
    public let path: String

    public init(_ prefix: String = "vault-test") {
        var template = Array((NSTemporaryDirectory() + "/\(prefix)-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// A path inside the directory.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `contents` to a file inside the directory and returns its path.
    @discardableResult
    public func write(_ name: String, _ contents: some DataProtocol) throws -> String {
        let target = file(name)
        try Data(contents).write(to: URL(fileURLWithPath: target))
        return target
    }
}
