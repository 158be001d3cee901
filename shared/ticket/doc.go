// Package ticket signs and verifies the short-lived tokens of the render
// subsystem: admission tickets, which let one renderer worker/epoch take over
// one attempt, and preview-access tokens, which let one browser read one
// preview artifact.
//
// A token is a JWS compact serialization with the EdDSA (Ed25519) algorithm:
//
//	base64url(header) "." base64url(claims) "." base64url(signature)
//
// where the header is {"alg":"EdDSA","kid":<key ID>,"typ":<token type>} and
// the signature covers the first two parts. The key ID selects the public key
// in a KeySet, so keys rotate by publishing the new public key next to the old
// one, switching the Signer, and removing the old key once its last token has
// expired. The token type is signed too, so a preview-access token can never
// be replayed as an admission ticket.
//
// Keys travel in configuration as "kid:base64" (standard base64 of the 32-byte
// public key or the 32-byte private seed); a key set is a comma-separated list
// of public keys, for example
//
//	RENDER_TICKET_PUBLIC_KEYS="k2025a:MCowBQYDK2VwAyEA...,k2025b:..."
//
// Time decides validity, so every check takes the current time from the
// caller; nothing here reads the clock. The package holds no business rules
// beyond the claim shapes: whether an authentic ticket fits the worker that
// received it (epoch, slot generation, request digest) is the receiver's
// decision.
package ticket
