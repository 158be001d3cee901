package renderer

import (
	"strings"
	"testing"
	"time"

	"slidecells/renderer/chromium"
	"slidecells/shared/ticket"
)

func TestLoadConfig(t *testing.T) {
	signer, _ := ticket.GenerateSigner("k1")
	base := map[string]string{
		"RENDER_WORKER_ID":          "w1",
		"RENDER_TICKET_PUBLIC_KEYS": signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL":   "http://preview.cell-a.svc:8080/preview/",
		// An existing executable, so the test does not need Chromium.
		"RENDER_BROWSER_PATH": "/bin/sh",
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
		{"zero ttl", map[string]string{"RENDER_RESULT_TTL_SECONDS": "0"}, nil, "RENDER_RESULT_TTL_SECONDS"},
		{"missing browser", map[string]string{"RENDER_BROWSER_PATH": "/nonexistent/chromium"}, nil, "RENDER_BROWSER_PATH"},
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
