package renderer

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"slidecells/renderer/chromium"
	"slidecells/renderer/egress"
	"slidecells/renderer/supervisor"
	"slidecells/shared/config"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// Defaults of the settings.
const (
	DefaultListenAddr   = "127.0.0.1:0"
	DefaultTempRoot     = "/tmp/renderer"
	DefaultCleanupGrace = 5 * time.Second
	// DefaultContentReady is the content budget: how long a committed preview document may
	// take to become ready before the page itself is at fault (well under the render stage's
	// 120 s budget and the 20 s a validation waits).
	DefaultContentReady     = 10 * time.Second
	DefaultResultTTL        = 600 * time.Second
	DefaultMarkRetention    = 30 * time.Minute
	DefaultChildTempBytes   = 512 << 20
	DefaultLaunchProbe      = 5 * time.Minute
	DefaultMinFreeDiskBytes = 512 << 20
	// DefaultMaxReceipts and DefaultMaxCancelMarks bound what the
	// control process remembers (a receipt is about 2 KiB, a mark under
	// 100 bytes); when full, new attempts and new marks are refused with
	// 503 RENDER_SERVICE_UNAVAILABLE instead of forgetting anything.
	DefaultMaxReceipts    = 4096
	DefaultMaxCancelMarks = 16384
	// maxTempRootLen keeps Chromium's socket paths inside the attempt
	// directory under the 108-byte limit of Unix socket addresses.
	maxTempRootLen = 40
)

// The standby's age limit.
const (
	// DefaultStandbyMaxAge is how long a ready standby may wait for an
	// attempt before it is recycled (RENDER_STANDBY_MAX_AGE_SECONDS).
	DefaultStandbyMaxAge = 5 * time.Minute
	// minStandbyMaxAge keeps recycling from turning into a start loop.
	minStandbyMaxAge = 10 * time.Second
	// DefaultStandbyCPUs caps a standby's CPU while it is prepared
	// (RENDER_STANDBY_CPUS): a quarter core, at the lowest weight, so the
	// next browser's launch does not slow an attempt that runs meanwhile.
	DefaultStandbyCPUs = 0.25
	// minStandbyCPUs: below it a browser launch takes tens of seconds.
	minStandbyCPUs = 0.05
)

