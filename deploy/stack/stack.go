// Package stack runs the whole local deployment as real processes: one PostgreSQL (or given
// database URLs), the directory, N cells, per cell a preview host (when bin/preview exists) and
// two renderers (Options.Renderers), and the router, each a child process on a loopback
// port. `make run` (deploy/cmd/devstack) and the end-to-end tests both use it, so what a
// developer runs is what the tests check.
package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"slidecells/shared/directory"
	"slidecells/shared/loop"
	"slidecells/shared/pgserver"
	"slidecells/shared/proc"
)

// Options configure a stack.
type Options struct {
	// Dir holds the database folder (pg/) and logs (logs/). Reused across runs.
	Dir string
	// BinDir holds the built binaries: cell, router, renderer, and preview (optional: without
	// it no preview hosts run).
	BinDir string
	// Cells to run, e.g. ["cell-a", "cell-b"].
	Cells []string
	// DirectoryURL and CellURLs point at existing databases; empty means the stack starts its
	// own PostgreSQL and creates them.
	DirectoryURL string
	CellURLs     map[string]string
	// RouterAddr is the router's listen address; empty picks a free port.
	RouterAddr string
	// Env adds environment variables per component ("router", "cell-a", "cell" for all cells,
	// "renderer" for all renderers, "preview" for all preview hosts, "cell-a-preview").
	Env map[string][]string
	// Durable keeps PostgreSQL's fsync on (make run); tests turn it off.
	Durable bool
	// Renderers starts RenderersPerCell renderers per cell (needs Debian's chromium, installed
	// when missing and we are root), all with one profile manifest written by `renderer
	// profile`. Keys and credentials are kept in Dir/keys.
	Renderers bool
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// Stack is a running deployment.
type Stack struct {
	opts      Options
	PG        *pgserver.Server
	Directory *directory.Directory
	DirURL    string
	RouterURL string
	// RouterInternalURL is the router's internal listener (/livez, /readyz, /metrics), which
	// the public RouterURL never serves.
	RouterInternalURL string
	Router            *Proc
	Cells             map[string]*Proc
	Renderers         map[string][]*Proc // by cell: <cell>-r1, <cell>-r2
	// Previews are the preview hosts, by cell; empty without bin/preview.
	Previews  map[string]*Proc
	CellDBURL map[string]string
	// ProfileManifest is the render profile manifest renderers and cells were given, and
	// ProfileDigest its environment digest (empty without renderers).
	ProfileManifest, ProfileDigest string
	// CellsFile is cellctl's cells file for moves (CELLCTL_CELLS_FILE): each cell's database and
	// blob store. It holds credentials and is written readable by its owner only.
	CellsFile string
	// Replicas are further processes of a cell (StartReplica), sharing its database.
	Replicas []*Proc
	spares   []*Proc
}

// Proc is one child process.
type Proc struct {
	Name string
	URL  string
	// OpsURL serves /livez (and /readyz, /metrics) when that is not URL: the router's internal
	// listener.
	OpsURL string
	args   []string
	env    []string
	bin    string
	log    string
	mu     sync.Mutex
	proc   *proc.Group
}

// Start brings everything up and waits until every process answers /livez.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	s := &Stack{opts: o, Cells: map[string]*Proc{}, Renderers: map[string][]*Proc{}, Previews: map[string]*Proc{}, CellDBURL: map[string]string{}}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(o.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	s.DirURL = o.DirectoryURL
	for _, c := range o.Cells {
		s.CellDBURL[c] = o.CellURLs[c]
	}
	if s.DirURL == "" || len(o.CellURLs) < len(o.Cells) {
		pg, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(o.Dir, "pg"), Durable: o.Durable, Log: o.Log})
		if err != nil {
			return nil, err
		}
		s.PG = pg
		if s.DirURL == "" {
			if err := pg.CreateDatabase(ctx, "directory"); err != nil {
				return nil, err
			}
			s.DirURL = pg.URL("directory")
		}
		for _, c := range o.Cells {
			if s.CellDBURL[c] == "" {
				name := "cell_" + sanitize(c)
				if err := pg.CreateDatabase(ctx, name); err != nil {
					return nil, err
				}
				s.CellDBURL[c] = pg.URL(name)
			}
		}
	}
	dir, err := directory.Open(ctx, s.DirURL)
	if err != nil {
		return nil, fmt.Errorf("directory: %w", err)
	}
	s.Directory = dir
	if err := s.writeCellsFile(); err != nil {
		return nil, err
	}

	// The ticket key pair signs admission tickets and preview access; the cells need it with
	// or without renderers.
	keys := filepath.Join(o.Dir, "keys")
	publicKeys, err := ticketKeys(keys)
	if err != nil {
		return nil, err
	}
	var credentialFile string
	if o.Renderers {
		if err := ensureChromium(o.Log); err != nil {
			return nil, err
		}
		if credentialFile, err = serviceCredential(keys); err != nil {
			return nil, err
		}
		if s.ProfileManifest, s.ProfileDigest, err = s.writeProfile(ctx, keys); err != nil {
			return nil, err
		}
	}
	// The router's address comes first: cells put the public URL into the preview URLs they
	// hand out.
	addr := o.RouterAddr
	if addr == "" {
		port, err := pgserver.FreePort()
		if err != nil {
			return nil, err
		}
		addr = "127.0.0.1:" + strconv.Itoa(port)
	}
	s.RouterURL = "http://" + addr
	previewBin, havePreview := s.previewBinary()
	for _, c := range o.Cells {
		port, err := pgserver.FreePort()
		if err != nil {
			return nil, err
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		pv, err := planPreview(keys, c)
		if err != nil {
			return nil, err
		}
		env := []string{
			"CELL_ID=" + c,
			"CELL_LISTEN_ADDR=127.0.0.1:" + strconv.Itoa(port),
			"CELL_DATABASE_URL=" + s.CellDBURL[c],
			"DIRECTORY_DATABASE_URL=" + s.DirURL,
			"CELL_BLOB_URL=" + s.BlobURL(c),
			"CELL_PUBLIC_URL=" + s.RouterURL,
			"RENDER_TICKET_SIGNING_KEY_FILE=" + filepath.Join(keys, "ticket-signer"),
			"RENDER_RUNTIME_NAVIGATION_BASE_URL=" + pv.URL + "/",
			"PREVIEW_SERVICE_CREDENTIAL_FILE=" + pv.credential,
		}
		if o.Renderers {
			specs, err := planRenderers(c)
			if err != nil {
				return nil, err
			}
			for _, spec := range specs {
				r, err := s.startRenderer(c, spec, pv.URL, publicKeys, credentialFile, s.ProfileManifest)
				if err != nil {
					return nil, err
				}
				s.Renderers[c] = append(s.Renderers[c], r)
			}
			env = append(env,
				"RENDER_SERVICE_CREDENTIAL_FILE="+credentialFile,
				"RENDER_WORKERS_CONFIG="+workersConfig(specs),
				"RENDER_PROFILE_MANIFEST="+s.ProfileManifest,
			)
		}
		p := &Proc{Name: c, URL: url, bin: filepath.Join(o.BinDir, "cell"), log: filepath.Join(o.Dir, "logs", c+".log"),
			env: append(append(env, o.Env["cell"]...), o.Env[c]...)}
		if err := p.Start(); err != nil {
			return nil, err
		}
		s.Cells[c] = p
		previewURL := ""
		if havePreview {
			if _, err := s.startPreview(c, previewBin, url, pv); err != nil {
				return nil, err
			}
			previewURL = pv.URL
		}
		if _, err := dir.Cell(ctx, c); errors.Is(err, directory.ErrNotFound) {
			err = dir.AddCell(ctx, directory.Cell{ID: c, InternalURL: url, PreviewURL: previewURL})
			if err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		} else if err := dir.SetCellURL(ctx, c, url); err != nil {
			return nil, err
		} else if err := dir.SetCellPreviewURL(ctx, c, previewURL); err != nil {
			return nil, err
		}
	}
	// The internal port is picked free and then bound by the router, so another process may take
	// it in between (parallel tests): a router that exits at start is started again on a fresh
	// port, at most three times.
	for try := 1; ; try++ {
		internalPort, err := pgserver.FreePort()
		if err != nil {
			return nil, err
		}
		internalAddr := "127.0.0.1:" + strconv.Itoa(internalPort)
		s.RouterInternalURL = "http://" + internalAddr
		s.Router = &Proc{Name: "router", URL: s.RouterURL, OpsURL: s.RouterInternalURL, bin: filepath.Join(o.BinDir, "router"), log: filepath.Join(o.Dir, "logs", "router.log"),
			env: append([]string{"ROUTER_LISTEN_ADDR=" + addr, "ROUTER_INTERNAL_ADDR=" + internalAddr, "DIRECTORY_DATABASE_URL=" + s.DirURL}, o.Env["router"]...)}
		if err := s.Router.Start(); err != nil {
			return nil, err
		}
		err = s.Router.WaitLive(ctx, 60*time.Second)
		if err == nil {
			break
		}
		select {
		case <-s.Router.Done():
			if try < 3 {
				continue
			}
		default:
		}
		return nil, err
	}
	for _, p := range s.procs() {
		if s.isPreview(p) {
			continue
		}
		if err := p.WaitLive(ctx, 60*time.Second); err != nil {
			return nil, err
		}
	}
	for _, c := range o.Cells {
		if p := s.Previews[c]; p != nil {
			if err := p.waitAnswering(ctx, 60*time.Second); err != nil {
				return nil, err
			}
		}
	}
	// A renderer is live at once, but takes work only after its launch probe (a real sandboxed
	// browser start) passed; /readyz says so and needs the service credential.
	if credentialFile != "" {
		b, err := os.ReadFile(credentialFile)
		if err != nil {
			return nil, err
		}
		for _, c := range o.Cells {
			for _, r := range s.Renderers[c] {
				if err := r.waitReady(ctx, strings.TrimSpace(string(b)), 90*time.Second); err != nil {
					return nil, err
				}
			}
		}
	}
	ok = true
	return s, nil
}

