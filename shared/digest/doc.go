// Package digest computes the content digests that cross process boundaries
// in the render subsystem: request_digest, input_digest, render_digest and the
// render-environment digest.
//
// Every digest is the SHA-256 of a byte string, written as "sha256:" followed
// by 64 lower-case hex digits. Structured values are first encoded as
// canonical JSON (object keys sorted, no insignificant white space, no HTML
// escaping, numbers kept exactly as encoding/json wrote them), so that the
// backend and the renderer, built at different times, agree on the digest of
// the same value. The package must stay free of business rules: it decides
// how a value is hashed, never which fields belong in it.
package digest
