import Crypto
@_spi(Storage) import LedgerCore
import LedgerAppStore
import LedgerModels
@_spi(Storage) import LedgerStore

extension Ledger {
    /// Ingests App Store Server Notifications V2: each of `bodies` one POST body
    /// (`{"signedPayload": …}`), verified by `verifier` (SPEC §2.2), then all their events
    /// appended as one atomic batch. A notification delivered again yields the same events,
    /// reported as duplicates.
    ///
    /// Each notification goes under its subject: the `appAccountToken` of its transaction (or
    /// renewal info); else the subject that reported its `originalTransactionId` last (an
    /// earlier body of `bodies` counts), from the holders index (`HoldersModel`); else it waits
    /// under `appstore:<originalTransactionId>`. Once a subject holds it, an
    /// `appstore.subject_bound` names the waiting subject in that subject's stream (the log is
    /// never rewritten). A notification about no transaction (TEST, summaries) goes under
    /// `appstore:<bundleId>`.
    /// - Throws: `LedgerError.invalidEvent` naming the failing body's `index` and, as `field`, the
    ///   reason (`AppStoreRejection.summary`) under `/signedPayload`; nothing of the batch is appended.
    @discardableResult
    public func ingestAppStore(_ bodies: [[UInt8]], verifier: SignedDataVerifier) async throws(LedgerError) -> AppendResult {
        var verified: [VerifiedNotification] = []
        for (index, body) in bodies.enumerated() {
            do {
                verified.append(try await verifier.verifyNotification(body: body))
            } catch {
                throw LedgerError(.invalidEvent, error.summary, index: index, field: "/signedPayload")
            }
        }
        var events: [LedgerEvent] = []
        var holders: [String: String] = [:]        // originalTransactionId → subject, this batch
        var bindings: Set<String> = []             // holding subjects bound in this batch
        for (index, notification) in verified.enumerated() {
            let subject: String
            var binding: AppStoreSubjectBound?
            if let original = notification.originalTransactionId {
                let waiting = "appstore:\(original)"
                let held = try view(HoldersModel.self, of: original)
                if let token = notification.appAccountToken {
                    subject = token
                } else if let earlier = holders[original] {
                    subject = earlier
                } else {
                    subject = held?.latest ?? waiting
                }
                // Events wait under the holding subject, and a subject now holds it.
                let waited = (held?.subjects.contains(waiting) ?? false) || holders[original] == waiting
                if subject != waiting, waited, !(held?.bound.contains(waiting) ?? false), !bindings.contains(waiting) {
                    binding = AppStoreSubjectBound(originalTransactionId: original, from: waiting)
                    bindings.insert(waiting)
                }
                holders[original] = subject
            } else {
                subject = "appstore:\(verifier.configuration.bundleId)"
            }
            let previous = try previousProduct(of: notification, holder: subject)
            do {
                events += try notification.events(subject: subject, previousProductId: previous)
            } catch {
                throw LedgerError(.invalidEvent, error.summary, index: index, field: "/signedPayload")
            }
            if let binding {
                events.append(LedgerEvent(id: Self.bindingID(binding, subject: subject), subject: subject, occurredAt: notification.signedDate,
                                          source: .appstore, data: binding.eventData))
            }
        }
        return try await append(events)
    }

    /// One POST body (see `ingestAppStore(_:verifier:)`).
    @discardableResult
    public func ingestAppStore(_ body: [UInt8], verifier: SignedDataVerifier) async throws(LedgerError) -> AppendResult {
        try await ingestAppStore([body], verifier: verifier)
    }

    /// The product an immediate upgrade leaves: the holder's latest subscription product, as
    /// the facts know it.
    private func previousProduct(of notification: VerifiedNotification, holder: String) throws(LedgerError) -> String? {
        guard AppStoreMapping.yield(type: notification.notificationType, subtype: notification.subtype) == .productChanged(.immediate),
              let original = notification.originalTransactionId else { return nil }
        let facts = try recordedEvents(of: holder).filter { event in
            if case .subscriptionPurchased(let p) = event.data { return p.originalTransactionId == original }
            if case .subscriptionRenewed(let r) = event.data { return r.originalTransactionId == original }
            return false
        }
        return facts.max { ($0.occurredAt, $0.position) < ($1.occurredAt, $1.position) }.flatMap { event in
            switch event.data {
            case .subscriptionPurchased(let p): p.productId
            case .subscriptionRenewed(let r): r.productId
            default: nil
            }
        }
    }

    /// The id of a binding: the same holding subject bound to the same subject is one event.
    static func bindingID(_ binding: AppStoreSubjectBound, subject: String) -> EventID {
        let digest = Array(SHA256.hash(data: Array("appstore.subject_bound/\(binding.originalTransactionId)/\(binding.from)/\(subject)".utf8)).prefix(16))
        return EventID(bytes: digest) ?? EventID(high: 0, low: 0)
    }
}
