/// The read models every ledger serves, in the order `status` shows them: the one place a
/// model is registered. The engine stores and rebuilds these; `status`, `audit`, `rebuild`
/// and the status card read them from here.
public enum ReadModels {
    public static let all: [any ReadModel.Type] = [EntitlementModel.self, RetentionModel.self, BadgeModel.self, AccessModel.self, LimitsModel.self, DeletionModel.self, DueModel.self, HoldersModel.self, TransactionsModel.self]
}
