/// The policy packs of `Schemas/policies/`, built into the binary so that `--policy NAME`
/// works from anywhere (SPEC §5). Each is the file's text (a test checks that the two are
/// equal); the reference pack is `Policy.reference`, compiled in already.
extension Policy {
    /// The source apps' packs: name and JSON text, in SPEC §3's order, then the soft
    /// variant of stampbook's deletion that seed 003 plans.
    public static let packTexts: [(name: String, text: String)] = [
        ("handz", #"""
{
  "name": "handz",
  "version": 1,
  "description": "Seed 004 (StoreKit decisions): 7-day trial, 3-day billing grace from policy, 24 h offline grace and verification, trial-ending notice 48 h ahead (CH27), hard account deletion (CH34). No retention flow, no limits, no daily access cap.",
  "subscription": {
    "trialDays": 7,
    "billingGraceDays": 3,
    "billingGraceSource": "policy",
    "billingRetryDays": 60,
    "offlineGraceHours": 24,
    "verificationIntervalHours": 24
  },
  "notifications": {
    "trialEndingLeadHours": 48,
    "retentionEmailDays": []
  },
  "deletion": {
    "mode": "hard"
  }
}
"""#),
        ("photolala", #"""
{
  "name": "photolala",
  "version": 1,
  "description": "Seed 000 (cancellation and non-payment): billing grace is Apple's 60-day retry window; day 0 of the retention flow is the cancellation; 30-day grace, browse-only to day 90, archived to day 365, $19.99 reactivation, 7-day recovery pass, 60 days for family members; emails on days 7, 23, 29, 31, 60 and 350.",
  "subscription": {
    "trialDays": 7,
    "billingGraceDays": 60,
    "billingGraceSource": "policy",
    "billingRetryDays": 60,
    "offlineGraceHours": 24,
    "verificationIntervalHours": 24
  },
  "retention": {
    "startsAt": "cancellation",
    "graceDays": 30,
    "browseOnlyUntilDay": 90,
    "pendingDeletionFromDay": 365,
    "reactivationFee": {
      "amount": "19.99",
      "currency": "USD"
    },
    "recoveryPassDays": 7,
    "familyMemberGraceDays": 60
  },
  "notifications": {
    "trialEndingLeadHours": 48,
    "retentionEmailDays": [
      7,
      23,
      29,
      31,
      60,
      350
    ]
  }
}
"""#),
        ("facerecall", #"""
{
  "name": "facerecall",
  "version": 1,
  "description": "Seed 001 (FaceRecall subscription plan): free tier limited to 25 people and 5 tags, warning at 80 %, existing users unlimited for 30 days after limits were introduced.",
  "subscription": {
    "trialDays": 7,
    "billingGraceDays": 3,
    "billingGraceSource": "store",
    "billingRetryDays": 60,
    "offlineGraceHours": 24,
    "verificationIntervalHours": 24
  },
  "limits": {
    "free": {
      "person": 25,
      "tag": 5
    },
    "softLimitRatio": 0.8,
    "effectiveAt": "2026-01-01T00:00:00.000Z",
    "existingUserGraceDays": 30
  }
}
"""#),
        ("careguide", #"""
{
  "name": "careguide",
  "version": 1,
  "description": "Seed 002 (Careguide): 7-day trial; basic users get one session per device per local day; a pause of up to 5 minutes resumes the same session.",
  "subscription": {
    "trialDays": 7,
    "billingGraceDays": 3,
    "billingGraceSource": "store",
    "billingRetryDays": 60,
    "offlineGraceHours": 24,
    "verificationIntervalHours": 24
  },
  "access": {
    "freeSessionsPerDay": 1,
    "resumeWithinSeconds": 300,
    "maxClockSkewSeconds": 300
  },
  "notifications": {
    "trialEndingLeadHours": 48,
    "retentionEmailDays": []
  }
}
"""#),
        ("stampbook", #"""
{
  "name": "stampbook",
  "version": 1,
  "description": "Seed 003 (Stampbook account deletion): the MVP deletes hard; switch mode to soft with softGraceDays 30 for the planned soft delete.",
  "subscription": {
    "trialDays": 7,
    "billingGraceDays": 3,
    "billingGraceSource": "store",
    "billingRetryDays": 60,
    "offlineGraceHours": 24,
    "verificationIntervalHours": 24
  },
  "deletion": {
    "mode": "hard"
  }
}
"""#),
        ("stampbook-soft", #"""
{
  "name": "stampbook-soft",
  "version": 1,
  "description": "Seed 003 (Stampbook account deletion), the planned soft delete: a deletion waits 30 days and can be cancelled until then.",
  "subscription": {
    "trialDays": 7,
    "billingGraceDays": 3,
    "billingGraceSource": "store",
    "billingRetryDays": 60,
    "offlineGraceHours": 24,
    "verificationIntervalHours": 24
  },
  "deletion": {
    "mode": "soft",
    "softGraceDays": 30
  }
}
"""#),
    ]

    /// The built-in pack called `name`, or `nil`.
    public static func pack(named name: String) -> Policy? {
        if name == reference.name { return reference }
        guard let text = packTexts.first(where: { $0.name == name })?.text else { return nil }
        return try? decode(Array(text.utf8)).get()
    }
}
