extension Policy {
    /// Reads a policy document strictly: every problem is reported with the JSON pointer of its
    /// field (`/retention/graceDays`), as `Schemas/policy.schema.json` would.
    public static func decode(_ bytes: [UInt8]) -> Result<Policy, FieldViolations> {
        let json: JSON
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            return .failure(FieldViolations([FieldViolation(field: "/", message: "not valid JSON: \(error.message) at byte \(error.offset + 1)")]))
        }
        return decode(json)
    }

    /// Reads a parsed policy document strictly.
    public static func decode(_ json: JSON) -> Result<Policy, FieldViolations> {
        var problems: [FieldViolation] = []
        guard case .object(let root) = json else {
            return .failure(FieldViolations([FieldViolation(field: "/", message: "expected an object, got \(json.kind)")]))
        }
        var top = Section(root, path: [], keys: ["name", "version", "description", "subscription", "retention", "limits", "access", "notifications", "deletion"],
                          optional: ["description", "retention", "limits", "access", "notifications", "deletion"])
        let name = top.string("name", nonEmpty: true)
        let version = top.integer("version", .count, minimum: 1)
        let description = top.has("description") ? top.string("description", nonEmpty: false) : nil

        var subscription: Subscription?
        if var s = top.section("subscription", keys: ["trialDays", "billingGraceDays", "billingGraceSource", "billingRetryDays", "offlineGraceHours", "verificationIntervalHours"]) {
            let values = (s.integer("trialDays", .days, minimum: 1), s.integer("billingGraceDays", .days, minimum: 0), s.choice("billingGraceSource", Subscription.GraceSource.self),
                          s.integer("billingRetryDays", .days, minimum: 0), s.integer("offlineGraceHours", .hours, minimum: 0), s.integer("verificationIntervalHours", .hours, minimum: 1))
            problems += s.problems
            if let a = values.0, let b = values.1, let c = values.2, let d = values.3, let e = values.4, let f = values.5 {
                subscription = Subscription(trialDays: a, billingGraceDays: b, billingGraceSource: c, billingRetryDays: d, offlineGraceHours: e, verificationIntervalHours: f)
            }
        }

        var retention: Retention?
        if var r = top.section("retention", keys: ["startsAt", "graceDays", "browseOnlyUntilDay", "pendingDeletionFromDay", "reactivationFee", "recoveryPassDays", "familyMemberGraceDays"]) {
            var fee: Money?
            if var f = r.section("reactivationFee", keys: ["amount", "currency"]) {
                let amount = f.pattern("amount", Patterns.isDecimal, "a decimal string such as \"19.99\"")
                let currency = f.pattern("currency", Patterns.isCurrency, "a three-letter currency code such as \"USD\"")
                problems += f.problems
                if let amount, let currency { fee = Money(amount: amount, currency: currency) }
            }
            let values = (r.choice("startsAt", Retention.Start.self), r.integer("graceDays", .days, minimum: 0), r.integer("browseOnlyUntilDay", .days, minimum: 0),
                          r.integer("pendingDeletionFromDay", .days, minimum: 1), r.integer("recoveryPassDays", .days, minimum: 1), r.integer("familyMemberGraceDays", .days, minimum: 0))
            problems += r.problems
            if let a = values.0, let b = values.1, let c = values.2, let d = values.3, let e = values.4, let f = values.5, let fee {
                retention = Retention(startsAt: a, graceDays: b, browseOnlyUntilDay: c, pendingDeletionFromDay: d, reactivationFee: fee, recoveryPassDays: e, familyMemberGraceDays: f)
            }
        }

        var limits: Limits?
        if var l = top.section("limits", keys: ["free", "softLimitRatio", "effectiveAt", "existingUserGraceDays"]) {
            var free: [String: Int64]?
            if let value = l.value("free") {
                if case .object(let kinds) = value, !kinds.members.isEmpty {
                    var table: [String: Int64] = [:]
                    for member in kinds.members {
                        if case .number(let n) = member.value, let v = n.int64, v >= 1, v <= Section.Unit.count.maximum, !member.key.isEmpty {
                            table[member.key] = v
                        } else {
                            l.problems.append(FieldViolation(field: JSONPointer.make(["limits", "free", member.key]), message: "expected a whole number from 1 to \(Section.Unit.count.maximum) for a non-empty resource kind, got \(EnvelopeDecoder.describe(member.value))"))
                        }
                    }
                    free = table
                } else {
                    l.problems.append(FieldViolation(field: "/limits/free", message: "expected an object of resource kind → limit, such as {\"person\": 25}, got \(EnvelopeDecoder.describe(value))"))
                }
            }
            var ratio: Double?
            if let value = l.value("softLimitRatio") {
                if case .number(let n) = value, let v = n.double, v > 0, v <= 1 { ratio = v } else {
                    l.problems.append(FieldViolation(field: "/limits/softLimitRatio", message: "expected a number in (0, 1], got \(EnvelopeDecoder.describe(value))"))
                }
            }
            let effectiveAt = l.time("effectiveAt")
            let grace = l.integer("existingUserGraceDays", .days, minimum: 0)
            problems += l.problems
            if let free, let ratio, let effectiveAt, let grace {
                limits = Limits(free: free, softLimitRatio: ratio, effectiveAt: effectiveAt, existingUserGraceDays: grace)
            }
        }

        var access: Access?
        if var a = top.section("access", keys: ["freeSessionsPerDay", "resumeWithinSeconds", "maxClockSkewSeconds"]) {
            let values = (a.integer("freeSessionsPerDay", .sessionsPerDay, minimum: 1), a.integer("resumeWithinSeconds", .seconds, minimum: 0), a.integer("maxClockSkewSeconds", .seconds, minimum: 0))
            problems += a.problems
            if let x = values.0, let y = values.1, let z = values.2 { access = Access(freeSessionsPerDay: x, resumeWithinSeconds: y, maxClockSkewSeconds: z) }
        }

        var notifications: Notifications?
        if var n = top.section("notifications", keys: ["trialEndingLeadHours", "retentionEmailDays"]) {
            let lead = n.integer("trialEndingLeadHours", .hours, minimum: 1)
            var days: [Int64]?
            if let value = n.value("retentionEmailDays") {
                let numbers: [Int64]? = {
                    guard case .array(let items) = value else { return nil }
                    let parsed = items.compactMap { item -> Int64? in
                        if case .number(let n) = item, let v = n.int64, v >= 0, v <= Section.Unit.days.maximum { return v }
                        return nil
                    }
                    return parsed.count == items.count && Set(parsed).count == parsed.count ? parsed : nil
                }()
                if let numbers { days = numbers } else {
                    n.problems.append(FieldViolation(field: "/notifications/retentionEmailDays", message: "expected a list of distinct whole days from 0 to \(Section.Unit.days.maximum) (100 years), got \(EnvelopeDecoder.describe(value))"))
                }
            }
            problems += n.problems
            if let lead, let days { notifications = Notifications(trialEndingLeadHours: lead, retentionEmailDays: days) }
        }

        var deletion: Deletion?
        if var d = top.section("deletion", keys: ["mode", "softGraceDays"], optional: ["softGraceDays"]) {
            let mode = d.choice("mode", Deletion.Mode.self)
            var grace: Int64?
            if mode == .soft || d.has("softGraceDays") {
                if mode == .hard {
                    d.problems.append(FieldViolation(field: "/deletion/softGraceDays", message: "only a soft deletion has a grace period; remove it or set mode to soft"))
                } else if d.has("softGraceDays") {
                    grace = d.integer("softGraceDays", .days, minimum: 1)
                } else {
                    d.problems.append(FieldViolation(field: "/deletion/softGraceDays", message: "missing; a soft deletion says how many days it can be cancelled"))
                }
            }
            problems += d.problems
            if let mode, mode == .hard || grace != nil { deletion = Deletion(mode: mode, softGraceDays: grace) }
        }

        problems = top.problems + problems
        guard problems.isEmpty, let name, let version, let subscription else { return .failure(FieldViolations(problems)) }
        return .success(Policy(name: name, version: version, description: description, subscription: subscription, retention: retention,
                               limits: limits, access: access, notifications: notifications, deletion: deletion))
    }
}

