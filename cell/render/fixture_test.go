package render

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob/fileblob"

	"slidecells/cell/auth"
	"slidecells/cell/auth/authtest"
	"slidecells/cell/snapshot"
	"slidecells/migrations"
	"slidecells/shared/db"
	"slidecells/shared/db/dbtest"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// fixture is one cell database with workspaces the tests may render in, and a way to build
// coordinators over it (several, as several replicas would run).
type fixture struct {
	url    string
	scopes []auth.Scope
	bucket string
	signer *ticket.Signer
	db     *db.DB
}

func setup(t testing.TB, workspaces int) *fixture {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		tt.Parallel()
	}
	f := &fixture{url: dbtest.NewDatabase(t, migrations.FS, migrations.Cell), bucket: t.TempDir(),
		scopes: authtest.New(t, workspaces).Scopes}
	var err error
	if f.signer, err = ticket.GenerateSigner("test-1"); err != nil {
		t.Fatal(err)
	}
	f.db = dbtest.Open(t, f.url)
	for _, sc := range f.scopes { // the cell hosts the workspaces (what the tenancy guard's adoption writes)
		if _, err := f.db.Exec(context.Background(), `INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, 1, 'active')`, sc.WorkspaceID()); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// coordinator builds a coordinator over its own connection pool (a replica of its own).
func (f *fixture) coordinator(t testing.TB, workers []Worker, tune func(*Config)) *Coordinator {
	t.Helper()
	b, err := fileblob.OpenBucket(f.bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cfg := Config{Workers: workers, Credential: "test-credential-0123456789", ProfileDigest: testProfile,
		GlobalConcurrency: len(workers), WorkspaceConcurrency: len(workers), QueueSize: 1000, WorkspaceQueueSize: 1000,
		RequestTimeout: time.Minute, MaxAttempts: 3, Signer: f.signer, PromoteAfter: time.Hour}
	if tune != nil {
		tune(&cfg)
	}
	log := zap.NewNop()
	if os.Getenv("RENDER_TEST_LOG") != "" {
		log = zap.NewExample()
	}
	return New(cfg, dbtest.Open(t, f.url), b, log)
}

const testProfile = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

// addWorkers registers ready workers directly, as the registry would.
func (f *fixture) addWorkers(t testing.TB, n int) []Worker {
	t.Helper()
	var ws []Worker
	for i := range n {
		w := Worker{ID: fmt.Sprintf("w%02d", i), URL: fmt.Sprintf("http://127.0.0.1:%d", 1+i)}
		if _, err := f.db.Exec(context.Background(), `INSERT INTO render_workers (worker_id, epoch, url, environment_digest, state,
			registered_at, heartbeat_at, last_dispatch_at) VALUES ($1, 'e1', $2, $3, 'ready', now(), now(), now())`, w.ID, w.URL, testProfile); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws
}

// manifest is a valid snapshot for workspace sc; n makes inputs differ.
func manifest(t testing.TB, sc auth.Scope, n int) *snapshot.Manifest {
	t.Helper()
	ws := sc.WorkspaceID()
	obj := func(hex string) snapshot.Object {
		return snapshot.Object{Key: "ws/" + ws + "/modules/" + hex + ".js", Digest: "sha256:" + hex, Bytes: 1, ContentType: "text/javascript"}
	}
	m := &snapshot.Manifest{Schema: snapshot.Schema, WorkspaceID: ws, Entity: snapshot.Entity{Kind: snapshot.KindPage, ID: fmt.Sprintf("pg_%d", n)},
		FileType: "tsx", Module: obj(fmt.Sprintf("%064x", n)), Styles: obj(fmt.Sprintf("%064x", n+1_000_000)), Scenes: []string{rc.DefaultScene},
		HostBuild: "preview-host-1", Canvas: snapshot.Canvas{Width: 320, Height: 180, DeviceScaleFactor: 1}}
	var err error
	if m.InputDigest, err = m.ComputeInputDigest(); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) submit(t testing.TB, c *Coordinator, sc auth.Scope, n int, cat Category) Request {
	t.Helper()
	op := rc.OpPageDiagnose
	if cat == Background {
		op = rc.OpPageCapture
	}
	r, err := c.Submit(context.Background(), sc, Spec{Owner: fmt.Sprintf("test-%d", n), Stage: "test", Operation: op, Category: cat,
		Snapshot: manifest(t, sc, n)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
