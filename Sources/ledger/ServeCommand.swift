import ArgumentParser
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections
import LedgerServer

struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the store over HTTP: the App Store's webhook, the JSON API and the support pages.",
        discussion: """
            One process holds the store open (SPEC §7). POST /appstore/v2/notifications takes the App \
            Store's notifications, verified with the settings `ledger init --appstore-…` recorded; the \
            /v1 routes answer as the commands' --json does, for a token made with `ledger token create` \
            (Authorization: Bearer TOKEN). SIGTERM or Ctrl-C stops it once the requests in flight, \
            appends included, have finished. Behind a TLS-terminating proxy, keep --host 127.0.0.1.

            A slow or stalled client is closed: one that takes over --header-timeout seconds to send a \
            request's head (408), over --body-timeout to send its body, over --write-timeout to read \
            32 KiB of a long answer, or sits idle over --idle-timeout. At most --max-connections are \
            open at once (cut to the open-file limit, which the server raises to its hard limit at \
            start); beyond them a client waits. Audits, a subject's events, the due list and a \
            customer's page run --heavy-reads at once, off the threads that answer status and \
            /healthz; more wait their turn, and beyond 64 waiting a client gets 503.

            Sign-ins are throttled by client address. Behind a proxy (Forwarded, X-Forwarded-For or \
            X-Real-IP), the client is the one the proxy names when the proxy is on loopback or \
            within a --trusted-proxy address or CIDR range (repeatable), passing over the trusted \
            proxies in the chain; any other peer is the client itself, whatever headers it sends.

            Examples:
              ledger serve --store demo.lmdb
              ledger serve --store shop.lmdb --host 0.0.0.0 --port 8443
              ledger serve --store shop.lmdb --header-timeout 5 --max-connections 500
              ledger serve --store shop.lmdb --host 0.0.0.0 --trusted-proxy 10.0.0.0/8
            """
    )

    @Option(name: .long, help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(name: .long, help: "The port to listen on (0: any free port).")
    var port = 8080

    @Option(name: .customLong("header-timeout"), help: "Seconds a client may take to send a request's head.")
    var headerTimeout = 10.0

    @Option(name: .customLong("body-timeout"), help: "Seconds a client may take to send a request's body.")
    var bodyTimeout = 30.0

    @Option(name: .customLong("idle-timeout"), help: "Seconds a connection may sit idle between requests.")
    var idleTimeout = 60.0

    @Option(name: .customLong("write-timeout"), help: "Seconds a long answer may wait for the client to read 32 KiB of it.")
    var writeTimeout = 30.0

    @Option(name: .customLong("max-connections"), help: "Connections open at once.")
    var maxConnections = ServerLimits().connections

    @Option(name: .customLong("heavy-reads"), help: "Audits and exports run at once (default: the cores).")
    var heavyReads = ServerLimits().heavyReads

    @Option(name: .customLong("trusted-proxy"), help: "A proxy's address or CIDR range whose headers name the client (repeatable; loopback always).")
    var trustedProxy: [String] = []

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (0 ... 65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") }
        do throws(LedgerError) {
            _ = try TrustedProxies(trustedProxy)
        } catch {
            throw ValidationError("--trusted-proxy " + Terminal.safe(error.message))
        }
        for (name, seconds) in [("--header-timeout", headerTimeout), ("--body-timeout", bodyTimeout), ("--idle-timeout", idleTimeout),
                               ("--write-timeout", writeTimeout)]
        where !(seconds > 0 && seconds <= 86_400) {
            throw ValidationError("\(name) must be more than 0 and at most 86400 seconds, not \(seconds)")
        }
        guard maxConnections >= 1 else { throw ValidationError("--max-connections must be at least 1, not \(maxConnections)") }
        guard (1 ... 1024).contains(heavyReads) else { throw ValidationError("--heavy-reads must be 1 to 1024, not \(heavyReads)") }
    }

    /// The limits the options give, connections cut to the open-file limit (raised first).
    var limits: ServerLimits {
        func duration(_ seconds: Double) -> Duration { .milliseconds(Int64(seconds * 1000)) }
        return ServerLimits(headerTimeout: duration(headerTimeout), bodyTimeout: duration(bodyTimeout), idleTimeout: duration(idleTimeout),
                            writeTimeout: duration(writeTimeout), connections: maxConnections, heavyReads: heavyReads)
            .fitted(toOpenFiles: ServerLimits.raiseOpenFileLimit())
    }

    func run() throws {
        let ledger = try global.openLedger()
        defer { ledger.close() }
        let limits = self.limits
        let server = try LedgerServer(ledger: ledger, limits: limits, trustedProxies: try TrustedProxies(trustedProxy))
        let (host, path) = (self.host, global.storePath)
        // What the server holds clients to, as it is: --max-connections may have been cut.
        func seconds(_ d: Duration) -> String { String(format: "%g s", Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18) }
        let held = "Clients: head \(seconds(limits.headerTimeout)), body \(seconds(limits.bodyTimeout)), idle \(seconds(limits.idleTimeout)), "
            + "write \(seconds(limits.writeTimeout)); "
            + "\(limits.connections) connections; \(limits.heavyReads) heavy reads at once\n"
            + "Proxies trusted: \((["loopback"] + trustedProxy.map(Terminal.safe)).joined(separator: ", "))\n"
        try Blocking.run {
            try await server.run(host: host, port: port) { port in
                FileHandle.standardError.write(Data("Serving \(Terminal.safe(path)) on http://\(host):\(port) (SIGTERM or Ctrl-C stops)\n".utf8))
                FileHandle.standardError.write(Data(held.utf8))
            }
        }
    }
}

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Make, list and revoke the server's access tokens.",
        discussion: """
            A token is shown once, when it is made; the store keeps only its SHA-256, with its name \
            and role: support reads (status, audit, events, lookup, due, stats, the pages), writer \
            also appends (POST /v1/events).
            """,
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a token and print it (once).",
            discussion: """
                Examples:
                  ledger token create --role support --name alice --store demo.lmdb
                  ledger token create --role writer --json
                """
        )

        @Option(name: .long, help: "support (reads) or writer (reads and appends).")
        var role: String

        @Option(name: .long, help: "The token's name, to list and revoke it by (default: ROLE-N, the first free).")
        var name: String?

        @OptionGroup var global: GlobalOptions

        func validate() throws {
            guard AccessRole(rawValue: role) != nil else { throw ValidationError("--role must be support or writer, not \(role)") }
        }

        func run() throws {
            let ledger = try global.openLedger()
            defer { ledger.close() }
            let chosen = AccessRole(rawValue: role) ?? .support
            let tokens = AccessTokens(ledger)
            let taken = Set(try tokens.list().map(\.name))
            let name = self.name ?? (1...).lazy.map { "\(chosen.rawValue)-\($0)" }.first { !taken.contains($0) } ?? chosen.rawValue
            let secret = try tokens.create(name: name, role: chosen)
            if global.json {
                print(JSON.object([("name", .string(name)), ("role", .string(chosen.rawValue)), ("token", .string(secret))]).text)
            } else {
                print(secret)
                FileHandle.standardError.write(Data("Made \(chosen.rawValue) token \(name): it is shown this once; the store keeps only its SHA-256.\n".utf8))
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the tokens: name, role and when each was made (never the secret).")

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let ledger = try global.openLedger()
            defer { ledger.close() }
            let tokens = try AccessTokens(ledger).list()
            if global.json {
                print(JSON.array(tokens.map { .object([("name", .string($0.name)), ("role", .string($0.role.rawValue)), ("createdAt", .string($0.createdAt.description))]) }).text)
                return
            }
            if tokens.isEmpty {
                print("No tokens; make one with `ledger token create --role support|writer [--name N]`.")
                return
            }
            // Names hold no control characters (`AccessTokens.create`): printed as they are.
            let width = tokens.map(\.name.count).max() ?? 0
            for token in tokens {
                let name = token.name
                print("\(name)\(String(repeating: " ", count: width - name.count))  \(token.role.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  made \(token.createdAt)")
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a token by name: the server refuses it from its next request.")

        @Argument(help: "The token's name.")
        var name: String

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let ledger = try global.openLedger()
            defer { ledger.close() }
            guard try AccessTokens(ledger).revoke(name: name) else { throw CommandFailure.failure("no token is named \(name); `ledger token list` lists them") }
            print("Revoked \(name).")
        }
    }
}
