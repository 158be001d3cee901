package authoring

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"gocloud.dev/blob/fileblob"

	"slidecells/cell/auth"
	"slidecells/cell/auth/authtest"
	"slidecells/cell/blob"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/jobs"
	"slidecells/cell/store"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/problem"
)

// Sources the tests compile.
const (
	simplePage = "export default function P() { return <div>page</div> }\n"
	brokenPage = "export default function P() { return <div>page</span> }\n"
	cardSource = "export default function Card() { return <div className=\"card\">card</div> }\n"
	cardPage   = "import Card from '@components/card'\nexport default function P() { return <div><Card /></div> }\n"
)

// fixture is the authoring service of one cell over real databases (a directory with Ann
// owning workspaces A and B, the cell database hosting both), a file bucket and the real
// compiler, with no renderer; a project in each workspace.
type fixture struct {
	tn         *authtest.Tenants
	svc        *Service
	a, b       auth.Scope // Ann, owner of A and of B
	prjA, prjB string
}

// setup returns the fixture and a context for its calls.
func setup(t *testing.T) (*fixture, context.Context) {
	t.Helper()
	t.Parallel()
	ctx := context.Background()
	tn := authtest.New(t, 2)
	d := dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell))
	for _, sc := range tn.Scopes {
		if _, err := d.Pool.Exec(ctx, `INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, 1, 'active')`, sc.WorkspaceID()); err != nil {
			t.Fatal(err)
		}
	}
	bucket, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	compiler, err := compile.New(compile.Options{Slots: 1, KitItems: KitItems()})
	if err != nil {
		t.Fatal(err)
	}
	st := &store.Store{DB: d}
	q := &jobs.Queue{DB: d, BackoffBase: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond}
	q.Init()
	f := &fixture{tn: tn, a: tn.Scopes[0], b: tn.Scopes[1],
		svc: &Service{Store: st, Jobs: q, Compiler: compiler, Modules: &blob.Store{Bucket: bucket}}}
	for i, sc := range []auth.Scope{f.a, f.b} {
		p, err := st.CreateProject(ctx, sc, "Deck", "")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			f.prjA = p.ID
		} else {
			f.prjB = p.ID
		}
	}
	return f, ctx
}

// run starts a job pool over the fixture's queue, with the service's handlers and its
// authorizer. It stops when the test ends, or earlier when the returned function is called.
// running is setup with the job pool running until the test ends, and a context.
func running(t *testing.T) (*fixture, context.Context) {
	t.Helper()
	f, ctx := setup(t)
	f.run(t)
	return f, ctx
}

func (f *fixture) run(t *testing.T) (stop func()) {
	t.Helper()
	p := &jobs.Pool{Queue: f.svc.Jobs, Handlers: f.svc.Handlers(), Authorize: JobAuthorizer(f.tn.Authn), Slots: 1,
		Lease: 5 * time.Second, PollInterval: 20 * time.Millisecond, ShutdownGrace: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the job pool did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// finished waits (at most 60 s) until the job ends and returns it.
func (f *fixture) finished(t *testing.T, sc auth.Scope, id string) jobs.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := f.svc.Jobs.Get(context.Background(), sc, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == jobs.Succeeded || j.Status == jobs.Failed || j.Status == jobs.Canceled {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s at stage %q", id, j.Status, j.Stage)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// user adds a user with a role in A and returns the scope a request of theirs with a token of
// tokenScopes (nil: every scope) gets there.
func (f *fixture) user(t *testing.T, email, role string, tokenScopes []string) auth.Scope {
	t.Helper()
	ctx := context.Background()
	u, err := f.tn.Dir.CreateUser(ctx, email, email)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.tn.Dir.AddMember(ctx, f.a.WorkspaceID(), u.ID, role); err != nil {
		t.Fatal(err)
	}
	if tokenScopes == nil {
		tokenScopes = directory.Scopes
	}
	sc, err := f.tn.Authn.Authorize(ctx, auth.Principal{UserID: u.ID, Scopes: tokenScopes}, f.a.WorkspaceID())
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// createPage submits a page create and runs it to success (the pool must run).
func (f *fixture) createPage(t *testing.T, sc auth.Scope, projectID, key, source string) content.Page {
	t.Helper()
	j, err := f.svc.SubmitPageCreate(context.Background(), sc, PageCreate{ProjectID: projectID, Key: key, Title: key, FileType: "tsx", Source: source}, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := f.finished(t, sc, j.ID)
	if done.Status != jobs.Succeeded {
		t.Fatalf("page create %s: %s %s", key, done.ErrorCode, done.ErrorSummary)
	}
	var res Result
	if err := json.Unmarshal(done.Result, &res); err != nil {
		t.Fatal(err)
	}
	p, err := f.svc.Store.GetPage(context.Background(), sc, res.ObjectID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// publish creates a component through its job and publishes its draft (the pool must run).
func (f *fixture) publish(t *testing.T, sc auth.Scope, key, source string) content.Component {
	t.Helper()
	ctx := context.Background()
	j, err := f.svc.SubmitComponentCreate(ctx, sc, ComponentCreate{Key: key, Title: key, FileType: "tsx", Source: source}, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := f.finished(t, sc, j.ID)
	if done.Status != jobs.Succeeded {
		t.Fatalf("component create %s: %s %s", key, done.ErrorCode, done.ErrorSummary)
	}
	var res struct {
		ObjectID  string `json:"object_id"`
		DraftHash string `json:"draft_hash"`
	}
	if err := json.Unmarshal(done.Result, &res); err != nil {
		t.Fatal(err)
	}
	c, err := f.svc.Publish(ctx, sc, res.ObjectID, res.DraftHash)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// jobCount counts the jobs of a workspace.
func (f *fixture) jobCount(t *testing.T, sc auth.Scope) int {
	t.Helper()
	return dbtest.Count(t, f.svc.Store.DB, `SELECT count(*) FROM mutation_jobs WHERE workspace_id = $1`, sc.WorkspaceID())
}

// modules lists the derived objects (modules, stylesheets) of a workspace in the bucket.
func (f *fixture) modules(t *testing.T, sc auth.Scope) []string {
	t.Helper()
	keys, err := blob.Keys(context.Background(), f.svc.Modules.Bucket, "ws/"+sc.WorkspaceID()+"/modules/")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// code is the problem code of err ("" for nil).
func code(err error) problem.Code {
	if err == nil {
		return ""
	}
	return problem.As(err).Code
}