// Config is the renderer's static configuration. Invalid configuration fails
// start-up; nothing is fixed up at run time.
type Config struct {
	// WorkerID is the instance identity (RENDER_WORKER_ID). The epoch is
	// generated at each start.
	WorkerID string
	// ListenAddr is host:port (RENDER_LISTEN_ADDR).
	ListenAddr string
	// MetricsAddr, when set, is a second listener (host:port, RENDER_METRICS_ADDR) that serves
	// GET /metrics alone, without the service credential, for the monitoring network; the
	// control API and its credentialed /metrics stay on ListenAddr.
	MetricsAddr string
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
	// ChildUIDs is the range of unprivileged user IDs attempts run as, one
	// of its own per attempt (RENDER_CHILD_UID_RANGE,
	// RENDER_CHILD_UID_LOCK_DIR).
	ChildUIDs supervisor.UIDPool
	// CgroupParent is the cgroup (relative to each hierarchy's root)
	// under which the renderer creates its own group; empty means the
	// control process's own cgroup (RENDER_CGROUP_PARENT).
	CgroupParent string
	// CgroupName is the renderer's group below CgroupParent; everything
	// in it belongs to this instance (RENDER_CGROUP_NAME). Default
	// "slidecells-renderer-" + WorkerID: two renderers of one worker ID on
	// one host (two deployments side by side) must be given different
	// names, or each kills the other's attempts at start.
	CgroupName string
	// ChildCgroup bounds each attempt as a whole: memory, processes, CPU
	// (RENDER_CHILD_MEMORY_MB, RENDER_CHILD_MAX_PROCESSES,
	// RENDER_CHILD_CPUS).
	ChildCgroup supervisor.CgroupLimits
	// ChildTempBytes bounds the attempt's private temp file system
	// (RENDER_CHILD_TEMP_DISK_MB).
	ChildTempBytes uint64
	// Egress bounds each attempt's egress path: bytes and open
	// connections (RENDER_EGRESS_MAX_MB, RENDER_EGRESS_MAX_CONNECTIONS).
	Egress egress.Limits
	// LaunchProbeInterval is how often the launch probe runs while the
	// slot is idle (RENDER_LAUNCH_PROBE_INTERVAL_SECONDS).
	LaunchProbeInterval time.Duration
	// StandbyMaxAge: a standby (the next attempt's environment and
	// browser, prepared while the slot is idle) older than this is
	// recycled (RENDER_STANDBY_MAX_AGE_SECONDS).
	StandbyMaxAge time.Duration
	// StandbyCPUs caps a standby's CPU, in cores, at the lowest CPU
	// weight, while it waits for an attempt; the attempt that takes it
	// raises it to ChildCgroup.CPUs at the default weight. Zero: a
	// standby has the attempt's CPU from the start (RENDER_STANDBY_CPUS).
	StandbyCPUs float64
	// standbyCheck is how often a standby's child checks its idle
	// browser; zero means chromium.DefaultStandbyCheck (tests shorten it).
	standbyCheck time.Duration
	// noLaunchProbe prepares no standby, and with it runs no launch
	// probe: every attempt starts its environment and browser when it is
	// admitted (tests of other behaviour only; there is no setting for
	// it).
	noLaunchProbe bool
	// beforeStart, when set (tests), runs before every child start,
	// afterStart after it; beforeRun before an accepted attempt's runner
	// looks at its stop mark.
	beforeStart, afterStart, beforeRun func()
	// receiptWaiting, when set (tests), runs each time a receipt long-poll starts waiting for
	// its attempt's state to change, after it took the change channel.
	receiptWaiting func(attemptID string)
	// noBrowserGate switches the in-browser network layers off (tests
	// that prove the kernel boundary alone holds; no setting for it).
	noBrowserGate bool
	// TempRoot holds attempt directories and stored artifacts
	// (RENDER_TEMP_ROOT).
	TempRoot string
	// ContentReady is the content budget (RENDER_CONTENT_READY_SECONDS): a page whose
	// committed document does not become ready within it (an endless loop, a mount that never
	// ends) fails with RENDER_CONTENT_ERROR, final for that input, instead of holding its slot
	// to the render deadline.
	ContentReady time.Duration
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
	// ServiceTokens are the accepted service credentials of the control
	// API (RENDER_SERVICE_CREDENTIAL_FILE: one per line, at most two, so
	// a rotation can accept the old and the new one at once). Required.
	ServiceTokens []string
	// TLSCertFile and TLSKeyFile, when both set, make the control API
	// serve TLS (RENDER_TLS_CERT_FILE, RENDER_TLS_KEY_FILE).
	TLSCertFile, TLSKeyFile string
	// MaxReceipts and MaxCancelMarks bound the receipts and cancel marks
	// kept (RENDER_MAX_RECEIPTS, RENDER_MAX_CANCEL_MARKS).
	MaxReceipts, MaxCancelMarks int
	// ManifestPath is the environment manifest the release built
	// (RENDER_PROFILE_MANIFEST); optional.
	ManifestPath string
	// BrowserLog forwards the browser's output to the logs
	// (RENDER_BROWSER_LOG=1); for diagnosing launch problems only.
	BrowserLog bool
	// HidePaths are files the execution child must not see (service
	// credential, TLS key); its mount namespace covers them.
	HidePaths []string
	// Now is the clock for tickets and retention; nil means time.Now.
	Now func() time.Time
}

