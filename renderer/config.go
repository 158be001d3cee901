package renderer

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"slidecells/renderer/chromium"
	"slidecells/renderer/supervisor"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// Defaults of the settings.
const (
	DefaultListenAddr       = "127.0.0.1:0"
	DefaultTempRoot         = "/tmp/renderer"
	DefaultCleanupGrace     = 5 * time.Second
	DefaultResultTTL        = 600 * time.Second
	DefaultMarkRetention    = 30 * time.Minute
	DefaultChildUser        = "nobody"
	DefaultMinFreeDiskBytes = 512 << 20
	// maxTempRootLen keeps Chromium's socket paths inside the attempt
	// directory under the 108-byte limit of Unix socket addresses.
	maxTempRootLen = 40
)

// Config is the renderer's static configuration. Invalid configuration fails
// start-up; nothing is fixed up at run time.
type Config struct {
	// WorkerID is the instance identity (RENDER_WORKER_ID). The epoch is
	// generated at each start.
	WorkerID string
	// ListenAddr is host:port (RENDER_LISTEN_ADDR).
	ListenAddr string
	// TicketKeys verify admission tickets (RENDER_TICKET_PUBLIC_KEYS).
	TicketKeys *ticket.KeySet
	// PreviewBaseURL is the navigation base of preview documents
	// (RENDER_PREVIEW_BASE_URL); documents are PreviewPath below it.
	PreviewBaseURL *url.URL
	// AssetOrigins are further origins the browser may load from: host
	// static assets, platform assets (RENDER_ASSET_ORIGINS).
	AssetOrigins []string
	// BrowserPath is the Chromium binary (RENDER_BROWSER_PATH).
	BrowserPath string
	// ChildCommand starts the execution child: program and arguments.
	// The binary wires it (the renderer re-executes itself as "child").
	ChildCommand []string
	// ChildExtraEnv is added to the child's allowlisted environment.
	ChildExtraEnv []string
	// ChildCredential runs the child under an unprivileged user; set
	// when the renderer runs as root (RENDER_CHILD_USER).
	ChildCredential *syscall.Credential
	ChildUser       string
	// TempRoot holds attempt directories and stored artifacts
	// (RENDER_TEMP_ROOT).
	TempRoot string
	// CleanupGrace is how long a child may take to close after it was
	// asked to (RENDER_CLEANUP_GRACE_SECONDS).
	CleanupGrace time.Duration
	// ResultTTL keeps terminal artifacts (RENDER_RESULT_TTL_SECONDS).
	ResultTTL time.Duration
	// MarkRetention keeps receipts and cancel marks after they stop
	// mattering, and bounds admission ticket lifetimes
	// (RENDER_MARK_RETENTION_SECONDS).
	MarkRetention time.Duration
	// Limits are the per-process limits of the child.
	Limits supervisor.Limits
	// MinFreeDiskBytes: below it the renderer refuses takeover
	// (RENDER_MIN_FREE_DISK_MB).
	MinFreeDiskBytes uint64
	// ServiceToken, when set, is required as a bearer token on the
	// control API (RENDER_SERVICE_CREDENTIAL_FILE).
	ServiceToken string
	// ManifestPath is the environment manifest the release built
	// (RENDER_PROFILE_MANIFEST); optional.
	ManifestPath string
	// BrowserLog forwards the browser's output to the logs
	// (RENDER_BROWSER_LOG=1); for diagnosing launch problems only.
	BrowserLog bool
	// Now is the clock for tickets and retention; nil means time.Now.
	Now func() time.Time
}

