package render

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"slidecells/shared/config"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// Worker is one executor node from RENDER_WORKERS_CONFIG: its identity and trusted address.
// The epoch is learnt from the worker (it changes at every start).
type Worker struct {
	ID  string `json:"worker_id"`
	URL string `json:"url"`
}

// Config is the coordinator's static configuration (render-execution.md, "Configuration").
type Config struct {
	// Workers are the trusted executor addresses (RENDER_WORKERS_CONFIG).
	Workers []Worker
	// Credential is the renderers' service credential (RENDER_SERVICE_CREDENTIAL_FILE).
	Credential string
	// WorkersCA, when set, holds the only CAs trusted for the renderers' TLS
	// (RENDER_WORKERS_CA_FILE, a PEM bundle); every worker URL must then be https. Unset, the
	// system roots are trusted (and http workers are allowed: `make run` on loopback).
	WorkersCA *x509.CertPool
	// Profile is the environment the release requires (RENDER_PROFILE_MANIFEST); a worker whose
	// environment digest differs is never dispatched to.
	Profile       rc.RenderProfile
	ProfileDigest string
	// GlobalConcurrency bounds active or unconfirmed-release executions of the cell
	// (RENDER_GLOBAL_CONCURRENCY); WorkspaceConcurrency those of one workspace
	// (RENDER_WORKSPACE_CONCURRENCY).
	GlobalConcurrency    int
	WorkspaceConcurrency int
	// QueueSize and WorkspaceQueueSize bound waiting requests (RENDER_QUEUE_SIZE,
	// RENDER_WORKSPACE_QUEUE_SIZE); beyond them a new request gets RENDER_QUEUE_FULL at once.
	QueueSize          int
	WorkspaceQueueSize int
	// RequestTimeout is the render stage's total budget (RENDER_REQUEST_TIMEOUT_SECONDS, 120).
	RequestTimeout time.Duration
	// MaxAttempts bounds possibly-accepted executions per request (RENDER_MAX_ATTEMPTS, 3).
	MaxAttempts int
	// NavigationBase is where the renderers' browsers open preview documents
	// (RENDER_RUNTIME_NAVIGATION_BASE_URL); preview access tokens are bound to its origin and
	// the document path below it.
	NavigationBase *url.URL
	// Signer signs admission tickets and preview access tokens (RENDER_TICKET_SIGNING_KEY_FILE).
	Signer *ticket.Signer
	// PromoteAfter is the wait-promotion threshold (RENDER_WAIT_PROMOTION_SECONDS, 10).
	PromoteAfter time.Duration
	// QuarantineCooldown is how long a quarantined renderer epoch stays out of dispatch before
	// a passing probe (capabilities of this release and a ready /readyz, whose launch probe
	// passed) lifts its quarantine (RENDER_QUARANTINE_COOLDOWN_SECONDS, 300; 0 means the
	// default). An operator lifts it at once with cellctl renderers unquarantine.
	QuarantineCooldown time.Duration
}

// DefaultQuarantineCooldown is RENDER_QUARANTINE_COOLDOWN_SECONDS' default.
const DefaultQuarantineCooldown = 5 * time.Minute

// Replaced are configuration names of earlier designs: present, they stop start-up with their
// replacement (render-execution.md, Errors rule 5). The cell runs no browser.
var Replaced = map[string]string{
	"CELL_RENDERER_URLS":        "RENDER_WORKERS_CONFIG",
	"CHROME_PATH":               "(none: the cell runs no browser; renderers are RENDER_WORKERS_CONFIG)",
	"CHROME_BIN":                "(none: the cell runs no browser; renderers are RENDER_WORKERS_CONFIG)",
	"CHROMIUM_PATH":             "(none: the cell runs no browser; renderers are RENDER_WORKERS_CONFIG)",
	"PUPPETEER_EXECUTABLE_PATH": "(none: the cell runs no browser; renderers are RENDER_WORKERS_CONFIG)",
	"PLAYWRIGHT_BROWSERS_PATH":  "(none: the cell runs no browser; renderers are RENDER_WORKERS_CONFIG)",
	"SCREENSHOT_BROWSER_PATH":   "(none: the cell runs no browser; renderers are RENDER_WORKERS_CONFIG)",
	"RENDER_LOCAL_FALLBACK":     "(none: there is no local fallback)",
	"RENDER_EXECUTOR_MODE":      "(none: one executor protocol for every environment)",
	"RENDER_BROWSER_REUSE":      "(none: there is no browser reuse)",
	"RENDER_SCREENSHOT_TIMEOUT": "RENDER_REQUEST_TIMEOUT_SECONDS",
	"RENDER_PREVIEW_BASE_URL":   "RENDER_RUNTIME_NAVIGATION_BASE_URL (on the cell; renderers keep RENDER_PREVIEW_BASE_URL)",
}

