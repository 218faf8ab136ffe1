extension Policy {
    /// The reference policy (SPEC §3's middle column, every feature on): the default of
    /// `ledger init`. `Schemas/policies/reference.json` holds the same document; a test checks
    /// that the two are equal.
    public static let reference = Policy(
        name: "reference", version: 1,
        description: "Every feature on, with SPEC §3's reference values. The default for `ledger init`.",
        subscription: Subscription(trialDays: 7, billingGraceDays: 3, billingGraceSource: .store, billingRetryDays: 60,
                                   offlineGraceHours: 24, verificationIntervalHours: 24),
        retention: Retention(startsAt: .accessEnd, graceDays: 30, browseOnlyUntilDay: 90, pendingDeletionFromDay: 365,
                             reactivationFee: Money(amount: "19.99", currency: "USD"), recoveryPassDays: 7, familyMemberGraceDays: 60),
        limits: Limits(free: ["person": 25, "tag": 5], softLimitRatio: 0.8,
                       effectiveAt: Timestamp(milliseconds: 1_767_225_600_000),   // 2026-01-01T00:00:00.000Z
                       existingUserGraceDays: 30),
        access: Access(freeSessionsPerDay: 1, resumeWithinSeconds: 300, maxClockSkewSeconds: 300),
        notifications: Notifications(trialEndingLeadHours: 48, retentionEmailDays: [7, 23, 29, 31, 60, 350]),
        deletion: Deletion(mode: .hard, softGraceDays: nil))
}
