#if canImport(Glibc)
import Glibc
#endif

extension UnsafeRawBufferPointer {
    /// Whether these bytes are exactly `bytes` (one `memcmp`): how caches check that what a
    /// store holds is still what they decoded.
    @inlinable
    public func hasSameBytes(as bytes: [UInt8]) -> Bool { count == bytes.count && begins(with: bytes) }

    /// Whether these bytes begin with exactly `bytes` (one `memcmp`).
    @inlinable
    public func begins(with bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { begins(with: $0) }
    }

    /// Whether these bytes begin with exactly `bytes` (one `memcmp`).
    @inlinable
    public func begins(with bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count <= count else { return false }
        guard let base = baseAddress else { return bytes.isEmpty }
        return memcmp(bytes.baseAddress ?? base, base, bytes.count) == 0
    }
}

extension [UInt8] {
    /// Whether these bytes sort before `other` in byte order (`memcmp`, then length): the order
    /// LMDB keeps keys in, so states sorted by it are written as appends.
    @inlinable
    public func precedesInByteOrder(_ other: [UInt8]) -> Bool {
        withUnsafeBytes { x in
            other.withUnsafeBytes { y in
                let common = Swift.min(x.count, y.count)
                guard common > 0, let left = x.baseAddress, let right = y.baseAddress else { return x.count < y.count }
                let order = memcmp(left, right, common)
                return order != 0 ? order < 0 : x.count < y.count
            }
        }
    }
}

extension String.UTF8View {
    /// Whether every byte satisfies `predicate`: over the string's bytes in place when they
    /// are contiguous (a native string), several times faster than the view's iterator.
    @inlinable
    package func allBytes(_ predicate: (UInt8) -> Bool) -> Bool {
        withContiguousStorageIfAvailable { $0.allSatisfy(predicate) } ?? allSatisfy(predicate)
    }
}

extension UInt8 {
    /// Whether this byte is a character of base64url (RFC 4648 §5): A–Z, a–z, 0–9, `-`, `_`.
    @inlinable
    package var isBase64URL: Bool {
        self == UInt8(ascii: "-") || self == UInt8(ascii: "_") || (0x30 ... 0x39).contains(self) || (0x41 ... 0x5A).contains(self) || (0x61 ... 0x7A).contains(self)
    }
}