// legacyVariables are browser settings of earlier systems. Their presence
// fails start-up so that a deployment does not silently run with a browser
// it did not mean.
var legacyVariables = map[string]string{
	"CHROME_PATH":                         "RENDER_BROWSER_PATH",
	"CHROME_BIN":                          "RENDER_BROWSER_PATH",
	"CHROMIUM_PATH":                       "RENDER_BROWSER_PATH",
	"CHROMIUM_BIN":                        "RENDER_BROWSER_PATH",
	"PUPPETEER_EXECUTABLE_PATH":           "RENDER_BROWSER_PATH",
	"PUPPETEER_SKIP_CHROMIUM_DOWNLOAD":    "(none: the renderer never downloads a browser)",
	"PLAYWRIGHT_CHROMIUM_EXECUTABLE_PATH": "RENDER_BROWSER_PATH",
	"PLAYWRIGHT_BROWSERS_PATH":            "RENDER_BROWSER_PATH",
	"SCREENSHOT_BROWSER_PATH":             "RENDER_BROWSER_PATH",
	"SCREENSHOT_BROWSER_WS_ENDPOINT":      "(none: every attempt launches its own browser)",
	"BROWSER_WS_ENDPOINT":                 "(none: every attempt launches its own browser)",
	"CHROMEDP_NO_SANDBOX":                 "(none: the sandbox is always on; see RENDER_CHILD_USER)",
	"RENDER_BROWSER_REUSE":                "(none: there is no browser reuse)",
	"RENDER_LOCAL_FALLBACK":               "(none: there is no local fallback)",
	"RENDER_EXECUTOR_MODE":                "(none: one executor protocol for every environment)",
	"PUPPETEER_CHROMIUM_REVISION":         "(none)",
	"PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD":    "(none)",
	"SCREENSHOT_BROWSER_ARGS":             "(none: launch flags are fixed by the render profile)",
	"CHROME_FLAGS":                        "(none: launch flags are fixed by the render profile)",
	"CHROMIUM_FLAGS":                      "(none: launch flags are fixed by the render profile)",
	"RENDER_BROWSER_FLAGS":                "(none: launch flags are fixed by the render profile)",
	"RENDER_CHROME_PATH":                  "RENDER_BROWSER_PATH",
	"RENDER_SCREENSHOT_BROWSER_PATH":      "RENDER_BROWSER_PATH",
	"RENDER_PUPPETEER_EXECUTABLE_PATH":    "RENDER_BROWSER_PATH",
	"RENDER_PLAYWRIGHT_EXECUTABLE_PATH":   "RENDER_BROWSER_PATH",
	"RENDER_CHROMIUM_PATH":                "RENDER_BROWSER_PATH",
	"RENDER_HEADLESS_SHELL_PATH":          "RENDER_BROWSER_PATH",
	"HEADLESS_SHELL_PATH":                 "RENDER_BROWSER_PATH",
	"RENDER_SCREENSHOT_TIMEOUT":           "(none: the coordinator's deadline_at and remaining_budget_ms)",
}

