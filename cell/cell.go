// Package cell builds one cell's services: the store, the idempotency store, the mutation-job
// queue, the compiler and the authoring service over the cell's database, blob store and render
// coordinator. cell/cmd/cell builds them with New and hands them to cell/api, which only serves
// them over HTTP; fault-injection points are set here, where the services are built.
//
// docs/architecture.md draws the cell's packages and the rule they keep: the domain packages
// (cell/object, cell/design, cell/content, cell/catalog) import no database driver and no HTTP
// framework; cell/store imports them and only reads and writes SQL; cell/api imports both and
// owns the wire format. TestArchitecture checks it.
package cell

import (
	"fmt"
	"net/url"
	"time"

	"gocloud.dev/blob"

	"slidecells/cell/authoring"
	cblob "slidecells/cell/blob"
	"slidecells/cell/compile"
	"slidecells/cell/idempotency"
	"slidecells/cell/jobs"
	"slidecells/cell/render"
	"slidecells/cell/store"
	"slidecells/cell/tenancy"
	"slidecells/shared/db"
	"slidecells/shared/ticket"
)

// Config is what New needs.
type Config struct {
	DB *db.DB
	// Blobs is the cell's blob store (fileblob locally, s3blob in production).
	Blobs *blob.Bucket
	// Renderer is the cell's render coordinator; nil when no renderer is configured (every
	// render stage answers unavailable).
	Renderer *render.Coordinator
	// PublicURL, TicketSigner and PreviewTTL make preview URLs (CELL_PUBLIC_URL,
	// RENDER_TICKET_SIGNING_KEY_FILE, CELL_PREVIEW_TTL); without URL or signer previews answer 503.
	PublicURL    *url.URL
	TicketSigner *ticket.Signer
	PreviewTTL   time.Duration
	// RenderWait bounds a validation's or a screenshot's wait for its render (CELL_RENDER_WAIT).
	RenderWait time.Duration
	// IdempotencyRetention is how long Idempotency-Key answers are replayed (default 24h).
	IdempotencyRetention time.Duration
	// CompileSlots bounds concurrent compiles in this process (at least 1; default 2 in
	// cell/cmd/cell).
	CompileSlots int
	// Failpoint, when set, is consulted at the named fault points of the idempotency store and
	// the authoring service (CELL_FAILPOINTS): for fault tests only.
	Failpoint func(name string) error
}

// Services are one cell's services, ready to be served by cell/api.
type Services struct {
	Store *store.Store
	// Blobs stores the bytes of assets and derived content in the cell's blob store.
	Blobs *cblob.Store
	Idem  *idempotency.Store
	// Jobs is the cell's mutation-job queue; api.Server.Workers runs it.
	Jobs *jobs.Queue
	// Authoring creates and edits page and component source through jobs, validates and
	// previews.
	Authoring *authoring.Service
}

// New builds a cell's services. A bad option is an error.
func New(c Config) (*Services, error) {
	compiler, err := compile.New(compile.Options{Slots: max(1, c.CompileSlots), KitItems: authoring.KitItems()})
	if err != nil {
		return nil, fmt.Errorf("cell: compiler: %w", err)
	}
	st := &store.Store{DB: c.DB}
	blobs := &cblob.Store{Bucket: c.Blobs}
	q := &jobs.Queue{DB: c.DB}
	q.Init()
	return &Services{
		Store: st,
		Blobs: blobs,
		Idem:  &idempotency.Store{DB: c.DB, Retention: c.IdempotencyRetention, Fence: tenancy.Writable, Failpoint: c.Failpoint},
		Jobs:  q,
		Authoring: &authoring.Service{Store: st, Jobs: q, Compiler: compiler, Modules: blobs, Render: c.Renderer,
			RenderWait: c.RenderWait, Failpoint: c.Failpoint,
			Previews: &authoring.Previews{PublicBase: c.PublicURL, Signer: c.TicketSigner, TTL: c.PreviewTTL}},
	}, nil
}
