#if canImport(Glibc)
import Glibc
#endif

extension UnsafeRawBufferPointer {
    /// Whether these bytes are exactly `bytes` (one `memcmp`): how caches check that what a
    /// store holds is still what they decoded.
    @inlinable
    public func hasSameBytes(as bytes: [UInt8]) -> Bool {
        guard count == bytes.count else { return false }
        guard let base = baseAddress else { return true }
        return bytes.withUnsafeBytes { memcmp($0.baseAddress ?? base, base, count) == 0 }
    }
}
