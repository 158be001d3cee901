package preview

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"slidecells/cell/compile"
	"slidecells/cell/snapshot"
	"slidecells/shared/digest"
	"slidecells/shared/ids"
	"slidecells/shared/ticket"
)

// The runtime is built once per test binary from the committed sources and the npm packages
// make build installed (npm ci).
var (
	runtimeOnce sync.Once
	runtimeDir  string
	runtimeErr  error
)

func testRuntime(t testing.TB) *Runtime {
	t.Helper()
	runtimeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "preview-runtime-*")
		if err != nil {
			runtimeErr = err
			return
		}
		runtimeDir = filepath.Join(dir, "rt")
		runtimeErr = BuildRuntime("runtime", runtimeDir)
	})
	if runtimeErr != nil {
		t.Fatalf("build the preview runtime (needs `make npm`): %v", runtimeErr)
	}
	rt, err := LoadRuntime(runtimeDir)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestMain(m *testing.M) {
	code := m.Run()
	if runtimeDir != "" {
		_ = os.RemoveAll(filepath.Dir(runtimeDir))
	}
	closeBrowser()
	os.Exit(code)
}

const testCredential = "preview-service-credential-for-tests"

// env is one cell blob store with its backend interface and one preview host in front of it,
// talking real HTTP.
type env struct {
	t      testing.TB
	ws     string
	bucket *gcblob.Bucket
	mu     sync.Mutex
	signer *ticket.Signer
	extra  []ticket.PublicKey
	cell   *httptest.Server
	host   *httptest.Server
	puller *Puller
	now    time.Time
	// cellCalls counts requests that reached the backend interface, by path.
	cellCalls map[string]int
}

func newEnv(t testing.TB) *env {
	t.Helper()
	b, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	signer, err := ticket.GenerateSigner("test-1")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ws: ids.New(ids.Workspace), bucket: b, signer: signer, cellCalls: map[string]int{}}
	backend := NewBackend(BackendConfig{Bucket: b, Credentials: []string{testCredential}, Keys: e.publishedKeys})
	e.cell = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.cellCalls[r.URL.Path]++
		e.mu.Unlock()
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(e.cell.Close)
	e.puller, err = NewPuller(PullerOptions{BackendURL: e.cell.URL, Credential: testCredential, Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Puller: e.puller, Runtime: testRuntime(t), Log: zap.NewNop(), Now: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	e.host = httptest.NewServer(h.Handler())
	t.Cleanup(e.host.Close)
	return e
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.now.IsZero() {
		return time.Now()
	}
	return e.now
}

func (e *env) publishedKeys() []ticket.PublicKey {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]ticket.PublicKey{e.signer.PublicKey()}, e.extra...)
}

func (e *env) calls(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cellCalls[path]
}

// blobSpec is one font or asset of a test snapshot.
type blobSpec struct {
	ID    string // assets only
	Data  []byte
	Type  string
	Write bool // false: listed in the manifest but never written to the store
}

// snap describes a test snapshot.
type snap struct {
	Kind     string // page (default) or component
	FileType string // tsx (default), jsx, html
	Source   string // compiled with cell/compile unless Raw
	Raw      bool   // use Source as the module's bytes as they are
	Styles   string // may use {{font:N}} and {{asset:N}} for the blob paths of Fonts[N] and Assets[N]
	Fonts    []blobSpec
	Assets   []blobSpec
	// NoModule and NoStyles leave those objects out of the store (host faults).
	NoModule, NoStyles bool
	Canvas             snapshot.Canvas
	Workspace          string
}