// LoadConfig reads the configuration from the environment (getenv is
// os.Getenv in production). Every error names the setting.
func LoadConfig(getenv func(string) string, environ []string) (Config, error) {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	var legacy []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if repl, ok := legacyVariables[k]; ok {
			legacy = append(legacy, k+" → "+repl)
		}
	}
	if len(legacy) > 0 {
		sort.Strings(legacy)
		errs = append(errs, fmt.Errorf("old browser variables are set; remove them (replacements: %s)", strings.Join(legacy, "; ")))
	}
	c := Config{
		WorkerID:         getenv("RENDER_WORKER_ID"),
		ListenAddr:       orDefault(getenv("RENDER_LISTEN_ADDR"), DefaultListenAddr),
		BrowserPath:      orDefault(getenv("RENDER_BROWSER_PATH"), chromium.DefaultBrowserPath),
		TempRoot:         orDefault(getenv("RENDER_TEMP_ROOT"), DefaultTempRoot),
		ManifestPath:     getenv("RENDER_PROFILE_MANIFEST"),
		BrowserLog:       getenv("RENDER_BROWSER_LOG") == "1",
		MinFreeDiskBytes: DefaultMinFreeDiskBytes,
	}
	if !rc.ValidID(c.WorkerID) {
		bad("RENDER_WORKER_ID", "required: 1 to %d characters of letters, digits, '_' and '-'", rc.MaxIDLength)
	}
	if ks, err := ticket.ParseKeySet(getenv("RENDER_TICKET_PUBLIC_KEYS")); err != nil {
		bad("RENDER_TICKET_PUBLIC_KEYS", "required, as kid:base64 public keys separated by commas: %v", err)
	} else {
		c.TicketKeys = ks
	}
	if u, err := parseBase(getenv("RENDER_PREVIEW_BASE_URL")); err != nil {
		bad("RENDER_PREVIEW_BASE_URL", "%v", err)
	} else {
		c.PreviewBaseURL = u
	}
	for _, o := range splitList(getenv("RENDER_ASSET_ORIGINS")) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			bad("RENDER_ASSET_ORIGINS", "%q is not scheme://host[:port]", o)
			continue
		}
		c.AssetOrigins = append(c.AssetOrigins, u.Scheme+"://"+u.Host)
	}
	if st, err := os.Stat(c.BrowserPath); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		bad("RENDER_BROWSER_PATH", "%s is not an executable file (install Debian's chromium package)", c.BrowserPath)
	}
	if !filepath.IsAbs(c.TempRoot) || len(c.TempRoot) > maxTempRootLen {
		bad("RENDER_TEMP_ROOT", "must be an absolute path of at most %d characters (browser socket paths live below it)", maxTempRootLen)
	}
	var err error
	if c.CleanupGrace, err = seconds(getenv("RENDER_CLEANUP_GRACE_SECONDS"), DefaultCleanupGrace); err != nil {
		bad("RENDER_CLEANUP_GRACE_SECONDS", "%v", err)
	}
	if c.ResultTTL, err = seconds(getenv("RENDER_RESULT_TTL_SECONDS"), DefaultResultTTL); err != nil {
		bad("RENDER_RESULT_TTL_SECONDS", "%v", err)
	}
	if c.MarkRetention, err = seconds(getenv("RENDER_MARK_RETENTION_SECONDS"), DefaultMarkRetention); err != nil {
		bad("RENDER_MARK_RETENTION_SECONDS", "%v", err)
	}
	mb := func(name string, def uint64) uint64 {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			bad(name, "%q is not a positive whole number", v)
			return def
		}
		return n
	}
	c.Limits = supervisor.Limits{
		DataBytes: mb("RENDER_CHILD_MEMORY_MB", supervisor.DefaultDataBytes>>20) << 20,
		Processes: mb("RENDER_CHILD_MAX_PROCESSES", supervisor.DefaultProcesses),
		FileBytes: mb("RENDER_CHILD_MAX_FILE_MB", supervisor.DefaultFileBytes>>20) << 20,
		OpenFiles: supervisor.DefaultOpenFiles,
	}
	c.MinFreeDiskBytes = mb("RENDER_MIN_FREE_DISK_MB", DefaultMinFreeDiskBytes>>20) << 20
	if c.Limits.FileBytes < rc.MaxPNGBytes*2 {
		bad("RENDER_CHILD_MAX_FILE_MB", "must allow at least %d MiB (the browser buffers a full capture)", rc.MaxPNGBytes*2>>20)
	}
	if p := getenv("RENDER_SERVICE_CREDENTIAL_FILE"); p != "" {
		b, err := os.ReadFile(p)
		tok := strings.TrimSpace(string(b))
		switch {
		case err != nil:
			bad("RENDER_SERVICE_CREDENTIAL_FILE", "unreadable: %v", err)
		case len(tok) < 16:
			bad("RENDER_SERVICE_CREDENTIAL_FILE", "the credential must be at least 16 characters")
		default:
			c.ServiceToken = tok
		}
	}
	childUser := getenv("RENDER_CHILD_USER")
	if os.Geteuid() == 0 {
		if childUser == "" {
			childUser = DefaultChildUser
		}
		cred, err := lookupUser(childUser)
		if err != nil {
			bad("RENDER_CHILD_USER", "%v", err)
		}
		c.ChildCredential, c.ChildUser = cred, childUser
	} else if childUser != "" {
		if u, err := user.Current(); err != nil || u.Username != childUser {
			bad("RENDER_CHILD_USER", "switching to %q needs root; unset it to run the child as the current user", childUser)
		}
	}
	if c.ChildUser == "" {
		if u, err := user.Current(); err == nil {
			c.ChildUser = u.Username
		}
	}
	return c, errors.Join(errs...)
}

func lookupUser(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("user %q not found", name)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has no numeric IDs", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("the child user must not be root: Chromium's sandbox needs an unprivileged user")
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func parseBase(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("required: the navigation base URL of preview documents, e.g. http://preview.cell-a.svc:8080/preview/")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL without credentials, query or fragment", s)
	}
	return u, nil
}

func seconds(v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 86400 {
		return 0, fmt.Errorf("%q is not a number of seconds between 0 and 86400", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// allowedOrigins are the origins the browser may contact.
func (c *Config) allowedOrigins() []string {
	out := []string{c.PreviewBaseURL.Scheme + "://" + c.PreviewBaseURL.Host}
	return append(out, c.AssetOrigins...)
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
