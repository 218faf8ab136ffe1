// Badge inputs and notifications (SPEC §2.3, fourth table).

/// `inbox.message_delivered`.
public struct InboxMessageDelivered: InboxMessagePayload {
    public static let type = "inbox.message_delivered"
    public var messageId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(messageId: String = "") {
        self.messageId = messageId
    }
    @_spi(Storage) public static let fields = shape(messageId: \.messageId)
    public consuming func intoEventData() -> EventData { .inboxMessageDelivered(self) }
}

/// `inbox.message_read`.
public struct InboxMessageRead: InboxMessagePayload {
    public static let type = "inbox.message_read"
    public var messageId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(messageId: String = "") {
        self.messageId = messageId
    }
    @_spi(Storage) public static let fields = shape(messageId: \.messageId)
    public consuming func intoEventData() -> EventData { .inboxMessageRead(self) }
}

/// `maintenance.scheduled`: a task falls due on a local date.
public struct MaintenanceScheduled: EventPayload {
    public static let type = "maintenance.scheduled"
    public var taskId = ""
    public var dueDate = "1970-01-01"
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(taskId: String = "", dueDate: String = "1970-01-01") {
        self.taskId = taskId
        self.dueDate = dueDate
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("taskId", \.taskId, .identifier),
        .required("dueDate", \.dueDate, .localDate),
    ]
    public consuming func intoEventData() -> EventData { .maintenanceScheduled(self) }
}

/// `maintenance.completed`.
public struct MaintenanceCompleted: EventPayload {
    public static let type = "maintenance.completed"
    public var taskId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(taskId: String = "") {
        self.taskId = taskId
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [.required("taskId", \.taskId, .identifier)]
    public consuming func intoEventData() -> EventData { .maintenanceCompleted(self) }
}

/// `security.flag_raised`.
public struct SecurityFlagRaised: SecurityFlagPayload {
    public static let type = "security.flag_raised"
    public var flag = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(flag: String = "") {
        self.flag = flag
    }
    @_spi(Storage) public static let fields = shape(flag: \.flag)
    public consuming func intoEventData() -> EventData { .securityFlagRaised(self) }
}

/// `security.flag_cleared`.
public struct SecurityFlagCleared: SecurityFlagPayload {
    public static let type = "security.flag_cleared"
    public var flag = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(flag: String = "") {
        self.flag = flag
    }
    @_spi(Storage) public static let fields = shape(flag: \.flag)
    public consuming func intoEventData() -> EventData { .securityFlagCleared(self) }
}

/// `notification.preferences_changed`: a notification category (`billing`, …) turned on or off.
public struct NotificationPreferencesChanged: EventPayload {
    public static let type = "notification.preferences_changed"
    public var category = ""
    public var enabled = true
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(category: String = "", enabled: Bool = true) {
        self.category = category
        self.enabled = enabled
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("category", \.category, .identifier),
        .required("enabled", \.enabled, .bool),
    ]
    public consuming func intoEventData() -> EventData { .notificationPreferencesChanged(self) }
}

/// `notification.sent`: a notification went out (lets the ledger enforce frequency caps).
public struct NotificationSent: EventPayload {
    public static let type = "notification.sent"
    public var kind = ""
    public var channel = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(kind: String = "", channel: String = "") {
        self.kind = kind
        self.channel = channel
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("kind", \.kind, .identifier),
        .required("channel", \.channel, .identifier),
    ]
    public consuming func intoEventData() -> EventData { .notificationSent(self) }
}
