package ticket

import (
	"fmt"
	"net/url"
	"time"
)

// Token types, carried in the signed header.
const (
	TypeAdmission     = "render-admission.v1"
	TypePreviewAccess = "preview-access.v1"
)

// Admission authorizes one renderer worker/epoch to take over one attempt.
// The coordinator signs it when it reserves the slot; the renderer accepts the
// attempt only when every bound field matches the execution request and its
// own identity.
type Admission struct {
	RequestID     string `json:"request_id"`
	AttemptID     string `json:"attempt_id"`
	RequestDigest string `json:"request_digest"`
	WorkspaceID   string `json:"workspace_id"`
	WorkerID      string `json:"worker_id"`
	Epoch         string `json:"epoch"`
	// SlotGeneration only increases per worker/epoch; a renderer refuses a
	// generation at or below one it already accepted.
	SlotGeneration int64     `json:"slot_generation"`
	IssuedAt       time.Time `json:"iat"`
	// AcceptBy is the acceptance deadline: after it no renderer may start
	// the attempt.
	AcceptBy time.Time `json:"accept_by"`
	// StopBy is the latest moment the attempt may still run; the renderer
	// treats it as one more upper bound on the hard deadline.
	StopBy time.Time `json:"stop_by"`
}

// TokenType implements Claims.
func (Admission) TokenType() string { return TypeAdmission }

// Check implements Claims. The acceptance deadline is the expiry.
func (a *Admission) Check(now time.Time, maxSkew time.Duration) error {
	if a.RequestID == "" || a.AttemptID == "" || a.RequestDigest == "" || a.WorkspaceID == "" ||
		a.WorkerID == "" || a.Epoch == "" || a.SlotGeneration <= 0 ||
		a.IssuedAt.IsZero() || a.AcceptBy.IsZero() || a.StopBy.IsZero() {
		return fmt.Errorf("%w: admission ticket misses a field", ErrInvalidClaims)
	}
	if a.AcceptBy.Before(a.IssuedAt) || a.StopBy.Before(a.AcceptBy) {
		return fmt.Errorf("%w: admission deadlines out of order", ErrInvalidClaims)
	}
	if a.IssuedAt.After(now.Add(maxSkew)) {
		return ErrNotYetValid
	}
	if now.After(a.AcceptBy) {
		return ErrExpired
	}
	return nil
}

// PreviewAccess lets a browser read one preview document: the exact origin
// and path, of one artifact, until ExpiresAt. The preview host verifies it on
// every request for that document.
type PreviewAccess struct {
	WorkspaceID string `json:"workspace_id"`
	SnapshotRef string `json:"snapshot_ref"`
	// Origin is scheme://host[:port] exactly as the browser sends it.
	Origin string `json:"origin"`
	// Path is the exact document path; the token is worthless on any
	// other path.
	Path      string    `json:"path"`
	IssuedAt  time.Time `json:"iat"`
	ExpiresAt time.Time `json:"exp"`
}

// TokenType implements Claims.
func (PreviewAccess) TokenType() string { return TypePreviewAccess }

// Check implements Claims.
func (p *PreviewAccess) Check(now time.Time, maxSkew time.Duration) error {
	if p.WorkspaceID == "" || p.SnapshotRef == "" || p.Origin == "" || p.Path == "" ||
		p.IssuedAt.IsZero() || p.ExpiresAt.IsZero() {
		return fmt.Errorf("%w: preview access misses a field", ErrInvalidClaims)
	}
	u, err := url.Parse(p.Origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
		return fmt.Errorf("%w: preview access origin is not scheme://host[:port]", ErrInvalidClaims)
	}
	if p.ExpiresAt.Before(p.IssuedAt) {
		return fmt.Errorf("%w: preview access expires before it is issued", ErrInvalidClaims)
	}
	if p.IssuedAt.After(now.Add(maxSkew)) {
		return ErrNotYetValid
	}
	if now.After(p.ExpiresAt) {
		return ErrExpired
	}
	return nil
}

// Allows reports whether the token may be attached to a request for
// origin+path: both must match exactly, so a redirect to another path or
// origin loses the credential.
func (p *PreviewAccess) Allows(origin, path string) bool {
	return origin == p.Origin && path == p.Path
}