// BlobURL is a cell's blob store.
func (s *Stack) BlobURL(cell string) string {
	dir, err := filepath.Abs(filepath.Join(s.opts.Dir, "blobs", cell))
	if err != nil {
		dir = filepath.Join(s.opts.Dir, "blobs", cell)
	}
	return "file://" + dir
}

// writeCellsFile writes cellctl's cells file.
func (s *Stack) writeCellsFile() error {
	m := map[string]map[string]string{}
	for _, c := range s.opts.Cells {
		m[c] = map[string]string{"database_url": s.CellDBURL[c], "blob_url": s.BlobURL(c)}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	s.CellsFile = filepath.Join(s.opts.Dir, "cellctl-cells.json")
	return os.WriteFile(s.CellsFile, b, 0o600)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

func (s *Stack) procs() []*Proc {
	var out []*Proc
	if s.Router != nil {
		out = append(out, s.Router)
	}
	for _, c := range s.opts.Cells {
		if p := s.Cells[c]; p != nil {
			out = append(out, p)
		}
	}
	for _, c := range s.opts.Cells {
		if p := s.Previews[c]; p != nil {
			out = append(out, p)
		}
	}
	for _, c := range s.opts.Cells {
		out = append(out, s.Renderers[c]...)
	}
	return append(append(out, s.Replicas...), s.spares...)
}

func (s *Stack) isPreview(p *Proc) bool {
	for _, q := range s.Previews {
		if q == p {
			return true
		}
	}
	return false
}

// Stop stops the router, the cells, the preview hosts, the renderers and the database, in that
// order.
func (s *Stack) Stop() {
	for _, p := range s.procs() {
		p.Stop()
	}
	var renderers []*Proc
	for _, rs := range s.Renderers {
		renderers = append(renderers, rs...)
	}
	for _, r := range append(renderers, s.spares...) {
		_ = os.RemoveAll(s.tempRoot(r.Name)) // the renderer empties it, but leaves the folder
	}
	if s.Directory != nil {
		s.Directory.Close()
	}
	if s.PG != nil {
		_ = s.PG.Stop()
	}
}

// LogFiles lists the log file of each process.
func (s *Stack) LogFiles() []string {
	var out []string
	for _, p := range s.procs() {
		out = append(out, p.log)
	}
	return out
}

// Start starts (or restarts) the process; its output goes to its log file.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = withSpanFile(append(os.Environ(), p.env...), p.log)
	cmd.Stdout, cmd.Stderr = f, f
	g, err := proc.Start(cmd)
	f.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.proc = g
	return nil
}

// withSpanFile gives a process whose environment asks for the file span exporter
// (OTEL_TRACES_EXPORTER holding "file", e.g. `OTEL_TRACES_EXPORTER=file make run`) and names no
// TRACES_FILE one of its own next to its log: <name>.spans.jsonl (shared/tracing).
func withSpanFile(env []string, logPath string) []string {
	exporters, hasFile := "", false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "OTEL_TRACES_EXPORTER="); ok {
			exporters = v
		}
		if strings.HasPrefix(kv, "TRACES_FILE=") {
			hasFile = true
		}
	}
	for e := range strings.SplitSeq(exporters, ",") {
		if strings.TrimSpace(e) == "file" && !hasFile {
			return append(env, "TRACES_FILE="+SpanFile(logPath))
		}
	}
	return env
}