// cgroupName is what RENDER_CGROUP_NAME may be: one path element.
var cgroupName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$`)

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
	"CHROMEDP_NO_SANDBOX":                 "(none: the sandbox is always on; every attempt runs as a user of its own, see RENDER_CHILD_UID_RANGE)",
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
	l := &config.Loader{Getenv: getenv}
	bad := l.Fail
	get := func(name string) string { return l.String(name, "", false) }
	checkLegacy(l, environ)
	c := Config{
		WorkerID:         get("RENDER_WORKER_ID"),
		ListenAddr:       l.Addr("RENDER_LISTEN_ADDR", DefaultListenAddr, false),
		MetricsAddr:      l.Addr("RENDER_METRICS_ADDR", "", false),
		BrowserPath:      l.String("RENDER_BROWSER_PATH", chromium.DefaultBrowserPath, false),
		TempRoot:         l.String("RENDER_TEMP_ROOT", DefaultTempRoot, false),
		ManifestPath:     get("RENDER_PROFILE_MANIFEST"),
		BrowserLog:       get("RENDER_BROWSER_LOG") == "1",
		MinFreeDiskBytes: DefaultMinFreeDiskBytes,
	}
	if !rc.ValidID(c.WorkerID) {
		bad("RENDER_WORKER_ID", "required: 1 to %d characters of letters, digits, '_' and '-'", rc.MaxIDLength)
	}
	if ks, err := ticket.ParseKeySet(get("RENDER_TICKET_PUBLIC_KEYS")); err != nil {
		bad("RENDER_TICKET_PUBLIC_KEYS", "required, as kid:base64 public keys separated by commas: %v", err)
	} else {
		c.TicketKeys = ks
	}
	if u, err := parseBase(get("RENDER_PREVIEW_BASE_URL")); err != nil {
		bad("RENDER_PREVIEW_BASE_URL", "%v", err)
	} else {
		c.PreviewBaseURL = u
	}
	for _, o := range splitList(get("RENDER_ASSET_ORIGINS")) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			bad("RENDER_ASSET_ORIGINS", "%q is not scheme://host[:port]", o)
			continue
		}
		c.AssetOrigins = append(c.AssetOrigins, u.Scheme+"://"+u.Host)
	}
	checkBrowser(l, c.BrowserPath)
	if !filepath.IsAbs(c.TempRoot) || len(c.TempRoot) > maxTempRootLen {
		bad("RENDER_TEMP_ROOT", "must be an absolute path of at most %d characters (browser socket paths live below it)", maxTempRootLen)
	}
	c.CleanupGrace = l.Seconds("RENDER_CLEANUP_GRACE_SECONDS", DefaultCleanupGrace, 86400)
	c.ContentReady = l.Seconds("RENDER_CONTENT_READY_SECONDS", DefaultContentReady, 3600)
	c.ResultTTL = l.Seconds("RENDER_RESULT_TTL_SECONDS", DefaultResultTTL, 86400)
	c.MarkRetention = l.Seconds("RENDER_MARK_RETENTION_SECONDS", DefaultMarkRetention, 86400)
	mb := l.Positive
	c.Limits = supervisor.Limits{FileBytes: mb("RENDER_CHILD_MAX_FILE_MB", supervisor.DefaultFileBytes>>20) << 20}.WithDefaults()
	c.ChildCgroup = supervisor.CgroupLimits{
		MemoryBytes: mb("RENDER_CHILD_MEMORY_MB", supervisor.DefaultMemoryBytes>>20) << 20,
		Processes:   mb("RENDER_CHILD_MAX_PROCESSES", supervisor.DefaultProcesses),
		CPUs:        supervisor.DefaultCPUs,
	}
	if v := get("RENDER_CHILD_CPUS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0.1 || f > 256 {
			bad("RENDER_CHILD_CPUS", "%q is not a number of cores between 0.1 and 256", v)
		} else {
			c.ChildCgroup.CPUs = f
		}
	}
	c.StandbyCPUs = standbyCPUs(l, get("RENDER_STANDBY_CPUS"), c.ChildCgroup.CPUs)
	if c.ChildCgroup.MemoryBytes < 256<<20 {
		bad("RENDER_CHILD_MEMORY_MB", "must be at least 256 (a headless Chromium needs about 200 MiB)")
	}
	if c.ChildCgroup.Processes < 64 {
		bad("RENDER_CHILD_MAX_PROCESSES", "must be at least 64 (Chromium starts a dozen processes of many threads)")
	}
	c.ChildTempBytes = mb("RENDER_CHILD_TEMP_DISK_MB", DefaultChildTempBytes>>20) << 20
	if c.ChildTempBytes < 64<<20 {
		bad("RENDER_CHILD_TEMP_DISK_MB", "must be at least 64 (the browser profile and a capture live there)")
	}
	c.Egress = egress.Limits{
		MaxBytes:       int64(mb("RENDER_EGRESS_MAX_MB", egress.DefaultMaxBytes>>20) << 20),
		MaxConnections: int(mb("RENDER_EGRESS_MAX_CONNECTIONS", egress.DefaultMaxConnections)),
	}
	if c.Egress.MaxBytes < 1<<20 || c.Egress.MaxBytes > 1<<40 {
		bad("RENDER_EGRESS_MAX_MB", "must be between 1 and 1048576")
	}
	if c.Egress.MaxConnections < 8 || c.Egress.MaxConnections > 4096 {
		bad("RENDER_EGRESS_MAX_CONNECTIONS", "must be between 8 and 4096 (Chromium keeps several connections to the proxy)")
	}
	c.LaunchProbeInterval = l.Seconds("RENDER_LAUNCH_PROBE_INTERVAL_SECONDS", DefaultLaunchProbe, 86400)
	c.StandbyMaxAge = l.Seconds("RENDER_STANDBY_MAX_AGE_SECONDS", DefaultStandbyMaxAge, 86400)
	if c.StandbyMaxAge < minStandbyMaxAge {
		bad("RENDER_STANDBY_MAX_AGE_SECONDS", "must be at least %d (a shorter age recycles browsers faster than they start)", int(minStandbyMaxAge/time.Second))
	}
	c.CgroupParent = get("RENDER_CGROUP_PARENT")
	if c.CgroupName = get("RENDER_CGROUP_NAME"); c.CgroupName != "" && !cgroupName.MatchString(c.CgroupName) {
		bad("RENDER_CGROUP_NAME", "%q is not a plain cgroup name (letters, digits, '.', '_', '-'; at most 100)", c.CgroupName)
	}
	c.ChildUIDs = supervisor.UIDPool{First: supervisor.DefaultUIDFirst, Last: supervisor.DefaultUIDLast,
		LockDir: l.String("RENDER_CHILD_UID_LOCK_DIR", supervisor.DefaultUIDLockDir, false)}
	if v := get("RENDER_CHILD_UID_RANGE"); v != "" {
		a, b, ok := strings.Cut(v, "-")
		first, err1 := strconv.ParseUint(a, 10, 32)
		last, err2 := strconv.ParseUint(b, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			bad("RENDER_CHILD_UID_RANGE", "%q is not first-last", v)
		} else {
			c.ChildUIDs.First, c.ChildUIDs.Last = uint32(first), uint32(last)
		}
	}
	if err := c.ChildUIDs.Check(); err != nil {
		bad("RENDER_CHILD_UID_RANGE, RENDER_CHILD_UID_LOCK_DIR", "%v", err)
	}
	c.MinFreeDiskBytes = mb("RENDER_MIN_FREE_DISK_MB", DefaultMinFreeDiskBytes>>20) << 20
	if c.Limits.FileBytes < rc.MaxPNGBytes*2 {
		bad("RENDER_CHILD_MAX_FILE_MB", "must allow at least %d MiB (the browser buffers a full capture)", rc.MaxPNGBytes*2>>20)
	}
	if p := get("RENDER_SERVICE_CREDENTIAL_FILE"); p == "" {
		bad("RENDER_SERVICE_CREDENTIAL_FILE", "required: a file with the control API's service credential (one per line; two during a rotation)")
	} else if c.ServiceTokens = l.Credentials("RENDER_SERVICE_CREDENTIAL_FILE", true); c.ServiceTokens != nil {
		c.HidePaths = append(c.HidePaths, p)
	}
	c.TLSCertFile, c.TLSKeyFile = get("RENDER_TLS_CERT_FILE"), get("RENDER_TLS_KEY_FILE")
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("RENDER_TLS_CERT_FILE", "RENDER_TLS_CERT_FILE and RENDER_TLS_KEY_FILE go together")
	}
	if c.TLSKeyFile != "" {
		c.HidePaths = append(c.HidePaths, c.TLSKeyFile)
	}
	c.MaxReceipts = int(mb("RENDER_MAX_RECEIPTS", DefaultMaxReceipts))
	c.MaxCancelMarks = int(mb("RENDER_MAX_CANCEL_MARKS", DefaultMaxCancelMarks))
	if get("RENDER_CHILD_USER") != "" {
		bad("RENDER_CHILD_USER", "replaced by RENDER_CHILD_UID_RANGE: every attempt runs as a user of its own")
	}
	return c, l.Err()
}

// LoadProfileConfig reads the settings the RenderProfile depends on, and
// only those: what `renderer profile` needs to print the profile a release
// writes as RENDER_PROFILE_MANIFEST, on a machine that does not run the
// service.
func LoadProfileConfig(getenv func(string) string, environ []string) (Config, error) {
	l := &config.Loader{Getenv: getenv}
	checkLegacy(l, environ)
	c := Config{BrowserPath: l.String("RENDER_BROWSER_PATH", chromium.DefaultBrowserPath, false)}
	checkBrowser(l, c.BrowserPath)
	return c, l.Err()
}

// standbyCPUs parses RENDER_STANDBY_CPUS (v): 0, or between minStandbyCPUs
// and the attempt's cores. Unset, the default, but never more than the
// attempt's cores.
func standbyCPUs(l *config.Loader, v string, childCPUs float64) float64 {
	if v == "" {
		return min(DefaultStandbyCPUs, childCPUs)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || (f != 0 && (f < minStandbyCPUs || f > childCPUs)) {
		l.Fail("RENDER_STANDBY_CPUS", "%q is not 0 (off) or a number of cores between %g and RENDER_CHILD_CPUS (%g)", v, minStandbyCPUs, childCPUs)
		return 0
	}
	return f
}

// checkLegacy fails on browser settings of earlier systems.
func checkLegacy(l *config.Loader, environ []string) {
	var legacy []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if repl, ok := legacyVariables[k]; ok {
			legacy = append(legacy, k+" → "+repl)
		}
	}
	if len(legacy) > 0 {
		sort.Strings(legacy)
		l.Fail("(environment)", "old browser variables are set; remove them (replacements: %s)", strings.Join(legacy, "; "))
	}
}

func checkBrowser(l *config.Loader, path string) {
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		l.Fail("RENDER_BROWSER_PATH", "%s is not an executable file (install Debian's chromium package)", path)
	}
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// allowedOrigins are the origins the browser may contact (the server
// computes them once).
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
