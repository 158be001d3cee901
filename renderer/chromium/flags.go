package chromium

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// Fixed environment of every attempt; part of the RenderProfile.
const (
	Locale          = "en-US"
	Timezone        = "UTC"
	ColorScheme     = "light"
	HeadlessMode    = "new"
	DSFPolicy       = "per request viewport.device_scale_factor, via Emulation.setDeviceMetricsOverride"
	AnimationPolicy = "prefers-reduced-motion: reduce; CSS animations and transitions forced to zero duration from document start; running Web Animations finished (or cancelled when infinite) before capture"
	// Engine versions the child's behaviour; bump it when capture or
	// readiness handling changes output.
	EngineVersion = "renderer-chromium/1"
	// DefaultBrowserPath is Debian's real binary: /usr/bin/chromium is a
	// wrapper script that adds flags from /etc/chromium.d, which would
	// make the flag profile depend on the image's config files.
	DefaultBrowserPath = "/usr/lib/chromium/chromium"
)

// fixedFlags are the exact launch flags besides the per-attempt profile
// directory, the DevTools port and the network flags. Each one is here for
// a reason:
var fixedFlags = []string{
	"headless",                      // new headless mode
	"disable-gpu",                   // software rendering: deterministic, no GPU in the image
	"disable-background-networking", // no update, safe-browsing or metrics traffic
	"disable-component-update",      // no component downloads
	"disable-sync",                  // no account traffic
	"no-first-run",                  // no first-run tabs
	"no-default-browser-check",      // no prompt
	"disable-quic",                  // TCP only, so the proxy sees everything
	"disable-default-apps",          // no default apps install
	"disable-extensions",            // no extension code in the page
	// Crash handling stays on: --disable-crashpad-for-testing would keep
	// the crash handler (which leaves the process group by setsid) away,
	// but with it Chromium 156 crashes its network service ("FD
	// ownership violation"). The handler dies with the attempt's PID
	// namespace instead.
	"disable-breakpad",           // no crash uploads
	"disable-domain-reliability", // no reliability beacons
	"disable-client-side-phishing-detection",
	"disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,PrivacySandboxSettings4,DialMediaRouteProvider",
	"disable-dev-shm-usage",          // container /dev/shm is often tiny
	"disable-renderer-backgrounding", // timers and rAF must run in a headless tab
	"disable-background-timer-throttling",
	"disable-backgrounding-occluded-windows",
	"disable-hang-monitor",
	"disable-prompt-on-repost",
	"deny-permission-prompts",
	"block-new-web-contents", // no popups
	"metrics-recording-only",
	"password-store=basic",
	"use-mock-keychain",
	"mute-audio",
	"hide-scrollbars",          // scrollbars would change the canvas
	"force-color-profile=srgb", // colour output independent of the host
	"font-render-hinting=none", // glyph outlines independent of the host's fontconfig hinting
	"lang=" + Locale,
	"no-pings",
}

// FixedFlags are the launch flags every browser of the renderer gets, without an attempt's
// network flags: for tests that open documents the way the renderer does, without its egress
// proxy.
func FixedFlags() []string { return append([]string(nil), fixedFlags...) }

// Options are launch flags ("name" or "name=value", as LaunchFlags and FixedFlags give them) as
// chromedp allocator options.
func Options(flags []string) []chromedp.ExecAllocatorOption {
	opts := make([]chromedp.ExecAllocatorOption, 0, len(flags))
	for _, f := range flags {
		if name, value, hasValue := strings.Cut(f, "="); hasValue {
			opts = append(opts, chromedp.Flag(name, value))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	return opts
}

// NetworkFlags are the browser's network settings of one attempt.
type NetworkFlags struct {
	// ProxyAddr is host:port of the attempt's egress proxy: every
	// connection goes there (it is the only way out of the attempt's
	// network namespace anyway).
	ProxyAddr string
	// AllowedOrigins are the only hosts the browser resolves itself.
	AllowedOrigins []string
	// NoBrowserGate leaves the resolver rules out (tests only).
	NoBrowserGate bool
}

// LaunchFlags returns the flags for one attempt, without the leading dashes,
// as "name" or "name=value".
func LaunchFlags(n NetworkFlags) []string {
	flags := append([]string(nil), fixedFlags...)
	var exclude []string
	for _, o := range n.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" {
			continue
		}
		exclude = append(exclude, "EXCLUDE "+u.Hostname())
	}
	flags = append(flags,
		"proxy-server=http://"+n.ProxyAddr,
		// "<-loopback>" removes Chromium's implicit proxy bypass for
		// loopback: even the preview host goes through the egress proxy.
		"proxy-bypass-list=<-loopback>",
	)
	if !n.NoBrowserGate {
		// No name resolution except for the allowed hosts: DNS is an
		// exfiltration channel too (the namespace has none anyway).
		flags = append(flags, "host-resolver-rules=MAP * ~NOTFOUND"+prefixComma(exclude))
	}
	return flags
}

func prefixComma(parts []string) string {
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return u.Host + ":443"
	}
	return u.Host + ":80"
}

// ProfileFlags are the launch flags as the RenderProfile records them:
// deployment addresses and per-attempt paths replaced by placeholders,
// sorted, with the flags chromedp adds itself.
func ProfileFlags() []string {
	flags := LaunchFlags(NetworkFlags{ProxyAddr: "<egress-proxy>"})
	for i, f := range flags {
		if strings.HasPrefix(f, "host-resolver-rules=") {
			flags[i] = "host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE <allowed hosts>"
		}
	}
	flags = append(flags, "user-data-dir=<attempt>/profile", "remote-debugging-port=0")
	for i := range flags {
		flags[i] = "--" + flags[i]
	}
	sort.Strings(flags)
	return flags
}

// BrowserBuild asks the binary for its version, e.g. "Chromium 156.0.8078.79".
func BrowserBuild(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("chromium: %s --version: %w", path, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("chromium: %s --version printed nothing", path)
	}
	return v, nil
}

// LibraryVersion is the chromedp module version linked into this binary.
func LibraryVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/chromedp/chromedp" {
				if d.Replace != nil {
					return d.Path + " " + d.Replace.Version
				}
				return d.Path + " " + d.Version
			}
		}
	}
	return "github.com/chromedp/chromedp (unknown)"
}
