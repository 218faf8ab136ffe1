// Data shapes that several event types share. Each shape lists its fields once; a type of
// that shape declares its name, its stored properties, its `EventData` case and its fields as
// `shape(…)` of its own properties' key paths. (A key path written here, through the shape's
// requirement, is not a stored property's: the decoder would apply it as a key path, a runtime
// walk for every field of every event read, instead of writing at the property's offset.)

/// No data: `account.signed_in`, `account.signed_out`, `account.deletion_cancelled`,
/// `account.deleted`, `restore.requested`.
public protocol NoDataPayload: EventPayload {}

extension NoDataPayload {
    @_spi(Storage) public static var fields: [Field<Self>] { [] }
}

/// A product and an optional reason: `purchase.started`, `purchase.pending`, `purchase.failed`.
public protocol ProductAttemptPayload: EventPayload {
    var productId: String { get set }
    var reason: String? { get set }
}

extension ProductAttemptPayload {
    @_spi(Storage) public static func shape(productId: WritableKeyPath<Self, String>, reason: WritableKeyPath<Self, String?>) -> [Field<Self>] {
        [.required("productId", productId, .identifier), .optional("reason", reason, .text)]
    }
}

/// A store transaction that lost its coverage, with an optional reason: `subscription.refunded`,
/// `subscription.revoked`.
public protocol TransactionEndPayload: EventPayload {
    var transactionId: String { get set }
    var originalTransactionId: String { get set }
    var reason: String? { get set }
}

extension TransactionEndPayload {
    @_spi(Storage) public static func shape(transactionId: WritableKeyPath<Self, String>, originalTransactionId: WritableKeyPath<Self, String>,
                             reason: WritableKeyPath<Self, String?>) -> [Field<Self>] {
        [.required("transactionId", transactionId, .identifier),
         .required("originalTransactionId", originalTransactionId, .identifier),
         .optional("reason", reason, .text)]
    }
}

/// One deletion step and an optional error: `account.deletion_step_completed`, `…_failed`.
public protocol DeletionStepPayload: EventPayload {
    var step: String { get set }
    var error: String? { get set }
}

extension DeletionStepPayload {
    @_spi(Storage) public static func shape(step: WritableKeyPath<Self, String>, error: WritableKeyPath<Self, String?>) -> [Field<Self>] {
        [.required("step", step, .identifier), .optional("error", error, .text)]
    }
}

/// An optional location: `account.export_requested`, `account.export_completed`.
public protocol DataExportPayload: EventPayload {
    var location: String? { get set }
}

extension DataExportPayload {
    @_spi(Storage) public static func shape(location: WritableKeyPath<Self, String?>) -> [Field<Self>] { [.optional("location", location, .text, personal: true)] }
}

/// A device: `session.backgrounded`, `session.foregrounded`.
public protocol DevicePayload: EventPayload {
    var deviceId: String { get set }
}

extension DevicePayload {
    @_spi(Storage) public static func shape(deviceId: WritableKeyPath<Self, String>) -> [Field<Self>] { [.required("deviceId", deviceId, .identifier)] }
}

/// A resource of a kind: `resource.created`, `resource.deleted`.
public protocol ResourcePayload: EventPayload {
    var kind: String { get set }
    var resourceId: String { get set }
}

extension ResourcePayload {
    @_spi(Storage) public static func shape(kind: WritableKeyPath<Self, String>, resourceId: WritableKeyPath<Self, String>) -> [Field<Self>] {
        [.required("kind", kind, .identifier), .required("resourceId", resourceId, .identifier)]
    }
}

/// An inbox message: `inbox.message_delivered`, `inbox.message_read`.
public protocol InboxMessagePayload: EventPayload {
    var messageId: String { get set }
}

extension InboxMessagePayload {
    @_spi(Storage) public static func shape(messageId: WritableKeyPath<Self, String>) -> [Field<Self>] { [.required("messageId", messageId, .identifier)] }
}

/// A security flag: `security.flag_raised`, `security.flag_cleared`.
public protocol SecurityFlagPayload: EventPayload {
    var flag: String { get set }
}

extension SecurityFlagPayload {
    @_spi(Storage) public static func shape(flag: WritableKeyPath<Self, String>) -> [Field<Self>] { [.required("flag", flag, .identifier)] }
}
