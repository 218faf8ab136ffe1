// Accounts, deletion and support (SPEC §2.3, second table).

/// `account.created`: a new account; `signedIn: false` is a guest.
public struct AccountCreated: EventPayload {
    public static let type = "account.created"
    public var signedIn = false
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(signedIn: Bool = false) {
        self.signedIn = signedIn
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [.required("signedIn", \.signedIn, .bool)]
    public consuming func intoEventData() -> EventData { .accountCreated(self) }
}

/// `account.signed_in`.
public struct AccountSignedIn: NoDataPayload {
    public static let type = "account.signed_in"
    public init() {}
    public consuming func intoEventData() -> EventData { .accountSignedIn(self) }
}

/// `account.signed_out`.
public struct AccountSignedOut: NoDataPayload {
    public static let type = "account.signed_out"
    public init() {}
    public consuming func intoEventData() -> EventData { .accountSignedOut(self) }
}

/// `account.deletion_requested`: the user asked to delete the account. The reason is personal.
public struct AccountDeletionRequested: EventPayload {
    public static let type = "account.deletion_requested"
    public var reason: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(reason: String? = nil) {
        self.reason = reason
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [.optional("reason", \.reason, .text, personal: true)]
    public consuming func intoEventData() -> EventData { .accountDeletionRequested(self) }
}

/// `account.deletion_cancelled`: only while the policy's deletion mode is `soft` and its window is open.
public struct AccountDeletionCancelled: NoDataPayload {
    public static let type = "account.deletion_cancelled"
    public init() {}
    public consuming func intoEventData() -> EventData { .accountDeletionCancelled(self) }
}

/// `account.deletion_step_completed`: one deletion step (profile, photos, likes…) finished.
public struct AccountDeletionStepCompleted: DeletionStepPayload {
    public static let type = "account.deletion_step_completed"
    public var step = ""
    public var error: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(step: String = "", error: String? = nil) {
        self.step = step
        self.error = error
    }
    @_spi(Storage) public static let fields = shape(step: \.step, error: \.error)
    public consuming func intoEventData() -> EventData { .accountDeletionStepCompleted(self) }
}

/// `account.deletion_step_failed`: one deletion step failed (retryable).
public struct AccountDeletionStepFailed: DeletionStepPayload {
    public static let type = "account.deletion_step_failed"
    public var step = ""
    public var error: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(step: String = "", error: String? = nil) {
        self.step = step
        self.error = error
    }
    @_spi(Storage) public static let fields = shape(step: \.step, error: \.error)
    public consuming func intoEventData() -> EventData { .accountDeletionStepFailed(self) }
}

/// `account.deleted`: deletion finished; the subject's personal data becomes unreadable.
public struct AccountDeleted: NoDataPayload {
    public static let type = "account.deleted"
    public init() {}
    public consuming func intoEventData() -> EventData { .accountDeleted(self) }
}

/// `account.export_requested`: the user asked for a copy of their data.
public struct AccountExportRequested: DataExportPayload {
    public static let type = "account.export_requested"
    public var location: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(location: String? = nil) {
        self.location = location
    }
    @_spi(Storage) public static let fields = shape(location: \.location)
    public consuming func intoEventData() -> EventData { .accountExportRequested(self) }
}

/// `account.export_completed`: the data export is ready.
public struct AccountExportCompleted: DataExportPayload {
    public static let type = "account.export_completed"
    public var location: String?
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(location: String? = nil) {
        self.location = location
    }
    @_spi(Storage) public static let fields = shape(location: \.location)
    public consuming func intoEventData() -> EventData { .accountExportCompleted(self) }
}

/// `support.entitlement_granted`: support granted Pro until a time.
public struct SupportEntitlementGranted: EventPayload {
    public static let type = "support.entitlement_granted"
    public var until = Timestamp(milliseconds: 0)
    public var reason = ""
    public var agent = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(until: Timestamp = Timestamp(milliseconds: 0), reason: String = "", agent: String = "") {
        self.until = until
        self.reason = reason
        self.agent = agent
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("until", \.until, .time),
        .required("reason", \.reason, .text),
        .required("agent", \.agent, .identifier),
    ]
    public consuming func intoEventData() -> EventData { .supportEntitlementGranted(self) }
}

/// `support.note_added`: a support note. The text is personal.
public struct SupportNoteAdded: EventPayload {
    public static let type = "support.note_added"
    public var text = ""
    public var agent = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(text: String = "", agent: String = "") {
        self.text = text
        self.agent = agent
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("text", \.text, .text, personal: true),
        .required("agent", \.agent, .identifier),
    ]
    public consuming func intoEventData() -> EventData { .supportNoteAdded(self) }
}

/// `family.organizer_cancelled`: appended to a family member's stream when the organizer cancels.
public struct FamilyOrganizerCancelled: EventPayload {
    public static let type = "family.organizer_cancelled"
    public var organizer = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(organizer: String = "") {
        self.organizer = organizer
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [.required("organizer", \.organizer, .subject)]
    public consuming func intoEventData() -> EventData { .familyOrganizerCancelled(self) }
}
