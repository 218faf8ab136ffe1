import Crypto
import Foundation
@_spi(Storage) import LedgerCore
@_spi(Storage) import LedgerProjections
@_spi(Storage) import LedgerStore

/// What a token may do (SPEC §7 "Access"): `support` reads, `writer` also appends.
public enum AccessRole: String, Sendable, CaseIterable, Comparable {
    case support, writer

    public static func < (a: AccessRole, b: AccessRole) -> Bool { a == .support && b == .writer }
}

/// A token as the store keeps it: its name, role and the SHA-256 of its secret, never the
/// secret itself.
public struct AccessToken: Sendable, Hashable {
    public var name: String
    public var role: AccessRole
    /// The SHA-256 of the secret, lower-case hex.
    public var digest: String
    public var createdAt: Timestamp

    var json: JSON {
        .object(JSONObject([("name", .string(name)), ("role", .string(role.rawValue)), ("sha256", .string(digest)),
                            ("createdAt", .string(createdAt.description))]))
    }

    init?(_ json: JSON) {
        guard case .object(let object) = json, case .string(let name)? = object["name"], case .string(let role)? = object["role"],
              let role = AccessRole(rawValue: role), case .string(let digest)? = object["sha256"],
              case .string(let created)? = object["createdAt"], let createdAt = Timestamp(rfc3339: created) else { return nil }
        self.init(name: name, role: role, digest: digest, createdAt: createdAt)
    }

    init(name: String, role: AccessRole, digest: String, createdAt: Timestamp) {
        self.name = name
        self.role = role
        self.digest = digest
        self.createdAt = createdAt
    }
}

/// The server's access tokens, kept in the store (`ledger token create|list|revoke`): each a
/// random secret shown once, stored as its SHA-256 with a name and a role.
public struct AccessTokens: Sendable {
    let ledger: Ledger
    static let setting = "tokens"
    /// Every secret starts so, to be recognisable in a log or a leak scanner.
    static let prefix = "ledger_"

    public init(_ ledger: Ledger) { self.ledger = ledger }

    /// Every token, in the order they were made.
    public func list() throws(LedgerError) -> [AccessToken] {
        try Self.decode(try ledger.log.setting(Self.setting))
    }

    /// Makes a token named `name` with `role`; returns its secret, which nothing keeps.
    /// - Throws: `LedgerError.invalidArgument` when the name is empty, too long or taken.
    public func create(name: String, role: AccessRole, at now: Timestamp = .now()) throws(LedgerError) -> String {
        guard !name.isEmpty, name.utf8.count <= 64, name.unicodeScalars.allSatisfy({ !CharacterSet.controlCharacters.contains($0) }) else {
            throw LedgerError(.invalidArgument, "a token's name is 1 to 64 bytes, without control characters")
        }
        var bytes = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
        let secret = Self.prefix + Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let token = AccessToken(name: name, role: role, digest: Self.digest(secret), createdAt: now)
        try ledger.log.changeSetting(Self.setting) { (object: inout JSONObject?) throws(LedgerError) in
            var tokens = try Self.decode(object)
            guard !tokens.contains(where: { $0.name == name }) else {
                throw LedgerError(.invalidArgument, "a token named \(name) exists; revoke it first, or choose another name")
            }
            tokens.append(token)
            object = ["tokens": .array(tokens.map(\.json))]
        }
        return secret
    }

    /// Revokes the token named `name`; returns whether there was one.
    @discardableResult
    public func revoke(name: String) throws(LedgerError) -> Bool {
        try ledger.log.changeSetting(Self.setting) { (object: inout JSONObject?) throws(LedgerError) -> Bool in
            var tokens = try Self.decode(object)
            let before = tokens.count
            tokens.removeAll { $0.name == name }
            object = ["tokens": .array(tokens.map(\.json))]
            return tokens.count < before
        }
    }

    /// The token whose secret `secret` is, `nil` for none: every stored digest is compared, in
    /// constant time, whichever matches.
    public func token(forSecret secret: String) throws(LedgerError) -> AccessToken? {
        let presented = Array(Self.digest(secret).utf8)
        var found: AccessToken?
        for token in try list() {
            let stored = Array(token.digest.utf8)
            var difference = UInt8(stored.count == presented.count ? 0 : 1)
            for index in presented.indices { difference |= presented[index] ^ (index < stored.count ? stored[index] : 0) }
            if difference == 0 { found = token }
        }
        return found
    }

    static func digest(_ secret: String) -> String {
        SHA256.hash(data: Array(secret.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func decode(_ object: JSONObject?) throws(LedgerError) -> [AccessToken] {
        guard let object else { return [] }
        guard case .array(let entries)? = object["tokens"] else {
            throw LedgerError(.corruptRecord, "the store's access tokens do not decode; revoke them all with a new store")
        }
        var tokens: [AccessToken] = []
        for entry in entries {
            guard let token = AccessToken(entry) else { throw LedgerError(.corruptRecord, "an access token of the store does not decode") }
            tokens.append(token)
        }
        return tokens
    }
}
