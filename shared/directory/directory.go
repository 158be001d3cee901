// Package directory reads and writes the global directory database: cells, placements
// (workspace → cell), users, personal access tokens (hashes only), workspaces and memberships.
//
// The router, the cells and cellctl all use it. It holds no HTTP and no business rules beyond
// the directory's own invariants (a workspace is placed on exactly one cell; tokens are stored
// as hashes; scopes and roles come from fixed lists).
package directory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/migrations"
	"slidecells/shared/db"
	"slidecells/shared/ids"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("directory: not found")

// ErrInvalid wraps validation failures of operator input.
var ErrInvalid = errors.New("directory: invalid input")

// ErrConflict wraps uniqueness violations (an existing cell, user e-mail, membership).
var ErrConflict = errors.New("directory: already exists")

// TokenPrefix starts every personal access token.
const TokenPrefix = "svc_pat_"

// Scopes is the fixed list of scope names of the public API; no private scope exists.
var Scopes = []string{
	"workspace:read",
	"project:read", "project:write",
	"page:read", "page:write",
	"component:read", "component:write",
	"asset:read", "asset:write",
	"design-system:read", "design-system:write",
	"preview:run",
}

// RoleScopes maps a membership role to the scopes it grants in its workspace. A request's
// effective scopes are the token's scopes intersected with these.
var RoleScopes = map[string][]string{
	"owner":  Scopes,
	"admin":  Scopes,
	"editor": Scopes,
	"viewer": {"workspace:read", "project:read", "page:read", "component:read", "asset:read", "design-system:read"},
}

// ValidScope reports whether s is one of Scopes.
func ValidScope(s string) bool {
	for _, v := range Scopes {
		if v == s {
			return true
		}
	}
	return false
}

// Cell is one backend cell.
type Cell struct {
	ID          string
	InternalURL string
	// PreviewURL is the base URL (scheme://host[:port], no path) of the cell's preview host;
	// empty when it has none. The router sends public preview paths there unchanged.
	PreviewURL     string
	State          string // active, draining, down
	MaxWorkspaces  int64
	WorkspaceCount int64 // filled by CellsWithCounts and Cell; 0 from Cells
	CreatedAt      time.Time
}

// Placement says which cell hosts a workspace, at which epoch.
type Placement struct {
	WorkspaceID string
	CellID      string
	Epoch       int64
	State       string // active, moving
	Pinned      bool
	UpdatedAt   time.Time
}

// User is a person or agent that holds tokens.
type User struct {
	ID        string
	Email     string
	Name      string
	CreatedAt time.Time
}

// Token is a stored PAT: never the token itself, only its hash.
type Token struct {
	ID        string
	UserID    string
	Name      string
	Scopes    []string
	ExpiresAt time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
	User      User
}

// Workspace is a tenant.
type Workspace struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// CellID is where CreateWorkspace placed it (empty from other reads).
	CellID string
}

// Membership is a user's role in a workspace.
type Membership struct {
	WorkspaceID string
	UserID      string
	Role        string
}

// Directory is the directory database.
type Directory struct {
	DB *db.DB
}

// Open connects to the directory database and applies its migrations.
func Open(ctx context.Context, url string) (*Directory, error) {
	d, err := db.Open(ctx, url, db.Options{ApplicationName: "directory"})
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(url, migrations.FS, migrations.Directory, d.Cockroach); err != nil {
		d.Close()
		return nil, err
	}
	return &Directory{DB: d}, nil
}

// Connect connects without migrating: what the router and the cells do, since the directory's
// schema is owned by cellctl and the local stack.
func Connect(ctx context.Context, url string) (*Directory, error) {
	d, err := db.Open(ctx, url, db.Options{ApplicationName: "directory-client"})
	if err != nil {
		return nil, err
	}
	return &Directory{DB: d}, nil
}

