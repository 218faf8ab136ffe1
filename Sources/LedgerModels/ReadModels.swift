/// The read models every ledger serves, in the order `status` shows them: the one place a
/// model is registered. The engine stores and rebuilds these; `status`, `audit`, `rebuild`
/// and the status card read them from here.
public enum ReadModels {
    public static let all: [any ReadModel.Type] = [EntitlementModel.self, RetentionModel.self, BadgeModel.self]

    /// The model named `name`, if registered.
    public static func named(_ name: String) -> (any ReadModel.Type)? { all.first { $0.name == name } }
}
