#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An event's identity: a UUID, and the idempotency key of the log.
///
/// Appending an event whose id is already stored is a no-op; the same id with other content
/// is a conflict. Written as the usual lowercase `8-4-4-4-12` hex form.
public struct EventID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The 16 bytes, most significant first.
    public let high: UInt64
    public let low: UInt64

    /// Creates an id from its two big-endian halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Creates an id from exactly 16 bytes; `nil` for any other count.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (i, byte) in bytes.enumerated() {
            if i < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// Creates an id from a Foundation `UUID`.
    public init(_ uuid: UUID) {
        let u = uuid.uuid
        let high = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let low = [u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        self.init(high: high, low: low)
    }

    /// Parses the `8-4-4-4-12` hex form (either case). `nil` if it is not one.
    public init?(_ text: some StringProtocol) {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        var nibble: UInt8? = nil
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == UInt8(ascii: "-") else { return nil }
                continue
            }
            guard let v = Self.hexValue(c) else { return nil }
            if let high = nibble {
                bytes.append(high << 4 | v)
                nibble = nil
            } else {
                nibble = v
            }
        }
        self.init(bytes: bytes)
    }

    /// A new random (version 4) id.
    public static func random() -> EventID { EventID(UUID()) }

    /// How many bytes an id is.
    public static let byteCount = 16

    /// The 16 bytes, most significant first.
    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 16) { buffer, count in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            raw.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
            count = 16
        }
    }

    /// As a Foundation `UUID`.
    public var uuid: UUID {
        let b = bytes
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    public var description: String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func < (a: EventID, b: EventID) -> Bool {
        (a.high, a.low) < (b.high, b.low)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
