package renderer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slidecells/renderer/chromium"
	"slidecells/renderer/internal/rendertest"
	"slidecells/shared/ticket"
)

func TestLoadConfig(t *testing.T) {
	rendertest.RequireIsolation(t)
	signer, _ := ticket.GenerateSigner("k1")
	cred, _ := rendertest.Credential(t)
	two := filepath.Join(t.TempDir(), "two")
	_ = os.WriteFile(two, []byte("first-credential-0001\n\nsecond-credential-0002\n"), 0o600)
	three := filepath.Join(t.TempDir(), "three")
	_ = os.WriteFile(three, []byte("first-credential-0001\nsecond-credential-0002\nthird-credential-00003\n"), 0o600)
	short := filepath.Join(t.TempDir(), "short")
	_ = os.WriteFile(short, []byte("short\n"), 0o600)
	base := map[string]string{
		"RENDER_WORKER_ID":          "w1",
		"RENDER_TICKET_PUBLIC_KEYS": signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL":   "http://preview.cell-a.svc:8080/preview/",
		// An existing executable, so the test does not need Chromium.
		"RENDER_BROWSER_PATH":            "/bin/sh",
		"RENDER_SERVICE_CREDENTIAL_FILE": cred,
	}
	load := func(over map[string]string, extra ...string) (Config, error) {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		var environ []string
		for k, v := range over {
			env[k] = v
		}
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		environ = append(environ, extra...)
		return LoadConfig(func(k string) string { return env[k] }, environ)
	}
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.CleanupGrace != 5*time.Second || c.ResultTTL != 600*time.Second || c.ListenAddr != DefaultListenAddr || c.TempRoot != DefaultTempRoot {
		t.Fatalf("defaults = %+v", c)
	}
	if got := c.allowedOrigins(); len(got) != 1 || got[0] != "http://preview.cell-a.svc:8080" {
		t.Fatalf("allowed origins = %v", got)
	}
	if len(c.ServiceTokens) != 1 || len(c.HidePaths) != 1 || c.HidePaths[0] != cred {
		t.Fatalf("credential = %v, hidden %v", c.ServiceTokens, c.HidePaths)
	}
	if c.ChildCgroup.MemoryBytes != 2<<30 || c.ChildCgroup.Processes != 512 || c.ChildCgroup.CPUs != 2 || c.ChildTempBytes != 512<<20 ||
		c.ChildUIDs.First != 200000 || c.ChildUIDs.Last != 200999 || c.LaunchProbeInterval != 5*time.Minute {
		t.Fatalf("isolation defaults = %+v %+v %d %v", c.ChildCgroup, c.ChildUIDs, c.ChildTempBytes, c.LaunchProbeInterval)
	}
	if c.Egress.MaxBytes != 256<<20 || c.Egress.MaxConnections != 64 {
		t.Fatalf("egress defaults = %+v", c.Egress)
	}
	if c.Limits.DataBytes != 4<<30 || c.Limits.FileBytes != 256<<20 || c.Limits.OpenFiles != 8192 || c.Limits.Processes != 1024 {
		t.Fatalf("per-process limits = %+v", c.Limits)
	}
	if c.StandbyMaxAge != 5*time.Minute {
		t.Fatalf("standby max age default = %v", c.StandbyMaxAge)
	}
	if c, err := load(map[string]string{"RENDER_STANDBY_MAX_AGE_SECONDS": "60"}); err != nil || c.StandbyMaxAge != time.Minute {
		t.Fatalf("standby max age = %v, %v", c.StandbyMaxAge, err)
	}
	if c.StandbyCPUs != 0.25 {
		t.Fatalf("standby CPUs default = %v", c.StandbyCPUs)
	}
	for v, want := range map[string]float64{"0": 0, "0.05": 0.05, "1.5": 1.5, "2": 2} {
		if c, err := load(map[string]string{"RENDER_STANDBY_CPUS": v}); err != nil || c.StandbyCPUs != want {
			t.Fatalf("RENDER_STANDBY_CPUS=%s: %v, %v", v, c.StandbyCPUs, err)
		}
	}
	if c, err := load(map[string]string{"RENDER_CHILD_CPUS": "0.2"}); err != nil || c.StandbyCPUs != 0.2 {
		t.Fatalf("standby CPUs default above RENDER_CHILD_CPUS=0.2: %v, %v", c.StandbyCPUs, err)
	}
	if c, err := load(map[string]string{"RENDER_EGRESS_MAX_MB": "8", "RENDER_EGRESS_MAX_CONNECTIONS": "16"}); err != nil || c.Egress.MaxBytes != 8<<20 || c.Egress.MaxConnections != 16 {
		t.Fatalf("egress settings = %+v, %v", c.Egress, err)
	}
	if c.MetricsAddr != "" {
		t.Fatalf("the metrics listener is on by default: %q", c.MetricsAddr)
	}
	if c, err := load(map[string]string{"RENDER_METRICS_ADDR": "0.0.0.0:9464"}); err != nil || c.MetricsAddr != "0.0.0.0:9464" {
		t.Fatalf("RENDER_METRICS_ADDR = %q, %v", c.MetricsAddr, err)
	}
	if c, err := load(map[string]string{"RENDER_SERVICE_CREDENTIAL_FILE": two}); err != nil || len(c.ServiceTokens) != 2 {
		t.Fatalf("rotation credentials = %v, %v", c.ServiceTokens, err)
	}
	if chromium.DefaultBrowserPath != "/usr/lib/chromium/chromium" {
		t.Fatal("the default browser must be Debian's real binary, not the wrapper script")
	}
	cases := []struct {
		name  string
		over  map[string]string
		extra []string
		want  string
	}{
		{"missing worker", map[string]string{"RENDER_WORKER_ID": ""}, nil, "RENDER_WORKER_ID"},
		{"bad preview base", map[string]string{"RENDER_PREVIEW_BASE_URL": "ftp://x"}, nil, "RENDER_PREVIEW_BASE_URL"},
		{"credentials in base", map[string]string{"RENDER_PREVIEW_BASE_URL": "http://u:p@x/"}, nil, "RENDER_PREVIEW_BASE_URL"},
		{"bad asset origin", map[string]string{"RENDER_ASSET_ORIGINS": "http://x/path"}, nil, "RENDER_ASSET_ORIGINS"},
		{"long temp root", map[string]string{"RENDER_TEMP_ROOT": "/" + strings.Repeat("x", 60)}, nil, "RENDER_TEMP_ROOT"},
		{"cgroup name with a path", map[string]string{"RENDER_CGROUP_NAME": "../escape"}, nil, "RENDER_CGROUP_NAME"},
		{"zero ttl", map[string]string{"RENDER_RESULT_TTL_SECONDS": "0"}, nil, "RENDER_RESULT_TTL_SECONDS"},
		{"missing browser", map[string]string{"RENDER_BROWSER_PATH": "/nonexistent/chromium"}, nil, "RENDER_BROWSER_PATH"},
		{"no credential", map[string]string{"RENDER_SERVICE_CREDENTIAL_FILE": ""}, nil, "RENDER_SERVICE_CREDENTIAL_FILE: required"},
		{"three credentials", map[string]string{"RENDER_SERVICE_CREDENTIAL_FILE": three}, nil, "RENDER_SERVICE_CREDENTIAL_FILE"},
		{"short credential", map[string]string{"RENDER_SERVICE_CREDENTIAL_FILE": short}, nil, "at least 16"},
		{"half TLS", map[string]string{"RENDER_TLS_CERT_FILE": "/x.pem"}, nil, "RENDER_TLS_CERT_FILE"},
		{"metrics address without a port", map[string]string{"RENDER_METRICS_ADDR": "0.0.0.0"}, nil, "RENDER_METRICS_ADDR"},
		{"child user setting", map[string]string{"RENDER_CHILD_USER": "nobody"}, nil, "RENDER_CHILD_UID_RANGE"},
		{"uid range with root", map[string]string{"RENDER_CHILD_UID_RANGE": "0-10"}, nil, "RENDER_CHILD_UID_RANGE"},
		{"tiny memory", map[string]string{"RENDER_CHILD_MEMORY_MB": "16"}, nil, "RENDER_CHILD_MEMORY_MB"},
		{"bad cpus", map[string]string{"RENDER_CHILD_CPUS": "lots"}, nil, "RENDER_CHILD_CPUS"},
		{"egress bytes", map[string]string{"RENDER_EGRESS_MAX_MB": "0"}, nil, "RENDER_EGRESS_MAX_MB"},
		{"egress connections", map[string]string{"RENDER_EGRESS_MAX_CONNECTIONS": "2"}, nil, "RENDER_EGRESS_MAX_CONNECTIONS"},
		{"standby max age", map[string]string{"RENDER_STANDBY_MAX_AGE_SECONDS": "5"}, nil, "RENDER_STANDBY_MAX_AGE_SECONDS"},
		{"standby cpus not a number", map[string]string{"RENDER_STANDBY_CPUS": "NaN"}, nil, "RENDER_STANDBY_CPUS"},
		{"standby cpus negative", map[string]string{"RENDER_STANDBY_CPUS": "-0.25"}, nil, "RENDER_STANDBY_CPUS"},
		{"standby cpus tiny", map[string]string{"RENDER_STANDBY_CPUS": "0.01"}, nil, "RENDER_STANDBY_CPUS"},
		{"standby cpus above the attempt's", map[string]string{"RENDER_CHILD_CPUS": "1", "RENDER_STANDBY_CPUS": "1.5"}, nil, "RENDER_STANDBY_CPUS"},
		{"standby cpus infinite", map[string]string{"RENDER_STANDBY_CPUS": "+Inf"}, nil, "RENDER_STANDBY_CPUS"},
		{"legacy variable", nil, []string{"SCREENSHOT_BROWSER_PATH=/x"}, "SCREENSHOT_BROWSER_PATH → RENDER_BROWSER_PATH"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.over, tc.extra...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to name %s", err, tc.want)
			}
		})
	}
}