// Load reads the coordinator's configuration. It returns nil (and no error) when
// RENDER_WORKERS_CONFIG is unset: the cell then has no render capacity, says so in its health,
// and answers render work as unavailable. Every bad value is reported through l.
func Load(l *config.Loader, getenv func(string) string, signer *ticket.Signer) *Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	var old []string
	for name, repl := range Replaced {
		if strings.TrimSpace(getenv(name)) != "" {
			old = append(old, name+" → "+repl)
		}
	}
	slices.Sort(old)
	for _, o := range old {
		l.Fail(strings.SplitN(o, " ", 2)[0], "is no longer read; replace it: %s", o)
	}
	raw := l.String("RENDER_WORKERS_CONFIG", "", false)
	if raw == "" {
		return nil
	}
	c := &Config{
		GlobalConcurrency:    l.Int("RENDER_GLOBAL_CONCURRENCY", 0, 0, 10000),
		WorkspaceConcurrency: l.Int("RENDER_WORKSPACE_CONCURRENCY", 0, 0, 10000),
		QueueSize:            l.Int("RENDER_QUEUE_SIZE", 1000, 1, 1_000_000),
		WorkspaceQueueSize:   l.Int("RENDER_WORKSPACE_QUEUE_SIZE", 100, 1, 1_000_000),
		RequestTimeout:       l.Seconds("RENDER_REQUEST_TIMEOUT_SECONDS", 120*time.Second, 3600),
		MaxAttempts:          l.Int("RENDER_MAX_ATTEMPTS", 3, 1, 10),
		PromoteAfter:         l.Seconds("RENDER_WAIT_PROMOTION_SECONDS", 10*time.Second, 3600),
		QuarantineCooldown:   l.Seconds("RENDER_QUARANTINE_COOLDOWN_SECONDS", DefaultQuarantineCooldown, 86400),
		Signer:               signer,
	}
	workers, err := ParseWorkers(raw)
	if err != nil {
		l.Fail("RENDER_WORKERS_CONFIG", "%v", err)
	}
	c.Workers = workers
	if c.GlobalConcurrency == 0 {
		c.GlobalConcurrency = len(workers)
	}
	if c.WorkspaceConcurrency == 0 {
		c.WorkspaceConcurrency = max(1, (len(workers)+1)/2)
	}
	if c.WorkersCA = l.CAFile("RENDER_WORKERS_CA_FILE"); c.WorkersCA != nil {
		for _, w := range workers {
			if !strings.HasPrefix(w.URL, "https://") {
				l.Fail("RENDER_WORKERS_CONFIG", "worker %s is not https although RENDER_WORKERS_CA_FILE is set: its service credential would cross the network in clear", w.ID)
			}
		}
	}
	if creds := l.Credentials("RENDER_SERVICE_CREDENTIAL_FILE", true); creds != nil {
		c.Credential = creds[0] // the current one; a second line is the next during a rotation
	}
	if p := l.String("RENDER_PROFILE_MANIFEST", "", true); p != "" {
		prof, d, err := ReadManifest(p)
		if err != nil {
			l.Fail("RENDER_PROFILE_MANIFEST", "%v", err)
		}
		c.Profile, c.ProfileDigest = prof, d
	}
	if nav := l.String("RENDER_RUNTIME_NAVIGATION_BASE_URL", "", true); nav != "" {
		u, err := url.Parse(nav)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			l.Fail("RENDER_RUNTIME_NAVIGATION_BASE_URL", "must be an http(s) URL without credentials, query or fragment")
		} else {
			u.Path = strings.TrimSuffix(u.Path, "/")
			c.NavigationBase = u
		}
	}
	if signer == nil {
		l.Fail("RENDER_TICKET_SIGNING_KEY_FILE", "is required with RENDER_WORKERS_CONFIG: the coordinator signs admission tickets and preview access")
	}
	return c
}

// ParseWorkers reads RENDER_WORKERS_CONFIG: a JSON array of {"worker_id","url"}, inline or as
// the path of a file holding it.
func ParseWorkers(raw string) ([]Worker, error) {
	data := []byte(raw)
	if !strings.HasPrefix(strings.TrimSpace(raw), "[") {
		b, err := os.ReadFile(raw)
		if err != nil {
			return nil, fmt.Errorf("neither a JSON array nor a readable file")
		}
		data = b
	}
	var ws []Worker
	if err := json.Unmarshal(data, &ws); err != nil {
		return nil, fmt.Errorf("not a JSON array of {\"worker_id\",\"url\"}: %v", err)
	}
	if len(ws) == 0 || len(ws) > 1000 {
		return nil, fmt.Errorf("needs 1 to 1000 workers")
	}
	seen := map[string]bool{}
	for i, w := range ws {
		u, err := url.Parse(w.URL)
		if !rc.ValidID(w.ID) || seen[w.ID] || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("worker %d needs a unique worker_id of letters, digits, '_' and '-' and an http(s) url without credentials", i)
		}
		seen[w.ID] = true
		ws[i].URL = strings.TrimSuffix(w.URL, "/")
	}
	return ws, nil
}

// ReadManifest reads a render profile manifest (what `renderer profile` prints) and returns it
// with its digest, the environment digest every worker must report.
func ReadManifest(path string) (rc.RenderProfile, string, error) {
	var p rc.RenderProfile
	b, err := os.ReadFile(path)
	if err != nil {
		return p, "", err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, "", fmt.Errorf("not a render profile: %v", err)
	}
	if p.ContractVersion != rc.ContractVersion || p.ReadinessProtocol != rc.ReadinessProtocol || p.ResultSchema != rc.ResultSchemaVersion {
		return p, "", fmt.Errorf("profile declares %s/%s/%s; this release speaks %s/%s/%s",
			p.ContractVersion, p.ReadinessProtocol, p.ResultSchema, rc.ContractVersion, rc.ReadinessProtocol, rc.ResultSchemaVersion)
	}
	d, err := p.Digest()
	return p, d, err
}
