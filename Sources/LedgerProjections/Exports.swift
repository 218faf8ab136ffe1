// One import for an app: `import LedgerProjections` brings the events, timestamps and policy
// (LedgerCore), the read models and their views (LedgerModels), and what the log's API hands
// back (the append's result, the event streams, the log's options and counts).
@_exported import LedgerCore
@_exported import LedgerModels
// The App Store's signed notifications: the verifier and its configuration (`ingestAppStore`).
@_exported import LedgerAppStore
@_exported import class LedgerStore.EventLog
@_exported import struct LedgerStore.AppendResult
@_exported import enum LedgerStore.AppendOutcome
@_exported import struct LedgerStore.EventSequence
@_exported import struct LedgerStore.LogStats
@_exported import struct LedgerStore.VerifyReport
@_exported import struct LedgerStore.VerifyProblem
@_exported import struct LedgerStore.PersonalDataCheck