// Close closes the pool.
func (d *Directory) Close() { d.DB.Close() }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// AddCell registers a cell.
func (d *Directory) AddCell(ctx context.Context, c Cell) error {
	if !ids.CellIDValid(c.ID) {
		return invalid("cell ID %q: use 1-32 of a-z, 0-9 and '-', starting with a letter", c.ID)
	}
	if !strings.HasPrefix(c.InternalURL, "http://") && !strings.HasPrefix(c.InternalURL, "https://") {
		return invalid("internal URL %q must start with http:// or https://", c.InternalURL)
	}
	preview, err := CheckPreviewURL(c.PreviewURL)
	if err != nil {
		return err
	}
	if c.State == "" {
		c.State = "active"
	}
	if c.State != "active" && c.State != "draining" && c.State != "down" {
		return invalid("cell state %q: use active, draining or down", c.State)
	}
	_, err = d.DB.Exec(ctx,
		`INSERT INTO cells (id, internal_url, preview_url, state, max_workspaces) VALUES ($1, $2, $3, $4, $5)`,
		c.ID, strings.TrimRight(c.InternalURL, "/"), preview, c.State, c.MaxWorkspaces)
	if db.IsUniqueViolation(err) {
		return fmt.Errorf("%w: cell %s", ErrConflict, c.ID)
	}
	return err
}

// SetCellURL changes a cell's internal URL (used when a local stack restarts on new ports).
func (d *Directory) SetCellURL(ctx context.Context, id, url string) error {
	tag, err := d.DB.Exec(ctx, `UPDATE cells SET internal_url = $2 WHERE id = $1`, id, strings.TrimRight(url, "/"))
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

// SetCellPreviewURL sets the base URL of a cell's preview host; "" removes it (the router then
// answers the cell's preview paths with 503 PREVIEW_UNAVAILABLE).
func (d *Directory) SetCellPreviewURL(ctx context.Context, id, url string) error {
	preview, err := CheckPreviewURL(url)
	if err != nil {
		return err
	}
	tag, err := d.DB.Exec(ctx, `UPDATE cells SET preview_url = $2 WHERE id = $1`, id, preview)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

// CheckPreviewURL checks a preview host base URL and returns it without a trailing slash: empty,
// or http(s)://host[:port] without path, query, fragment or user information. A path is
// refused because the router keeps public preview paths unchanged: the preview host serves
// them at its root.
func CheckPreviewURL(s string) (string, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return "", invalid("preview URL %q: use http(s)://host[:port], without path, query or credentials", s)
	}
	return s, nil
}

// SetCellState sets a cell's state: active (takes new workspaces), draining (keeps its
// workspaces, takes no new ones; moves take them away) or down.
func (d *Directory) SetCellState(ctx context.Context, id, state string) error {
	if state != "active" && state != "draining" && state != "down" {
		return invalid("state must be active, draining or down")
	}
	tag, err := d.DB.Exec(ctx, `UPDATE cells SET state = $2 WHERE id = $1`, id, state)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

// SetCellCapacity sets the most workspaces a cell takes (0: unlimited); a cell at capacity is
// full and takes no new ones.
func (d *Directory) SetCellCapacity(ctx context.Context, id string, max int64) error {
	if max < 0 {
		return invalid("max workspaces must be 0 (unlimited) or more")
	}
	tag, err := d.DB.Exec(ctx, `UPDATE cells SET max_workspaces = $2 WHERE id = $1`, id, max)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

// Cells lists all cells, without workspace counts: what routers reread every few seconds, so it
// must not scan placements.
func (d *Directory) Cells(ctx context.Context) ([]Cell, error) {
	return d.cells(ctx, `SELECT id, internal_url, preview_url, state, max_workspaces, created_at, 0 FROM cells ORDER BY id`)
}

// CellsWithCounts lists all cells with their workspace counts (for operators).
func (d *Directory) CellsWithCounts(ctx context.Context) ([]Cell, error) {
	return d.cells(ctx, `
		SELECT c.id, c.internal_url, c.preview_url, c.state, c.max_workspaces, c.created_at,
		       (SELECT count(*) FROM placements p WHERE p.cell_id = c.id)
		FROM cells c ORDER BY c.id`)
}

func (d *Directory) cells(ctx context.Context, query string) ([]Cell, error) {
	rows, err := d.DB.Pool.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Cell, error) {
		var c Cell
		err := r.Scan(&c.ID, &c.InternalURL, &c.PreviewURL, &c.State, &c.MaxWorkspaces, &c.CreatedAt, &c.WorkspaceCount)
		return c, err
	})
}

// Cell returns one cell.
func (d *Directory) Cell(ctx context.Context, id string) (Cell, error) {
	var c Cell
	err := d.DB.Pool.QueryRow(ctx, `
		SELECT c.id, c.internal_url, c.preview_url, c.state, c.max_workspaces, c.created_at,
		       (SELECT count(*) FROM placements p WHERE p.cell_id = c.id)
		FROM cells c WHERE c.id = $1`, id).
		Scan(&c.ID, &c.InternalURL, &c.PreviewURL, &c.State, &c.MaxWorkspaces, &c.CreatedAt, &c.WorkspaceCount)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNotFound
	}
	return c, err
}

