import Crypto
import Foundation
@_spi(Storage) import LedgerCore

/// A personal field as the log stores it: `sealed.1.` and the base64 of key id (16) ‖ nonce
/// (12) ‖ ciphertext ‖ tag (16), AES-256-GCM under the subject's key with the subject and the
/// field's pointer as associated data (a sealed value moved to another subject or field does
/// not open). A string, so the payload's layout and the hash chain treat it like any other.
struct SealedField: Sendable, Hashable {
    let keyID: [UInt8]
    let nonce: [UInt8]
    let ciphertext: [UInt8]
    let tag: [UInt8]

    static let prefix = "sealed.1."
    static let nonceSize = 12
    static let tagSize = 16

    init(keyID: [UInt8], nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
        (self.keyID, self.nonce, self.ciphertext, self.tag) = (keyID, nonce, ciphertext, tag)
    }

    /// Parses a stored value; `nil` when it is not one.
    init?(_ text: String) {
        guard text.hasPrefix(Self.prefix), let bytes = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))),
              bytes.count >= KeyStore.Key.idSize + Self.nonceSize + Self.tagSize else { return nil }
        let all = [UInt8](bytes)
        let keyEnd = KeyStore.Key.idSize, nonceEnd = keyEnd + Self.nonceSize, tagStart = all.count - Self.tagSize
        self.init(keyID: Array(all[..<keyEnd]), nonce: Array(all[keyEnd ..< nonceEnd]),
                  ciphertext: Array(all[nonceEnd ..< tagStart]), tag: Array(all[tagStart...]))
    }

    var text: String { Self.prefix + Data(keyID + nonce + ciphertext + tag).base64EncodedString() }

    static func associatedData(subject: String, pointer: String) -> [UInt8] {
        let name = Array(subject.utf8)
        return [UInt8(truncatingIfNeeded: name.count >> 8), UInt8(truncatingIfNeeded: name.count)] + name + Array(pointer.utf8)
    }

    /// Seals `plaintext` under `key` with a fresh random nonce.
    static func seal(_ plaintext: String, key: KeyStore.Key, subject: String, pointer: String) throws(LedgerError) -> SealedField {
        do {
            let box = try AES.GCM.seal(Array(plaintext.utf8), using: SymmetricKey(data: key.bytes), nonce: AES.GCM.Nonce(),
                                       authenticating: associatedData(subject: subject, pointer: pointer))
            return SealedField(keyID: key.id, nonce: Array(box.nonce), ciphertext: Array(box.ciphertext), tag: Array(box.tag))
        } catch {
            throw LedgerError(.storage, "sealing \(pointer) of \(subject): \(error)")
        }
    }

    /// The plaintext, `nil` when the tag does not verify (the ciphertext, nonce or tag was
    /// altered, or the key is another).
    func open(key: KeyStore.Key, subject: String, pointer: String) -> String? {
        guard let nonce = try? AES.GCM.Nonce(data: nonce),
              let box = try? AES.GCM.SealedBox(nonce: nonce, ciphertext: ciphertext, tag: tag),
              let plain = try? AES.GCM.open(box, using: SymmetricKey(data: key.bytes), authenticating: Self.associatedData(subject: subject, pointer: pointer))
        else { return nil }
        return StrictUTF8.string([UInt8](plain))
    }
}
