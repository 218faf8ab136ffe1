import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
import LedgerModels
@_spi(Storage) import LedgerProjections

struct EraseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "erase",
        abstract: "Erase a customer: the ledger's deletion steps, then account.deleted, which destroys their key.",
        discussion: """
            Appends account.deletion_requested when no request is in force, runs the ledger's own deletion \
            steps (profile: every personal field of the subject opens; auth, last: the key store can forget \
            its keys), appending each outcome, and once all are done appends account.deleted: the subject's \
            key is destroyed (the key store is compacted without it) before the command returns. From then \
            on its personal fields (notes, deletion reasons, export locations, meta email and name) read as \
            "[Deleted User]"; financial facts stay for audit, and `ledger verify` still passes. A failed \
            step does not stop the others; run erase again and it retries only what failed.

            Deleting the account does not cancel an App Store subscription: it keeps renewing at Apple \
            until the customer cancels it there. On a terminal, erase says what it will do and asks for \
            --yes.

            Examples:
              ledger erase customer-17 --store demo.lmdb --yes
              ledger erase customer-17 --store demo.lmdb --json --yes
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The subject (account) to erase.")
    var subject: String

    @Flag(name: .long, help: "Erase without asking (needed on a terminal).")
    var yes = false

    func validate() throws {
        if let problem = EventLimits.subjectProblem(subject) { throw ValidationError("SUBJECT: \(problem)") }
    }

    func run() throws {
        let ledger = try global.openLedger()
        defer { ledger.close() }
        if try ledger.log.version(of: subject) == 0 {
            throw CommandFailure.input("no events for subject \(subject): nothing to erase (a subject is spelt exactly as its events spell it)")
        }
        let deletion = try ledger.view(DeletionModel.self, of: subject)
        if !yes && isatty(0) == 1 {
            var plan = "erase would append \(subject)'s deletion steps and account.deleted, destroying the key of the customer's personal data "
                + "(notes, deletion reasons, export locations, email and name): it would read as \"[Deleted User]\" for good."
            if let deletion, deletion.subscriptionWarning { plan += " " + Self.subscriptionWords(renews: deletion.renews) }
            throw CommandFailure.input(plan + " Run again with --yes to erase.")
        }
        let report = try ledger.erase(subject)
        if global.json {
            print(report.json.text)
        } else {
            print(Self.words(report))
        }
        if !report.isErased { throw ExitCode.failure }
    }

    static func words(_ report: ErasureReport) -> String {
        var lines: [String] = []
        if report.alreadyErased {
            lines.append("\(Terminal.safe(report.subject)) was erased before, and nothing personal about the customer has been recorded since.")
        } else {
            lines.append("Erasing \(Terminal.safe(report.subject)):")
            if let position = report.requestedAt { lines.append("  requested  account.deletion_requested at #\(position)") }
            for step in report.steps {
                let outcome = switch step.outcome {
                case .completed: "done"
                case .done: "done before"
                case .failed: "FAILED: " + Terminal.safe(step.error ?? "")
                }
                lines.append("  " + step.name.padding(toLength: 10, withPad: " ", startingAt: 0) + " " + outcome)
            }
            if let position = report.deletedAt {
                lines.append("  deleted    account.deleted at #\(position): the key is destroyed; personal fields read as \"[Deleted User]\"")
            } else {
                lines.append("Not erased: a step failed. Mend what it says, then run `ledger erase \(Terminal.safe(report.subject))` again; it retries only what failed.")
            }
        }
        if report.subscriptionWarning { lines.append(subscriptionWords(renews: report.subscriptionRenews)) }
        return lines.joined(separator: "\n")
    }

    /// What deleting the account leaves at Apple (CH34): the subscription, renewing or not.
    static func subscriptionWords(renews: Bool) -> String {
        renews ? "The customer's App Store subscription keeps renewing at Apple: deleting the account does not cancel it; only the customer can, in their Apple account."
               : "The customer's App Store subscription stays in force at Apple until it expires (auto-renew is off): deleting the account does not refund it."
    }
}
