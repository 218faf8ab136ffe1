@_spi(Storage) import LedgerCore

/// One line saying what an event is, for the audit: the facts a support agent reads first.
/// Personal fields (a note's text, a deletion request's reason, an export's location) show as
/// the ledger gives them to the audit: opened, or `"[Deleted User]"` once the subject is erased.
enum EventSummary {
    static func line(_ event: RecordedEvent) -> String {
        switch event.data {
        case .subscriptionPurchased(let p):
            let offer = p.offer.map { $0 == .freeTrial ? " with a free trial" : " (\($0.rawValue) offer)" } ?? ""
            return "purchased \(p.productId)\(offer), transaction \(p.transactionId), until \(p.expiresAt)"
        case .subscriptionRenewed(let r):
            return "renewed \(r.productId)\(r.billingRecovery == true ? " (billing recovered)" : ""), transaction \(r.transactionId), until \(r.expiresAt)"
        case .subscriptionRenewalFailed(let f):
            return "renewal of \(f.originalTransactionId) failed" + (f.gracePeriodExpiresAt.map { "; the store's grace period runs until \($0)" } ?? "")
        case .subscriptionGraceExpired(let e):
            return "the store ended the billing grace of \(e.originalTransactionId)"
        case .subscriptionAutoRenewChanged(let c):
            return c.enabled ? "turned auto-renew back on for \(c.originalTransactionId)" : "cancelled: auto-renew off for \(c.originalTransactionId)"
        case .subscriptionExpired(let e):
            return "subscription \(e.originalTransactionId) expired (\(e.reason.rawValue))"
        case .subscriptionRefunded(let r):
            return "transaction \(r.transactionId) refunded"
        case .subscriptionRefundReversed(let r):
            return "refund of transaction \(r.transactionId) reversed"
        case .subscriptionRevoked(let r):
            return "transaction \(r.transactionId) revoked" + (r.reason.map { " (\($0))" } ?? "")
        case .subscriptionProductChanged(let c):
            return "product \(c.fromProductId) → \(c.toProductId), \(c.effective == .immediate ? "at once" : "at the next renewal")"
        case .subscriptionRenewalExtended(let e):
            return "transaction \(e.transactionId) extended until \(e.expiresAt)"
        case .purchaseStarted(let p):
            return "purchase of \(p.productId) started on the device"
        case .purchasePending(let p):
            return "purchase of \(p.productId) pending (awaiting approval)"
        case .purchaseFailed(let p):
            return "purchase of \(p.productId) failed" + (p.reason.map { " (\($0))" } ?? "")
        case .entitlementVerified(let v):
            return "device verified the plan with StoreKit: \(v.plan.rawValue)" + (v.expiresAt.map { " until \($0)" } ?? "")
        case .entitlementVerificationFailed(let f):
            return "device could not verify the plan (\(f.reason.rawValue))"
        case .oneOffPurchased(let p):
            return "bought a \(p.kind == .recoveryPass ? "recovery pass" : "reactivation fee") (\(p.productId))"
        case .accountCreated(let c):
            return c.signedIn ? "account created, signed in" : "guest account created"
        case .accountSignedIn:
            return "signed in"
        case .accountSignedOut:
            return "signed out"
        case .accountDeletionRequested(let r):
            return "asked for the account to be deleted" + (r.reason.map { ": " + JSON.string($0).serialized() } ?? "")
        case .accountDeleted:
            return "account deleted"
        case .accountDeletionCancelled:
            return "cancelled the account deletion"
        case .accountDeletionStepCompleted(let s):
            return "deletion step \(s.step) done"
        case .accountDeletionStepFailed(let s):
            return "deletion step \(s.step) failed" + (s.error.map { " (\($0))" } ?? "")
        case .accountExportRequested:
            return "asked for a data export"
        case .accountExportCompleted(let e):
            return "data export ready" + (e.location.map { " at " + $0 } ?? "")
        case .resourceCreated(let r):
            return "\(r.kind) \(r.resourceId) created"
        case .resourceDeleted(let r):
            return "\(r.kind) \(r.resourceId) deleted"
        case .supportEntitlementGranted(let g):
            return "support (\(g.agent)) granted pro until \(g.until)"
        case .supportNoteAdded(let n):
            return "support note by \(n.agent): " + JSON.string(n.text).serialized()
        case .familyOrganizerCancelled(let c):
            return "family organizer \(c.organizer) cancelled the shared plan"
        case .sessionStarted(let s):
            return "session started on \(s.deviceId) in \(s.timeZone)"
        case .sessionBackgrounded(let s):
            return "app went to the background on \(s.deviceId)"
        case .sessionForegrounded(let s):
            return "app came back on \(s.deviceId)"
        case .sessionEnded(let s):
            return s.reason == .crash ? "app crashed on \(s.deviceId)" : "session ended on \(s.deviceId) (\(s.reason.rawValue))"
        case .inboxMessageDelivered(let m):
            return "inbox message \(m.messageId) delivered"
        case .inboxMessageRead(let m):
            return "inbox message \(m.messageId) read"
        case .maintenanceScheduled(let m):
            return "maintenance \(m.taskId) due \(m.dueDate)"
        case .maintenanceCompleted(let m):
            return "maintenance \(m.taskId) done"
        case .securityFlagRaised(let f):
            return "security flag \(f.flag) raised"
        case .securityFlagCleared(let f):
            return "security flag \(f.flag) cleared"

        default:
            return generic(event)
        }
    }

    /// The type and its scalar fields, for the types with no sentence of their own.
    static func generic(_ event: RecordedEvent) -> String {
        guard let layout = EventCatalog.layout(of: event.type, version: type(of: event.data.payload).schemaVersion) else { return event.type }
        let fields = layout.json(event.data.payload).members.compactMap { member -> String? in
            switch member.value {
            case .string(let text): "\(member.key) \(text)"
            case .bool, .number: "\(member.key) \(member.value.serialized())"
            default: nil
            }
        }
        return fields.isEmpty ? event.type : fields.joined(separator: ", ")
    }
}
