@_spi(Storage) import LedgerCore
import LedgerModels
import LedgerProjections

/// Where a server's JSON routes get their answers when its store is one node's of a cluster
/// (`ledger node --port`): the cluster, through NATS, from each subject's holder. Every
/// answer but `stats` has the single store's shape; positions are the cluster's (stream
/// sequences).
///
/// The store the server was given keeps its access tokens and answers `/metrics` for the node;
/// the support pages read their cards and timeline from here too.
@_spi(Cluster) public protocol ClusterAnswers: Sendable {
    /// Appends a batch (`POST /v1/events`), each partition's part at its holder.
    func append(_ drafts: [EventDraft]) throws(LedgerError) -> AppendResult
    /// `status --json`.
    func status(of subject: String, at t: Timestamp, knownAt: KnownAt?) throws(LedgerError) -> JSON
    /// `audit --json`.
    func audit(of subject: String, at t: Timestamp, knownAt: KnownAt?) throws(LedgerError) -> JSON
    /// The subject's events as export lines, in order.
    func exportLines(of subject: String) throws(LedgerError) -> [String]
    /// The subjects holding a transaction (`transactionId`) or a subscription
    /// (`originalTransactionId`), sorted.
    func subjects(holdingTransaction transactionId: String?, original originalTransactionId: String?) throws(LedgerError) -> [String]
    /// What falls due at from ≤ at < to in every partition, in `Ledger.due`'s order.
    func due(from: Timestamp, to: Timestamp) throws(LedgerError) -> [DueItem]
    /// `stats --cluster --json`: each node's store, and the stream's last sequence.
    func stats() throws(LedgerError) -> JSON
    /// What a customer's support page shows.
    func customer(_ subject: String, at t: Timestamp, knownAt: KnownAt?) throws(LedgerError) -> CustomerPage
    /// `/healthz`: the node's name and the partitions it holds.
    func health() -> JSON
}

/// What a customer's support page shows: each model's card (`nil`: the policy has no such
/// model), the audit's timeline, the zone of the latest session and how many events there are.
@_spi(Cluster) public struct CustomerPage: Sendable {
    public var cards: [(model: String, card: ViewCard?)]
    public var audit: AuditReport
    public var zone: String?
    public var version: UInt64

    public init(cards: [(model: String, card: ViewCard?)], audit: AuditReport, zone: String?, version: UInt64) {
        self.cards = cards
        self.audit = audit
        self.zone = zone
        self.version = version
    }
}