/// One object of the policy document being read: checks its keys and reads its values,
/// collecting problems with their pointers.
private struct Section {
    let object: JSONObject
    let path: [String]
    var problems: [FieldViolation] = []

    init(_ object: JSONObject, path: [String], keys: [String], optional: Set<String> = []) {
        self.object = object
        self.path = path
        for key in object.keys where !keys.contains(key) {
            self.problems.append(FieldViolation(field: JSONPointer.make(path + [key]), message: "unknown key; \(path.isEmpty ? "a policy" : "this section") has \(keys.joined(separator: ", "))"))
        }
        for key in keys where !optional.contains(key) && object[key] == nil {
            self.problems.append(FieldViolation(field: JSONPointer.make(path + [key]), message: path.isEmpty ? "missing; every policy has it" : "missing; every key of a present section is required"))
        }
    }

    func has(_ key: String) -> Bool { object[key] != nil }

    func value(_ key: String) -> JSON? { object[key] }

    private mutating func wrong(_ key: String, _ expected: String, _ value: JSON) {
        problems.append(FieldViolation(field: JSONPointer.make(path + [key]), message: "expected \(expected), got \(EnvelopeDecoder.describe(value))"))
    }

    /// A nested object that must be present unless listed optional by the parent; `nil` when
    /// absent or not an object (reported).
    mutating func section(_ key: String, keys: [String], optional: Set<String> = []) -> Section? {
        guard let value = object[key] else { return nil }
        guard case .object(let o) = value else {
            wrong(key, "an object", value)
            return nil
        }
        return Section(o, path: path + [key], keys: keys, optional: optional)
    }