// SpanFile is where a process whose log is logPath writes its spans (withSpanFile).
func SpanFile(logPath string) string { return strings.TrimSuffix(logPath, ".log") + ".spans.jsonl" }

// SpanFiles lists the span file of each process (most exist only with the file exporter on).
func (s *Stack) SpanFiles() map[string]string {
	out := map[string]string{}
	for _, p := range s.procs() {
		out[p.Name] = SpanFile(p.log)
	}
	return out
}

// LogFile is the process's log file.
func (p *Proc) LogFile() string { return p.log }

// Stop sends SIGTERM and waits (SIGKILL to the process group after 15 s). A paused process is
// resumed first.
func (p *Proc) Stop() {
	p.mu.Lock()
	g := p.proc
	p.mu.Unlock()
	if g != nil {
		_ = g.Stop(syscall.SIGTERM, 15*time.Second)
	}
}

// Kill sends SIGKILL to the process group (kill -9: no shutdown of any kind) and waits for it.
func (p *Proc) Kill() {
	p.mu.Lock()
	g := p.proc
	p.mu.Unlock()
	if g != nil {
		_ = g.Stop(syscall.SIGKILL, 15*time.Second)
	}
}

// Pause freezes (SIGSTOP) or thaws (SIGCONT) the process.
func (p *Proc) Pause(stop bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return fmt.Errorf("%s is not started", p.Name)
	}
	return p.proc.Pause(stop)
}

