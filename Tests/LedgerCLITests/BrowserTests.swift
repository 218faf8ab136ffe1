import Foundation
import Testing

/// The support pages in headless Chromium (`Tools/browser-test`, Python's selenium): sign in,
/// find a customer, move "as of" across a change of plan. `.ci/run` installs Chromium,
/// chromedriver and selenium; where they cannot be installed the test is skipped, saying so.
@Suite struct BrowserTests {
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].contains { FileManager.default.isExecutableFile(atPath: $0) }
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver")
    static let selenium: Bool = {
        guard let run = try? Run(["python3", "-c", "import selenium"], executable: "/usr/bin/env") else { return false }
        return run.status == 0
    }()

    @Test(.enabled(if: chromium && selenium, "Chromium, chromedriver or Python's selenium is missing: `apt-get install chromium chromium-driver; pip install selenium` (.ci/run does)"))
    func theSupportPagesWorkInARealBrowser() throws {
        let ledger = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger").path
        let shots = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-browser-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: shots) }
        let run = try Run(["python3", "Tools/browser-test", "--ledger", ledger, "--out", shots], executable: "/usr/bin/env")
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.hasPrefix("ok: signed in, found customer-"))
        for name in ["1-search", "2-before", "3-after"] {
            #expect(FileManager.default.fileExists(atPath: "\(shots)/\(name).png"), "\(name).png")
        }
    }
}
