// Sessions and usage (SPEC §2.3, third table): app telemetry.

/// Why a session ended.
public enum SessionEndReason: String, Sendable, Hashable, CaseIterable {
    case user, crash, timeout
}

/// `session.started`: the app came to the foreground on a device, in a time zone (one of the
/// catalog's IANA names: `ValueCodec.timeZone` refuses any other on input).
public struct SessionStarted: EventPayload {
    public static let type = "session.started"
    public var deviceId = ""
    public var timeZone = "UTC"
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(deviceId: String = "", timeZone: String = "UTC") {
        self.deviceId = deviceId
        self.timeZone = timeZone
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("deviceId", \.deviceId, .identifier),
        .required("timeZone", \.timeZone, .timeZone),
    ]
    public consuming func intoEventData() -> EventData { .sessionStarted(self) }
}

/// `session.backgrounded`: the session paused.
public struct SessionBackgrounded: DevicePayload {
    public static let type = "session.backgrounded"
    public var deviceId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(deviceId: String = "") {
        self.deviceId = deviceId
    }
    @_spi(Storage) public static let fields = shape(deviceId: \.deviceId)
    public consuming func intoEventData() -> EventData { .sessionBackgrounded(self) }
}

/// `session.foregrounded`: the paused session resumed.
public struct SessionForegrounded: DevicePayload {
    public static let type = "session.foregrounded"
    public var deviceId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(deviceId: String = "") {
        self.deviceId = deviceId
    }
    @_spi(Storage) public static let fields = shape(deviceId: \.deviceId)
    public consuming func intoEventData() -> EventData { .sessionForegrounded(self) }
}

/// `session.ended`: the session ended.
public struct SessionEnded: EventPayload {
    public static let type = "session.ended"
    public var deviceId = ""
    public var reason = SessionEndReason.user
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(deviceId: String = "", reason: SessionEndReason = SessionEndReason.user) {
        self.deviceId = deviceId
        self.reason = reason
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("deviceId", \.deviceId, .identifier),
        .required("reason", \.reason, .choice),
    ]
    public consuming func intoEventData() -> EventData { .sessionEnded(self) }
}

/// `usage.recorded` (schema version 2): a feature was used `count` times.
public struct UsageRecorded: EventPayload {
    public static let type = "usage.recorded"
    public static let schemaVersion: UInt16 = 2
    public var feature = ""
    public var count: Int64 = 1
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(feature: String = "", count: Int64 = 1) {
        self.feature = feature
        self.count = count
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [
        .required("feature", \.feature, .identifier),
        .required("count", \.count, .positiveCount),
    ]
    public consuming func intoEventData() -> EventData { .usageRecorded(self) }
}

/// `usage.recorded` as schema version 1 wrote it: one use of a feature, no `count`.
/// Stored version-1 events stay as they are and read as version 2 with `count: 1`.
public struct UsageRecordedV1: LegacyPayloadLayout {
    public static let type = "usage.recorded"
    public static let schemaVersion: UInt16 = 1
    public var feature = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(feature: String = "") {
        self.feature = feature
    }
    @_spi(Storage) public static let fields: [Field<Self>] = [.required("feature", \.feature, .identifier)]

    public func upcast() -> any PayloadLayout {
        var next = UsageRecorded()
        next.feature = feature
        next.count = 1
        return next
    }
}

/// `resource.created`: the user created a resource of a kind (person, tag…) that limits count.
public struct ResourceCreated: ResourcePayload {
    public static let type = "resource.created"
    public var kind = ""
    public var resourceId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(kind: String = "", resourceId: String = "") {
        self.kind = kind
        self.resourceId = resourceId
    }
    @_spi(Storage) public static let fields = shape(kind: \.kind, resourceId: \.resourceId)
    public consuming func intoEventData() -> EventData { .resourceCreated(self) }
}

/// `resource.deleted`: the user deleted a resource.
public struct ResourceDeleted: ResourcePayload {
    public static let type = "resource.deleted"
    public var kind = ""
    public var resourceId = ""
    public init() {}
    /// Every field, each defaulting to its value in `init()`.
    public init(kind: String = "", resourceId: String = "") {
        self.kind = kind
        self.resourceId = resourceId
    }
    @_spi(Storage) public static let fields = shape(kind: \.kind, resourceId: \.resourceId)
    public consuming func intoEventData() -> EventData { .resourceDeleted(self) }
}
