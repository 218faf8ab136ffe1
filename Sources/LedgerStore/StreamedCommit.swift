import Crypto
@_spi(Storage) import LMDB
@_spi(Storage) import LedgerCore

/// Streamed batches: a restore, an import or a replica's events written in one transaction,
/// pulled one at a time (the calling thread).
extension LogStorage {
    /// How far a restored event's recordedAt may lie ahead of this machine's clock (the clocks of
    /// the machine that exported and this one differ a little).
    static let restoreClockSkewMilliseconds: Int64 = 5 * 60_000

    /// Appends every event `makeEvents` yields in one write transaction, pulling them one at
    /// a time so that a batch of any size takes bounded memory. `makeEvents` is called again
    /// (and must start over) if the map fills and the transaction is retried.
    ///
    /// With `replicating`, each event keeps the `recordedAt` it carries (raised to the
    /// previous event's, so that recorded times never go back) but takes the next position;
    /// `settings` are written in the same transaction (a cluster node's checkpoint).
    func commitStream(restoring: Bool, replicating: Bool = false, settings: [String: JSONObject] = [:],
                      _ makeEvents: () throws -> any StreamedEvents) throws -> StreamSummary {
        try writeAppends { txn, head, session in
            for (name, object) in settings.sorted(by: { $0.key < $1.key }) {
                try txn.put(meta, key: LogSchema.settingKey(name), value: Array(JSON.object(object).serialized(sortedKeys: true).utf8))
            }
            let clock = clock()
            let now = max(clock, head.recordedAt)
            let before = head.position
            var summary = StreamSummary()
            var source = try makeEvents()
            while let item = try source.next() {
                let draft = item.draft
                let data: EventData
                do {
                    data = try draft.validate()
                } catch let error as LedgerError {
                    throw item.locate(error)
                }
                var recordedAt = now
                if replicating, let stamped = item.recordedAt {
                    recordedAt = max(stamped, head.recordedAt)
                } else if restoring {
                    guard let position = item.position, let stamped = item.recordedAt else {
                        throw item.locate(LedgerError(.invalidEvent, "a restore needs the position and recordedAt that export wrote", field: item.position == nil ? "/position" : "/recordedAt"))
                    }
                    recordedAt = stamped
                    if position <= head.position {
                        // Already restored (a rerun): it must be this very event, recorded then.
                        let record = try txn.get(events, key: LogSchema.key(position))
                        guard let record, EventRecord.id(ofRecord: record) == draft.id, EventRecord.recordedAt(ofRecord: record) == stamped,
                              try lookUp(draft, hash: IDIndex.hash(draft.id), content: EventRecord.content(of: draft)[...], txn, &head) == .same(position: position)
                        else {
                            throw item.locate(LedgerError(.idConflict, "position \(position) already holds another event (or the same one recorded at another time); restore into an empty store",
                                                          field: "/position", position: position))
                        }
                        summary.duplicates += 1
                        continue
                    }
                    guard position == head.position + 1 else {
                        throw item.locate(LedgerError(.invalidEvent, "position \(position) does not follow the store's last position \(head.position); a restore keeps positions gap-free", field: "/position"))
                    }
                    guard stamped >= head.recordedAt else {
                        throw item.locate(LedgerError(.invalidEvent, "recordedAt \(stamped) is before the previous event's \(head.recordedAt); recorded times never go back", field: "/recordedAt"))
                    }
                    guard stamped.milliseconds <= clock.milliseconds + Self.restoreClockSkewMilliseconds else {
                        throw item.locate(LedgerError(.invalidEvent, "recordedAt \(stamped) is later than this machine's clock (\(clock)) by more than \(Self.restoreClockSkewMilliseconds / 60_000) minutes; "
                                                      + "recorded times never go back, so every later append would be stamped with it: check the file, or this machine's clock", field: "/recordedAt"))
                    }
                }
                var record = EventRecord.encode(draft, version: 0, recordedAt: recordedAt)
                let idHash = IDIndex.hash(draft.id)
                switch try lookUp(draft, hash: idHash, content: EventRecord.content(ofUnhashed: record), txn, &head) {
                case .absent:
                    break
                case .same(let position):
                    if restoring {
                        throw item.locate(LedgerError(.idConflict, "event id \(draft.id) is already stored at position \(position); restore into an empty store", field: "/id", position: position))
                    }
                    summary.duplicates += 1
                    continue
                case .different(let position) where position > before:
                    // Its first line is in this very batch (not stored, so no position to name):
                    // read the batch again from its start to name that line.
                    var again = try makeEvents()
                    var earlier: StreamedEvent?
                    while let other = try again.next(), earlier == nil { if other.draft.id == draft.id { earlier = other } }
                    let place = earlier?.line.map { "line \($0)" } ?? "an earlier line"
                    throw item.locate(LedgerError(.idConflict, "event id \(draft.id) is also on \(place) of this batch, with other content; an id names one fact, so give a new fact a new id",
                                                  field: "/id", subject: draft.subject))
                case .different(let position):
                    throw item.locate(LedgerError.idConflict(draft.id, storedAt: position, index: nil, subject: draft.subject))
                }
                var (stored, storedData) = (draft, data)
                if let (sealedDraft, sealedData) = try sealed(draft, data, txn, &head) {
                    (stored, storedData) = (sealedDraft, sealedData)
                    record = EventRecord.encode(stored, version: 0, recordedAt: recordedAt)
                }
                let written = try write(&record, idHash: idHash, draft: stored, data: storedData, recordedAt: recordedAt, txn, &head, session)
                try afterWriting(stored, at: written.position, txn, &head)
                if replicating, let origin = item.origin {
                    try txn.put(meta, key: LogSchema.originKey(written.position), value: LogSchema.key(origin))
                }
                if restoring || replicating { _ = session?.derived() } else { _ = try writeDerived(recordedAt, txn, &head, session) }
                summary.appended += 1
                summary.firstPosition = summary.firstPosition ?? written.position
                summary.lastPosition = written.position
            }
            return summary
        }
    }
}
