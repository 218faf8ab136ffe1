@_spi(Storage) import LedgerCore
import LedgerAppStore
import LedgerModels
@_spi(Storage) import LedgerStore

/// What the batches of one ingest have decided so far, for the next: the subject each
/// subscription and each notification went to, and the products.
/// Several batches prepared before any is appended (the command line's files) share one.
public struct AppStoreIngestContext: Sendable {
    /// originalTransactionId → the subject its latest notification went to.
    var holders: [String: String] = [:]
    /// notificationUUID (lower-cased) → the subject it went to.
    var notifications: [String: String] = [:]
    /// originalTransactionId → the product it has, as these batches left it.
    var products: [String: String] = [:]

    public init() {}
}

extension Ledger {
    /// Ingests App Store Server Notifications V2: each of `bodies` one POST body
    /// (`{"signedPayload": …}`), verified by `verifier` (SPEC §2.2), then all their events
    /// appended as one atomic batch. A notification delivered again yields the same events,
    /// under the same subject, reported as duplicates.
    ///
    /// Each notification goes under its subject: the one it went to when first stored; else the
    /// `appAccountToken` of its transaction (or renewal info); else the subject that named its
    /// `originalTransactionId` last (an earlier body counts), from the holders index
    /// (`HoldersModel`); else it waits under `appstore:<originalTransactionId>`. Once another
    /// subject names a subscription that waited — the app reports the purchase, or a later
    /// notification carries a token — the ledger appends an `appstore.subject_bound` to that
    /// subject's stream, and its views count the waiting events from then on
    /// (`HoldersModel.binding(after:holders:)`; the log is never rewritten). A notification
    /// about no transaction (TEST, summaries) goes under `appstore:<bundleId>`.
    /// - Throws: `LedgerError.invalidEvent` naming the failing body's `index` and the reason
    ///   (`AppStoreRejection.summary`) under `/signedPayload`; nothing of the batch is appended.
    @discardableResult
    public func ingestAppStore(_ bodies: [[UInt8]], verifier: SignedDataVerifier) async throws(LedgerError) -> AppendResult {
        var context = AppStoreIngestContext()
        return try await append(try await prepareAppStore(bodies, verifier: verifier, context: &context))
    }

    /// One POST body (see `ingestAppStore(_:verifier:)`).
    @discardableResult
    public func ingestAppStore(_ body: [UInt8], verifier: SignedDataVerifier) async throws(LedgerError) -> AppendResult {
        try await ingestAppStore([body], verifier: verifier)
    }

    /// The events `ingestAppStore` would append for `bodies`, nothing appended: verified,
    /// under their subjects, mapped. Batches prepared in turn with one `context` see each
    /// other's decisions, so that all can be checked before any is appended.
    /// - Throws: as `ingestAppStore`.
    public func prepareAppStore(_ bodies: [[UInt8]], verifier: SignedDataVerifier,
                                context: inout AppStoreIngestContext) async throws(LedgerError) -> [LedgerEvent] {
        var notifications: [VerifiedNotification] = []
        for (index, body) in bodies.enumerated() {
            do {
                notifications.append(try await verifier.verifyNotification(body: body))
            } catch {
                throw LedgerError(.invalidEvent, error.summary, index: index, field: "/signedPayload")
            }
        }
        return try prepareAppStore(notifications, bundleId: verifier.configuration.bundleId, context: &context)
    }

    /// The events of notifications already verified (for `bundleId`), nothing appended: see
    /// `prepareAppStore(_:verifier:context:)`.
    public func prepareAppStore(_ notifications: [VerifiedNotification], bundleId: String,
                                context: inout AppStoreIngestContext) throws(LedgerError) -> [LedgerEvent] {
        var events: [LedgerEvent] = []
        for (index, notification) in notifications.enumerated() {
            do {
                events += try prepare(notification, bundleId: bundleId, context: &context)
            } catch let error as AppStoreRejection {
                throw LedgerError(.invalidEvent, error.summary, index: index, field: "/signedPayload")
            } catch let error as LedgerError {
                throw error
            } catch {
                throw LedgerError(.storage, "\(error)", index: index)
            }
        }
        return events
    }

    /// One verified notification's events, under its subject.
    private func prepare(_ notification: VerifiedNotification, bundleId: String, context: inout AppStoreIngestContext) throws -> [LedgerEvent] {
        let uuid = notification.notificationUUID.lowercased()
        guard let original = notification.originalTransactionId else {
            let subject = context.notifications[uuid] ?? stored(notification)?.subject ?? "appstore:\(bundleId)"
            context.notifications[uuid] = subject
            return try notification.events(subject: subject)
        }
        let waiting = AppStoreSubjectBound.holdingSubject(of: original)
        let subject: String
        // A notification seen before goes where it went then: its events are duplicates.
        if let earlier = context.notifications[uuid] ?? stored(notification)?.subject {
            subject = earlier
        } else {
            let held = try view(HoldersModel.self, of: original)
            subject = notification.appAccountToken ?? context.holders[original] ?? held?.latest ?? waiting
        }
        context.notifications[uuid] = subject
        context.holders[original] = subject
        let previous = try previousProduct(of: original, before: notification.signedDate, holders: [subject, waiting], context: context)
        let events = try notification.events(subject: subject, previousProductId: previous)
        for event in events {
            switch event.data {
            case .subscriptionPurchased(let p): context.products[original] = p.productId
            case .subscriptionRenewed(let r): context.products[original] = r.productId
            case .subscriptionProductChanged(let c) where c.effective == .immediate: context.products[original] = c.toProductId
            default: break
            }
        }
        return events
    }

    /// The stored `appstore.notification` of a notification delivered before, if any.
    private func stored(_ notification: VerifiedNotification) -> StoredEvent? {
        try? event(id: notification.notificationEventID)
    }

    /// The product subscription `original` had before `time`: what the batches prepared so far
    /// left it, else the latest purchase, renewal or immediate change of the holders' events
    /// that happened by then.
    private func previousProduct(of original: String, before time: Timestamp, holders: [String], context: AppStoreIngestContext) throws(LedgerError) -> String? {
        if let product = context.products[original] { return product }
        var latest: (at: Timestamp, position: UInt64, product: String)?
        for holder in holders {
            for event in try recordedEvents(of: holder) where event.occurredAt <= time {
                let product: String? = switch event.data {
                case .subscriptionPurchased(let p) where p.originalTransactionId == original: p.productId
                case .subscriptionRenewed(let r) where r.originalTransactionId == original: r.productId
                case .subscriptionProductChanged(let c) where c.originalTransactionId == original && c.effective == .immediate: c.toProductId
                default: nil
                }
                guard let product else { continue }
                if latest.map({ ($0.at, $0.position) < (event.occurredAt, event.position) }) ?? true {
                    latest = (event.occurredAt, event.position, product)
                }
            }
        }
        return latest?.product
    }
}