// CreateUser adds a user.
func (d *Directory) CreateUser(ctx context.Context, email, name string) (User, error) {
	email = strings.TrimSpace(email)
	if len(email) < 3 || len(email) > 254 || !strings.Contains(email, "@") {
		return User{}, invalid("e-mail %q is not an address", email)
	}
	if name == "" {
		name = email
	}
	if len(name) > 200 {
		return User{}, invalid("name longer than 200 characters")
	}
	u := User{ID: ids.New(ids.User), Email: strings.ToLower(email), Name: name}
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx,
			`INSERT INTO users (id, email, name) VALUES ($1, $2, $3) RETURNING created_at`,
			u.ID, u.Email, u.Name).Scan(&u.CreatedAt)
	})
	if db.IsUniqueViolation(err) {
		return User{}, fmt.Errorf("%w: user %s", ErrConflict, u.Email)
	}
	return u, err
}

// UserByEmail finds a user.
func (d *Directory) UserByEmail(ctx context.Context, email string) (User, error) {
	var u User
	err := d.DB.Pool.QueryRow(ctx, `SELECT id, email, name, created_at FROM users WHERE email = $1`,
		strings.ToLower(strings.TrimSpace(email))).Scan(&u.ID, &u.Email, &u.Name, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, ErrNotFound
	}
	return u, err
}

// ResolveUser accepts a user ID or an e-mail address.
func (d *Directory) ResolveUser(ctx context.Context, ref string) (User, error) {
	if ids.Valid(ids.User, ref) {
		var u User
		err := d.DB.Pool.QueryRow(ctx, `SELECT id, email, name, created_at FROM users WHERE id = $1`, ref).
			Scan(&u.ID, &u.Email, &u.Name, &u.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return u, ErrNotFound
		}
		return u, err
	}
	return d.UserByEmail(ctx, ref)
}

