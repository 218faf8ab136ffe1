@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerStore

/// The index entries of a subject whose views count a holding subject's App Store events
/// (SPEC §2.2 "Subject"; `SubjectFacts.bound`): the stored states hold each key's own events,
/// so the entries are worked out from the subject's states with the holding subject's events
/// folded onto them — read by position (`HoldersModel.State.waiting`), which needs no stream
/// index inside a write transaction. The models fold in any order, so this is the fold of the
/// two histories together. A bound holding subject has no entries: its events are the
/// subject's.
struct Attributed {
    let engine: ProjectionEngine
    let generation: Generation
    let overlay: Overlay

    static func facts(_ bytes: UnsafeRawBufferPointer?) throws -> SubjectFacts {
        try bytes.map { bytes throws(StateDecoder.Damaged) in try SubjectFacts.decode(bytes) } ?? SubjectFacts()
    }

    /// The holders of `original` in the generation, `nil` when it has none or another version built them.
    func holders(of original: String, _ txn: borrowing Transaction) throws -> HoldersModel.State? {
        guard let record = generation.record(HoldersModel.name), record.version == UInt64(HoldersModel.version),
              let bytes = try engine.store.state(generation.number, tag: record.tagByte, original, txn, overlay) else { return nil }
        return try bytes.withUnsafeBytes { buffer throws(StateDecoder.Damaged) in try HoldersModel.State.decode(buffer) }
    }

    /// The subject a holding subject's events count for, `nil` for any other key.
    func boundSubject(ofHolding key: String, _ txn: borrowing Transaction) throws -> String? {
        guard key.hasPrefix(AppStoreSubjectBound.holdingPrefix),
              let holders = try holders(of: String(key.dropFirst(AppStoreSubjectBound.holdingPrefix.count)), txn),
              let index = holders.bound.firstIndex(of: key), index < holders.boundTo.count else { return nil }
        return holders.boundTo[index]
    }

    /// `key`'s entries in `model`: from its stored state and facts, with the events of the
    /// holding subjects its facts name folded onto both; none for a bound holding subject.
    func indexEntries(_ model: any ReadModel.Type, of key: String, stateBytes: UnsafeRawBufferPointer?, factsBytes: UnsafeRawBufferPointer?,
                      policy: Policy, _ txn: borrowing Transaction) throws -> [IndexEntry] {
        if try boundSubject(ofHolding: key, txn) != nil { return [] }
        return try typedEntries(model, of: key, stateBytes: stateBytes, facts: try Self.facts(factsBytes), policy: policy, txn)
    }

    /// `key`'s entries in `model` from its stored state and its facts already decoded, `key`
    /// being no bound holding subject (`refreshIndexes` decodes each key's facts once).
    func typedEntries<M: ReadModel>(_ model: M.Type, of key: String, stateBytes: UnsafeRawBufferPointer?, facts stored: SubjectFacts,
                                    policy: Policy, _ txn: borrowing Transaction) throws -> [IndexEntry] {
        var state = try stateBytes.map { bytes throws(StateDecoder.Damaged) in try M.State.decode(bytes) } ?? M.State()
        var facts = stored
        // The common case, a subject with no holding subject: its state and facts as they are.
        guard !facts.bound.isEmpty else { return M.indexEntries(of: state, facts: facts, policy: policy) }
        var items: [[UInt8]: M.Item] = [:]
        for holding in facts.bound {
            guard let holders = try holders(of: String(holding.dropFirst(AppStoreSubjectBound.holdingPrefix.count)), txn) else { continue }
            for position in holders.waiting {
                try engine.store.log.forEachEvent(after: position - 1, through: position, types: M.reads.union(SubjectFacts.reads), txn) { event in
                    guard event.subject == holding else { return }
                    var attributed = event
                    attributed.event.subject = key
                    facts.apply(attributed, policy: policy)
                    if M.reads.contains(attributed.type), M.key(for: attributed) == key { M.fold(attributed, into: &state, items: &items, policy: policy) }
                }
            }
        }
        return M.indexEntries(of: state, facts: facts, policy: policy)
    }
}
