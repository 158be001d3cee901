package moves

import (
	"context"
	"fmt"
	"os"
	"strings"

	gcblob "gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// buckets
	_ "gocloud.dev/blob/memblob"  // mem:// buckets (tests)
	_ "gocloud.dev/blob/s3blob"   // s3:// buckets (production)

	"slidecells/shared/db"
)

// SessionParams are the session settings of a move's connections: timestamps as text in UTC
// and bytea in hex, so that every value reads back exactly as the other side wrote it.
var SessionParams = map[string]string{"timezone": "UTC", "bytea_output": "hex"}

// OpenEndpoint connects to a cell's database and blob store for moves. Neither URL appears in
// an error it returns.
func OpenEndpoint(ctx context.Context, cellID, databaseURL, blobURL string) (*Endpoint, error) {
	d, err := db.Open(ctx, databaseURL, db.Options{ApplicationName: "cellctl-move", MaxConns: 8, RuntimeParams: SessionParams})
	if err != nil {
		return nil, fmt.Errorf("cell %s database: %w", cellID, err)
	}
	if strings.HasPrefix(blobURL, "file://") {
		dir := strings.TrimPrefix(blobURL, "file://")
		if i := strings.IndexByte(dir, '?'); i >= 0 {
			dir = dir[:i]
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			d.Close()
			return nil, fmt.Errorf("cell %s blob store: %w", cellID, err)
		}
	}
	b, err := gcblob.OpenBucket(ctx, blobURL)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("cell %s blob store: cannot open it (check its URL's scheme and path)", cellID)
	}
	return &Endpoint{ID: cellID, DB: d, Blobs: b}, nil
}

// Close closes the endpoint's connections.
func (p *Endpoint) Close() {
	p.DB.Close()
	_ = p.Blobs.Close()
}