// CreateWorkspace creates a workspace placed at epoch 1, in one transaction, on cellID, which must
// be active and below its max_workspaces (0: unlimited); with cellID empty, on the active cell
// with the fewest workspaces that has room (ties by ID).
func (d *Directory) CreateWorkspace(ctx context.Context, name, cellID string, pinned bool) (Workspace, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return Workspace{}, invalid("workspace name must be 1-200 characters")
	}
	w := Workspace{ID: ids.New(ids.Workspace), Name: name}
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		w.CellID = cellID
		if cellID == "" {
			// Automatic placement: the active cell with the fewest workspaces that has room.
			err := tx.QueryRow(ctx, `
				SELECT c.id FROM cells c
				LEFT JOIN (SELECT cell_id, count(*) AS n FROM placements GROUP BY cell_id) p ON p.cell_id = c.id
				WHERE c.state = 'active' AND (c.max_workspaces = 0 OR COALESCE(p.n, 0) < c.max_workspaces)
				ORDER BY COALESCE(p.n, 0), c.id LIMIT 1`).Scan(&w.CellID)
			if errors.Is(err, pgx.ErrNoRows) {
				return invalid("no active cell has room for a new workspace (cellctl cells list shows states and capacity)")
			}
			if err != nil {
				return err
			}
		} else {
			var state string
			var max, n int64
			err := tx.QueryRow(ctx, `SELECT state, max_workspaces, (SELECT count(*) FROM placements WHERE cell_id = $1) FROM cells WHERE id = $1`,
				cellID).Scan(&state, &max, &n)
			if errors.Is(err, pgx.ErrNoRows) {
				return invalid("cell %q does not exist", cellID)
			}
			if err != nil {
				return err
			}
			if state != "active" {
				return invalid("cell %q is %s and takes no new workspaces", cellID, state)
			}
			if max > 0 && n >= max {
				return invalid("cell %q is full (%d of %d workspaces)", cellID, n, max)
			}
		}
		if err := tx.QueryRow(ctx, `INSERT INTO workspaces (id, name) VALUES ($1, $2) RETURNING created_at`,
			w.ID, w.Name).Scan(&w.CreatedAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO placements (workspace_id, cell_id, epoch, state, pinned) VALUES ($1, $2, 1, 'active', $3)`,
			w.ID, w.CellID, pinned)
		return err
	})
	return w, err
}

// Workspace returns one workspace.
func (d *Directory) Workspace(ctx context.Context, id string) (Workspace, error) {
	var w Workspace
	err := d.DB.Pool.QueryRow(ctx, `SELECT id, name, created_at FROM workspaces WHERE id = $1`, id).
		Scan(&w.ID, &w.Name, &w.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, ErrNotFound
	}
	return w, err
}

// WorkspaceByName returns a workspace by exact name (the first by ID if several share it).
func (d *Directory) WorkspaceByName(ctx context.Context, name string) (Workspace, error) {
	var w Workspace
	err := d.DB.Pool.QueryRow(ctx, `SELECT id, name, created_at FROM workspaces WHERE name = $1 ORDER BY id LIMIT 1`, name).
		Scan(&w.ID, &w.Name, &w.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, ErrNotFound
	}
	return w, err
}

// AddMember gives a user a role in a workspace (or changes it).
func (d *Directory) AddMember(ctx context.Context, workspaceID, userID, role string) error {
	if _, ok := RoleScopes[role]; !ok {
		return invalid("role %q: use owner, admin, editor or viewer", role)
	}
	_, err := d.DB.Exec(ctx, `
		INSERT INTO memberships (workspace_id, user_id, role) VALUES ($1, $2, $3)
		ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = excluded.role`,
		workspaceID, userID, role)
	if db.IsForeignKeyViolation(err) {
		return invalid("workspace %s or user %s does not exist", workspaceID, userID)
	}
	return err
}

// Role returns the user's role in a workspace, or ErrNotFound when not a member (or no such
// workspace: the two are deliberately the same answer).
func (d *Directory) Role(ctx context.Context, workspaceID, userID string) (string, error) {
	var role string
	err := d.DB.Pool.QueryRow(ctx, `SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2`,
		workspaceID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return role, err
}

// MemberWorkspace is a workspace seen by one member.
type MemberWorkspace struct {
	Workspace
	Role string
}

// WorkspacesOf lists the workspaces a user is a member of.
func (d *Directory) WorkspacesOf(ctx context.Context, userID string) ([]MemberWorkspace, error) {
	rows, err := d.DB.Pool.Query(ctx, `
		SELECT w.id, w.name, w.created_at, m.role FROM memberships m
		JOIN workspaces w ON w.id = m.workspace_id
		WHERE m.user_id = $1 ORDER BY w.name, w.id`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MemberWorkspace, error) {
		var m MemberWorkspace
		err := r.Scan(&m.ID, &m.Name, &m.CreatedAt, &m.Role)
		return m, err
	})
}

// Placement returns a workspace's placement.
func (d *Directory) Placement(ctx context.Context, workspaceID string) (Placement, error) {
	var p Placement
	err := d.DB.Pool.QueryRow(ctx, `
		SELECT workspace_id, cell_id, epoch, state, pinned, updated_at FROM placements WHERE workspace_id = $1`,
		workspaceID).Scan(&p.WorkspaceID, &p.CellID, &p.Epoch, &p.State, &p.Pinned, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, ErrNotFound
	}
	return p, err
}

// Placements lists placements, optionally of one cell.
func (d *Directory) Placements(ctx context.Context, cellID string) ([]Placement, error) {
	rows, err := d.DB.Pool.Query(ctx, `
		SELECT workspace_id, cell_id, epoch, state, pinned, updated_at FROM placements
		WHERE $1 = '' OR cell_id = $1 ORDER BY cell_id, workspace_id`, cellID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Placement, error) {
		var p Placement
		err := r.Scan(&p.WorkspaceID, &p.CellID, &p.Epoch, &p.State, &p.Pinned, &p.UpdatedAt)
		return p, err
	})
}

// SetPinned pins or unpins a workspace to its cell.
func (d *Directory) SetPinned(ctx context.Context, workspaceID string, pinned bool) error {
	tag, err := d.DB.Exec(ctx, `UPDATE placements SET pinned = $2, updated_at = now() WHERE workspace_id = $1`, workspaceID, pinned)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

// HashToken is the stored form of a token: SHA-256 of the whole token string. Tokens carry
// 256 random bits, so a fast hash is enough (no password stretching needed).
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// NewTokenSecret returns a fresh token string.
func NewTokenSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("directory: no randomness: " + err.Error())
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// TokenShapeValid reports whether s looks like a token this system issues, before any lookup.
func TokenShapeValid(s string) bool {
	if !strings.HasPrefix(s, TokenPrefix) || len(s) != len(TokenPrefix)+43 {
		return false
	}
	for _, c := range s[len(TokenPrefix):] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// MaxTokenLifetime bounds token expiry.
const MaxTokenLifetime = 366 * 24 * time.Hour

// CreateToken issues a token for a user. The returned string is shown once; only its hash is
// stored.
func (d *Directory) CreateToken(ctx context.Context, userID, name string, scopes []string, lifetime time.Duration) (string, Token, error) {
	if len(scopes) == 0 {
		return "", Token{}, invalid("a token needs at least one scope")
	}
	seen := map[string]bool{}
	clean := make([]string, 0, len(scopes))
	for _, s := range scopes {
		s = strings.TrimSpace(s)
		if !ValidScope(s) {
			return "", Token{}, invalid("unknown scope %q (known: %s)", s, strings.Join(Scopes, ", "))
		}
		if !seen[s] {
			seen[s] = true
			clean = append(clean, s)
		}
	}
	if lifetime <= 0 || lifetime > MaxTokenLifetime {
		return "", Token{}, invalid("lifetime must be between 1s and %s", MaxTokenLifetime)
	}
	if len(name) > 200 {
		return "", Token{}, invalid("token name longer than 200 characters")
	}
	secret := NewTokenSecret()
	t := Token{ID: ids.New(ids.Token), UserID: userID, Name: name, Scopes: clean}
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			INSERT INTO tokens (id, user_id, hash, name, scopes, expires_at) VALUES ($1, $2, $3, $4, $5, now() + $6::INTERVAL)
			RETURNING expires_at, created_at`,
			t.ID, userID, HashToken(secret), name, clean, fmt.Sprintf("%d seconds", int64(lifetime.Seconds()))).
			Scan(&t.ExpiresAt, &t.CreatedAt)
	})
	if db.IsForeignKeyViolation(err) {
		return "", Token{}, invalid("user %s does not exist", userID)
	}
	if err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}