func (e *env) put(key string, data []byte, ctype string) {
	e.t.Helper()
	if err := e.bucket.WriteAll(context.Background(), key, data, &gcblob.WriterOptions{ContentType: ctype}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) object(ws string, data []byte, ctype string, write bool) snapshot.Object {
	d := digest.Bytes(data)
	o := snapshot.Object{Key: "ws/" + ws + "/objects/" + strings.TrimPrefix(d, "sha256:"), Digest: d, Bytes: int64(len(data)), ContentType: ctype}
	if write {
		e.put(o.Key, data, ctype)
	}
	return o
}

// snapshot compiles the source, writes every object and the manifest, and returns it.
func (e *env) snapshot(s snap) *snapshot.Manifest {
	e.t.Helper()
	ws := s.Workspace
	if ws == "" {
		ws = e.ws
	}
	if s.Kind == "" {
		s.Kind = snapshot.KindPage
	}
	if s.FileType == "" {
		s.FileType = "tsx"
	}
	if s.Canvas.Width == 0 {
		s.Canvas = snapshot.Canvas{Width: 640, Height: 360, DeviceScaleFactor: 1}
	}
	ref := ids.New(ids.Snapshot)
	if s.FileType == "html" {
		// an html page may use {{asset:N}} for the absolute path of Assets[N]
		for i, a := range s.Assets {
			s.Source = strings.ReplaceAll(s.Source, fmt.Sprintf("{{asset:%d}}", i), "/snapshots/"+ref+"/blobs/"+strings.TrimPrefix(digest.Bytes(a.Data), "sha256:"))
		}
	}
	code := []byte(s.Source)
	if !s.Raw {
		c, err := compile.New(compile.Options{KitItems: KitItems()})
		if err != nil {
			e.t.Fatal(err)
		}
		kind := compile.KindPage
		entry := compile.Module{FileType: compile.FileType(s.FileType), Source: []byte(s.Source)}
		if s.Kind == snapshot.KindComponent {
			kind, entry.Key = compile.KindComponent, "test-component"
		}
		res, err := c.Compile(context.Background(), compile.Request{Kind: kind, Entry: entry})
		if err != nil {
			e.t.Fatal(err)
		}
		if !res.OK() {
			e.t.Fatalf("compile: %v", res.Diagnostics)
		}
		code = res.Code
	}
	mtype := "text/javascript"
	if s.FileType == "html" {
		mtype = "text/html"
	}
	m := &snapshot.Manifest{
		Schema: snapshot.Schema, Ref: ref, WorkspaceID: ws, Owner: "test",
		Entity: snapshot.Entity{Kind: s.Kind}, FileType: s.FileType, Scenes: []string{"default"},
		Module: e.object(ws, code, mtype, !s.NoModule), HostBuild: HostBuild, Canvas: s.Canvas,
		CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC(),
	}
	styles := s.Styles
	for i, f := range s.Fonts {
		o := e.object(ws, f.Data, f.Type, f.Write)
		m.Fonts = append(m.Fonts, o)
		styles = strings.ReplaceAll(styles, fmt.Sprintf("{{font:%d}}", i), "blobs/"+o.Hex())
	}
	for i, a := range s.Assets {
		o := e.object(ws, a.Data, a.Type, a.Write)
		m.Assets = append(m.Assets, snapshot.Asset{ID: a.ID, Object: o})
		styles = strings.ReplaceAll(styles, fmt.Sprintf("{{asset:%d}}", i), "blobs/"+o.Hex())
	}
	m.Styles = e.object(ws, []byte(styles), "text/css", !s.NoStyles)
	d, err := m.ComputeInputDigest()
	if err != nil {
		e.t.Fatal(err)
	}
	m.InputDigest = d
	if err := snapshot.Save(context.Background(), e.bucket, m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// token signs a preview-access token for the document at path (default: the host's own
// /snapshots/<ref>), changed by mod.
func (e *env) token(m *snapshot.Manifest, mod func(*ticket.PreviewAccess)) string {
	e.t.Helper()
	now := e.clock()
	c := &ticket.PreviewAccess{
		WorkspaceID: m.WorkspaceID, SnapshotRef: m.Ref, Origin: e.host.URL,
		Path: "/snapshots/" + m.Ref, IssuedAt: now.Add(-time.Second), ExpiresAt: now.Add(10 * time.Minute),
	}
	if mod != nil {
		mod(c)
	}
	e.mu.Lock()
	signer := e.signer
	e.mu.Unlock()
	tok, err := signer.Sign(c)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// pngOf is a w×h PNG of one colour.
func pngOf(t testing.TB, w, h int, c color.Color) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testFont is a font Debian's fonts-dejavu-core installs (.ci/run installs it).
func testFont(t testing.TB) []byte {
	b, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatalf("test font (Debian's fonts-dejavu-core): %v", err)
	}
	return b
}