// Done is closed when the process exits (nil before Start).
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return nil
	}
	return p.proc.Done()
}

// waitReady polls /readyz with the service credential until it answers 200.
func (p *Proc) waitReady(ctx context.Context, credential string, limit time.Duration) error {
	return p.poll(ctx, limit, "/readyz", credential, func(s int) bool { return s == http.StatusOK }, "ready (launch probe)")
}

// WaitLive polls /livez until it answers 200.
func (p *Proc) WaitLive(ctx context.Context, limit time.Duration) error {
	return p.poll(ctx, limit, "/livez", "", func(s int) bool { return s == http.StatusOK }, "live")
}

// poll asks path (with credential as a bearer token when set) every 50 ms until ok accepts the
// status, the process exits, or limit passes; the error names the process, what was awaited,
// the last answer and the log.
func (p *Proc) poll(ctx context.Context, limit time.Duration, path, credential string, ok func(int) bool, what string) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	c := &http.Client{Timeout: time.Second}
	err := loop.Until(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		select {
		case <-p.Done():
			return loop.Stop(fmt.Errorf("exited at start; its log ends: %s", logTail(p.log, 1500)))
		default:
		}
		base := p.URL
		if p.OpsURL != "" { // the router's operator endpoints are on its internal listener
			base = p.OpsURL
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if credential != "" {
			req.Header.Set("Authorization", "Bearer "+credential)
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if !ok(resp.StatusCode) {
			return fmt.Errorf("%s answered %d", path, resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s not %s within %s: %v; see %s", p.Name, what, limit, err, p.log)
	}
	return nil
}

// logTail is the last n bytes of a log file, for an error that says why a process is gone.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return strings.TrimSpace(string(b))
}