// RevokeToken revokes a token by ID. Revoking twice is not an error.
func (d *Directory) RevokeToken(ctx context.Context, id string) error {
	tag, err := d.DB.Exec(ctx, `UPDATE tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1`, id)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return err
}

// TokenByHash looks a token up by its hash, with its user.
func (d *Directory) TokenByHash(ctx context.Context, hash []byte) (Token, error) {
	var t Token
	err := d.DB.Pool.QueryRow(ctx, `
		SELECT t.id, t.user_id, t.name, t.scopes, t.expires_at, t.revoked_at, t.created_at, u.id, u.email, u.name, u.created_at
		FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = $1`, hash).
		Scan(&t.ID, &t.UserID, &t.Name, &t.Scopes, &t.ExpiresAt, &t.RevokedAt, &t.CreatedAt,
			&t.User.ID, &t.User.Email, &t.User.Name, &t.User.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNotFound
	}
	return t, err
}

// Tokens lists a user's tokens (without secrets).
func (d *Directory) Tokens(ctx context.Context, userID string) ([]Token, error) {
	rows, err := d.DB.Pool.Query(ctx, `
		SELECT id, user_id, name, scopes, expires_at, revoked_at, created_at FROM tokens WHERE user_id = $1 ORDER BY created_at`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) {
		var t Token
		err := r.Scan(&t.ID, &t.UserID, &t.Name, &t.Scopes, &t.ExpiresAt, &t.RevokedAt, &t.CreatedAt)
		return t, err
	})
}
