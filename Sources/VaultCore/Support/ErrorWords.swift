import Foundation

/// An error whose `description` is written for a person: lowercase words, no Swift case
/// names, no final period, never secret material. Every error type of vault's modules
/// conforms, so a message may show any of them as it is (``VaultError/words(for:)``).
public protocol UserFacingError: Error, CustomStringConvertible {}

extension VaultError: UserFacingError {}

extension VaultError {
    /// Any error, in words: the description of vault's own errors; for a file-system error
    /// from Foundation or the C library, the file and the system's reason. Other errors
    /// (which vault's code should have turned into its own) are never shown with their
    /// Swift names.
    public static func words(for error: any Error) -> String {
        if let error = error as? any UserFacingError { return error.description }
        if let reason = fileReason(error) {
            return filePath(of: error).map { "\($0): \(reason)" } ?? reason
        }
        return "a failure vault has no words for"
    }

    /// This error as one about the input file at `path` (`FILE: the share bundle is
    /// truncated`), unless it names that file already: every error about an input file
    /// says which file (Docs/CLI.md, "Errors").
    public func about(file path: String) -> VaultError {
        description.contains(path) ? self : .inFile(path: path, self)
    }

    /// Any error as a ``VaultError``: vault's own as it is, a file-system error as
    /// ``fileSystem(path:reason:)``, anything else as ``unexpected(_:)``.
    public static func wrapping(_ error: any Error) -> VaultError {
        if let error = error as? VaultError { return error }
        if let reason = fileReason(error), let path = filePath(of: error) { return .fileSystem(path: path, reason: reason) }
        return .unexpected(words(for: error))
    }

    /// A file-system failure at `path`, with the reason the C library gives for `code`
    /// ("No such file or directory").
    public static func fileSystem(path: String, errno code: Int32) -> VaultError {
        .fileSystem(path: path, reason: String(cString: strerror(code)))
    }

    /// A file-system failure at `path` from a thrown error (a Foundation `CocoaError`, a
    /// `POSIXError`), with the system's reason in words rather than Foundation's text.
    public static func fileSystem(path: String, error: any Error) -> VaultError {
        if let error = error as? VaultError { return error }
        return .fileSystem(path: path, reason: fileReason(error) ?? "the file system refused")
    }

    /// The system's words for a file-system failure, or nil if `error` is not one.
    static func fileReason(_ error: any Error) -> String? {
        if error is any UserFacingError { return nil }
        if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
        let bridged = error as NSError
        if bridged.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(bridged.code))) }
        // Foundation wraps the errno it met as the underlying error.
        if let underlying = bridged.userInfo[NSUnderlyingErrorKey] as? any Error, let reason = fileReason(underlying) {
            return reason
        }
        guard bridged.domain == NSCocoaErrorDomain else { return nil }
        let code = CocoaError.Code(rawValue: bridged.code)
        let errno: Int32? = switch code {
        case .fileNoSuchFile, .fileReadNoSuchFile: ENOENT
        case .fileReadNoPermission, .fileWriteNoPermission: EACCES
        case .fileWriteOutOfSpace: ENOSPC
        case .fileWriteFileExists: EEXIST
        case .fileWriteVolumeReadOnly: EROFS
        case .fileReadTooLarge: EFBIG
        default: nil
        }
        if let errno { return String(cString: strerror(errno)) }
        switch code {
        case .fileReadInapplicableStringEncoding, .fileReadUnknownStringEncoding, .fileWriteInapplicableStringEncoding:
            return "the text is not in the expected encoding"
        default:
            return "the file could not be read or written"
        }
    }

    /// The path a Foundation error names, if any.
    static func filePath(of error: any Error) -> String? {
        if error is any UserFacingError || error is POSIXError { return nil }
        let info = (error as NSError).userInfo
        return info[NSFilePathErrorKey] as? String ?? (info[NSURLErrorKey] as? URL)?.path
    }
}