    /// What a whole number of a policy counts, which bounds it: no span is longer than 100
    /// years in its unit, so that no rule's sum of spans comes near the ends of a timestamp
    /// (and time arithmetic saturates besides, for a policy built in code).
    enum Unit {
        case days, hours, seconds, sessionsPerDay, count

        /// The largest value allowed.
        var maximum: Int64 {
            switch self {
            case .days: 36_500
            case .hours: 876_000
            case .seconds: 3_153_600_000
            case .sessionsPerDay: 86_400
            case .count: 1_000_000
            }
        }

        /// What a valid value is, for messages, with the bound and why.
        func expected(minimum: Int64) -> String {
            switch self {
            case .days: "a whole number of days from \(minimum) to \(maximum) (100 years)"
            case .hours: "a whole number of hours from \(minimum) to \(maximum) (100 years)"
            case .seconds: "a whole number of seconds from \(minimum) to \(maximum) (100 years)"
            case .sessionsPerDay: "a whole number of sessions from \(minimum) to \(maximum) (one a second)"
            case .count: "a whole number from \(minimum) to \(maximum)"
            }
        }
    }

    mutating func integer(_ key: String, _ unit: Unit, minimum: Int64) -> Int64? {
        guard let value = object[key] else { return nil }
        guard case .number(let n) = value, let v = n.int64, v >= minimum, v <= unit.maximum else {
            wrong(key, unit.expected(minimum: minimum), value)
            return nil
        }
        return v
    }

    mutating func string(_ key: String, nonEmpty: Bool) -> String? {
        guard let value = object[key] else { return nil }
        guard case .string(let s) = value, !nonEmpty || !s.isEmpty else {
            wrong(key, nonEmpty ? "a non-empty string" : "a string", value)
            return nil
        }
        return s
    }

    mutating func pattern(_ key: String, _ isValid: (String) -> Bool, _ expected: String) -> String? {
        guard let value = object[key] else { return nil }
        guard case .string(let s) = value, isValid(s) else {
            wrong(key, expected, value)
            return nil
        }
        return s
    }

    mutating func time(_ key: String) -> Timestamp? {
        guard let value = object[key] else { return nil }
        guard case .string(let s) = value, let t = Timestamp(rfc3339: s) else {
            problems.append(FieldViolation(field: JSONPointer.make(path + [key]), message: Timestamp.inputProblem(value)))
            return nil
        }
        return t
    }

    mutating func choice<E: RawRepresentable & CaseIterable>(_ key: String, _: E.Type) -> E? where E.RawValue == String {
        guard let value = object[key] else { return nil }
        guard case .string(let s) = value, let v = E(rawValue: s) else {
            wrong(key, "one of " + E.allCases.map(\.rawValue).joined(separator: ", "), value)
            return nil
        }
        return v
    }
}
