// Package keyring holds the pure logic for keyledger's keyring manifest: the
// single Kubernetes Secret data entry that the key-retirement workflow reads
// and replaces.
//
// # Canonical form
//
// A manifest is canonical JSON: object members in the fixed order
// schema, generation, activeKeyId, keys, retirements (and id, createdAt,
// material for a key; keyId, retirementId, requestId, mutationId,
// materialDigest, generation, retiredAt for a receipt), no insignificant
// whitespace, no HTML escaping, keys sorted by id (byte order), receipts in
// the order they were appended, and an empty retirements list written as [].
// [Parse] refuses any input that is not byte-identical to its own canonical
// encoding with reason "non-canonical".
//
// Decisions the spec left open:
//   - generation is a non-negative int64 (0 is allowed for a freshly created
//     keyring); a receipt's generation is at least 1, at most the manifest's
//     generation, and strictly increasing in append order, because every
//     retirement bumps the generation by one.
//   - createdAt and retiredAt are RFC 3339 in UTC at second precision,
//     exactly "2006-01-02T15:04:05Z". A value that is valid RFC 3339 in any
//     other form (fractional seconds, an offset) is refused as
//     "non-canonical"; anything else as "invalid-field".
//   - material is standard padded base64 of exactly 32 bytes.
//   - a key id that appears in a receipt can never be a current key again,
//     and each key id is retired at most once.
//
// # Material never leaves
//
// Key material is held in [Material], whose String, GoString, Format,
// MarshalJSON, MarshalText and LogValue all print "[redacted]", so
// formatting or logging a [Manifest] or [Key] never prints it. Only
// [Manifest.Encode] writes material, from the raw bytes. [Manifest.Catalog]
// is the manifest with each key's material replaced, in the same position,
// by its materialDigest ("sha256:" + hex); the catalog and
// [Manifest.CatalogDigest] may be printed and journaled. Errors never carry
// material.
//
// # Bounds
//
// At most MaxKeys (16) keys and MaxRetirements (64) receipts; the manifest's
// encoding at most MaxManifestBytes, and the keyring Secret as a whole
// (data, labels, annotations and name) at most MaxSecretBytes, both 256 KiB
// (ADR-0262); over either is refused "too-large".
//
// # Refusals
//
// Every refusal is an [*Error] with a stable kebab-case Reason (the Reason*
// constants) and a Detail that names the field (for example "keys[2].id").
package keyring
