@_spi(Storage) import LedgerCore
import LedgerModels

extension Ledger {
    /// One page of the audit: at most `limit` entries, from the start or from where `cursor`
    /// (a page's `next`) says — its moment and knowledge then replace `t` and `knownAt`. The
    /// walk stops once the page is worked out, so an early page of a long history is quick;
    /// page k walks the k pages before it too.
    public func audit(of subject: String, at t: Timestamp = .now(), knownAt: KnownAt? = nil, limit: Int,
                      after cursor: AuditCursor? = nil) throws(LedgerError) -> AuditReport {
        let (at, known) = cursor.map { ($0.at, $0.knownAt) } ?? (t, knownAt)
        let events = try attributed(subject, knownAt: known, revealing: true)
        return Audit.report(subject: subject, events: events, at: at, knownAt: known, models: engine.models, policy: try policy(),
                            paging: AuditPaging(limit: limit, offset: cursor?.offset ?? 0))
    }
}
