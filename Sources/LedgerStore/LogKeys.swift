@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// The named databases of a store and how their keys are laid out.
///
/// Every integer in a key is big-endian so that LMDB's byte order is numeric order.
@_spi(Storage) public enum LogSchema {
    /// position (u64 BE) → record (see `EventRecord`).
    public static let events = "events"
    /// `idKey` → one fixed-size value per event, sorted: the first 8 bytes of SHA-256(id) ‖
    /// the position (u48 BE). Opened with `idsFlags` (see `IDIndex`).
    public static let ids = "idHashes"
    /// How `ids` is opened: its values are sorted duplicates of one size.
    public static let idsFlags: Database.Flags = [.dupSort, .dupFixed]
    /// Layout 2's id index: event id (16 bytes) → position (u64 BE). Replaced by `ids` when
    /// such a store is first opened for writing.
    static let layout2IDs = "ids"
    /// subject length (u16 BE) ‖ subject ‖ first version (u64 BE) → the positions of that
    /// version and the ones after it, up to 128, packed (see `StreamChunk`). A subject's
    /// current version is the end of the last chunk under its prefix.
    public static let streams = "streams"
    /// store-wide values: `format` → u8 layout version; `subjects` → u64 BE count of subjects;
    /// `indexed` → u64 BE position the stored `ids` and `streams` hold every event through
    /// (`indexedKey`); `policy` → the policy document the store was built with (canonical JSON).
    public static let meta = "meta"
    /// The `meta` key of the store layout version.
    public static let formatKey = Array("format".utf8)
    /// The `meta` key of the subject count.
    public static let subjectCountKey = Array("subjects".utf8)
    /// The `meta` key of the policy document.
    public static let policyKey = Array("policy".utf8)
    /// The stored form of a policy under `policyKey`: its canonical JSON.
    public static func policyValue(_ policy: Policy) -> [UInt8] {
        Array(policy.json.serialized(sortedKeys: true).utf8)
    }
    /// key id (16 bytes) → position of the `account.deleted` that destroyed the key (u64 BE) ‖
    /// subject: every subject key ever destroyed (`KeyStore`). A personal field sealed under
    /// one of them reads as `PersonalData.erased`.
    public static let erased = "erasedKeys"
    /// key id (16 bytes) → subject: keys destroyed by a committed `account.deleted` that the
    /// key store may still hold; emptied once the key store is compacted without them.
    public static let shredding = "shreddingKeys"
    /// subject → the latest `occurredAt` (i64 ms, as u64 BE) of its `account.deleted`s ‖ that
    /// event's position (u64 BE): a personal fact of the subject that occurred by then and is
    /// appended later belongs to the erased account, and is erased as it arrives.
    public static let erasedSubjects = "erasedSubjects"
    /// The `meta` key of the key store's generation (u64 BE): its directory is `keys-<N>`
    /// beside the log's files; absent or 0 while no subject has a key.
    public static let keyGenerationKey = Array("keyGeneration".utf8)
    /// The `meta` key of the first position whose personal fields are sealed (u64 BE): 1 for a
    /// store made with sealing, the head + 1 for a store upgraded from layout 5.
    public static let sealedFromKey = Array("sealedFrom".utf8)
    /// The store layout this code writes: 2 packs the stream index (layout 1 kept a key per
    /// event), 3 packs the id index (layout 2 kept a key per id), 4 lets read models built
    /// together share a generation of `models`, their states tagged (a layout-3 reader would
    /// take such a generation's record for damage). Older layouts are upgraded when the store
    /// is first opened for writing. 5 keeps the latest events' index entries in memory until
    /// they are many (`indexedKey`; a layout-4 reader would miss them).
    /// 6 seals personal fields under per-subject keys (a layout-5 reader would show their
    /// ciphertext).
    public static let storeFormat: UInt8 = 6
    /// The oldest layout this code reads as it is, without the upgrade: layout 3 is layout 4
    /// with every generation a model's own, and layout 4 is layout 5 with every event indexed.
    public static let readableFormat: UInt8 = 3

    /// A u64 as 8 big-endian bytes.
    public static func key(_ value: UInt64) -> [UInt8] {
        withKey(value) { Array($0) }
    }

    /// Calls `body` with `value` as 8 big-endian bytes, without allocating them.
    public static func withKey<R, E: Error>(_ value: UInt64, _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withUnsafeBytes(of: value.bigEndian) { bytes throws(E) in try body(bytes) }
    }

    /// Reads 8 big-endian bytes as a u64; `nil` for any other length.
    public static func integer(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard bytes.count == 8 else { return nil }
        var value: UInt64 = 0
        for b in bytes { value = value << 8 | UInt64(b) }
        return value
    }

    /// The prefix of a subject's keys in `streams`.
    public static func streamPrefix(_ subject: String) -> [UInt8] {
        let utf8 = subject.utf8
        var key: [UInt8] = [UInt8(truncatingIfNeeded: utf8.count >> 8), UInt8(truncatingIfNeeded: utf8.count)]
        key.reserveCapacity(2 + utf8.count + 8)
        key.append(contentsOf: utf8)
        return key
    }

    /// The key in `streams` of a subject's chunk that starts at `version`.
    public static func streamKey(_ subject: String, version: UInt64) -> [UInt8] {
        var key = streamPrefix(subject)
        key.append(contentsOf: Self.key(version))
        return key
    }
}

/// What happened to each event of an append.
public enum AppendOutcome: Sendable, Hashable {
    /// Written at `position`, as `version` of its subject's stream.
    case appended(position: UInt64, version: UInt64)
    /// Its id was already stored with the same content, at `position`; nothing was written.
    case duplicate(position: UInt64)

    /// The event's position, new or existing.
    public var position: UInt64 {
        switch self {
        case .appended(let p, _), .duplicate(let p): p
        }
    }
}

/// The result of one atomic append.
public struct AppendResult: Sendable, Hashable {
    /// One outcome per event, in the order they were given.
    public let outcomes: [AppendOutcome]

    public init(outcomes: [AppendOutcome]) { self.outcomes = outcomes }

    /// Events written.
    public var appended: Int { outcomes.count { if case .appended = $0 { true } else { false } } }
    /// Events whose id was already stored with the same content.
    public var duplicates: Int { outcomes.count - appended }
    /// The first position written, `nil` if nothing was.
    public var firstPosition: UInt64? { appendedPositions.min() }
    /// The last position written, `nil` if nothing was.
    public var lastPosition: UInt64? { appendedPositions.max() }

    private var appendedPositions: [UInt64] {
        outcomes.compactMap { if case .appended(let p, _) = $0 { p } else { nil } }
    }

    /// SPEC §5's `append` shape: what `ledger append --json` prints and the server answers.
    public var json: JSON {
        AppendResult.json(appended: appended, duplicates: duplicates, firstPosition: firstPosition, lastPosition: lastPosition)
    }

    /// SPEC §5's `append` shape of these counts.
    public static func json(appended: Int, duplicates: Int, firstPosition: UInt64?, lastPosition: UInt64?) -> JSON {
        .object(JSONObject([("appended", .integer(Int64(appended))), ("duplicates", .integer(Int64(duplicates))),
                            ("firstPosition", firstPosition.map { .integer(Int64(clamping: $0)) } ?? .null),
                            ("lastPosition", lastPosition.map { .integer(Int64(clamping: $0)) } ?? .null)]))
    }
}
