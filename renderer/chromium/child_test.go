package chromium

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"slidecells/renderer/egress"
	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/rendertest"
	"slidecells/renderer/internal/unpriv"
	"slidecells/renderer/supervisor"
	"slidecells/shared/loop"
	rc "slidecells/shared/rendercontract"
)

const childMarker = "CHROMIUM_TEST_CHILD"

func TestMain(m *testing.M) {
	supervisor.RunShimIfRequested()
	if os.Getenv(childMarker) == "1" {
		os.Exit(RunChild(os.Stdin, os.Stdout, os.Stderr))
	}
	if err := supervisor.BecomeSubreaper(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

const token = "preview-token-for-tests"

type outcome struct {
	events    []Event
	artifacts map[rc.ArtifactName][]byte
	frames    map[rc.ArtifactName]ArtifactFrame
	result    *ChildResult
	group     supervisor.Outcome
}

type harness struct {
	srv     *fixture.Server
	root    string
	uids    *supervisor.UIDPool
	cgroups *supervisor.Cgroups
	// proxies receives the egress proxy of every attempt.
	proxies chan *egress.Proxy
}

func setup(t *testing.T) *harness {
	t.Helper()
	rendertest.RequireBrowser(t)
	srv := fixture.Start(token)
	t.Cleanup(srv.Close)
	// Short: Chromium's singleton socket path must stay below the
	// 108-byte limit of Unix socket addresses.
	root, err := os.MkdirTemp("/tmp", "rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	uids, cg := rendertest.Isolation(t)
	return &harness{srv: srv, root: root, uids: uids, cgroups: cg, proxies: make(chan *egress.Proxy, 16)}
}

func (h *harness) job(ref string, op rc.Operation, vp rc.Viewport) Job {
	return Job{
		AttemptID: "ra_test",
		Operation: op,
		Viewport:  vp,
		Browser:   BrowserSettings{Path: DefaultBrowserPath, Locale: Locale, Timezone: Timezone},
		Document: DocumentSettings{
			URL:            h.srv.BaseURL() + "snapshots/" + ref,
			AllowedOrigins: []string{h.srv.Origin()},
			AccessToken:    token,
			ArtifactID:     ref,
			InputDigest:    fixture.InputDigest,
			HostBuild:      fixture.HostBuild,
		},
		Budget:      30 * time.Second,
		BrowserLog:  os.Getenv("BROWSER_LOG") != "",
		EgressProxy: egress.Addr,
	}
}

func (h *harness) run(t *testing.T, job Job, deadline time.Duration) outcome {
	t.Helper()
	return h.finish(t, h.start(t, job, deadline))
}

// start starts job as an attempt would run it.
func (h *harness) start(t *testing.T, job Job, deadline time.Duration) *supervisor.Group {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(job)
	g, err := supervisor.Start(supervisor.Spec{
		Path:         self,
		Env:          func(dir string) []string { return append(ChildEnv(dir), childMarker+"=1") },
		UIDs:         h.uids,
		Cgroups:      h.cgroups,
		Egress:       rendertest.Egress(job.Document.AllowedOrigins, h.proxies),
		TempRoot:     h.root,
		Limits:       supervisor.Limits{}.WithDefaults(),
		Input:        in,
		HardDeadline: time.Now().Add(deadline),
		Grace:        2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// finish reads the attempt's events until it ends and checks nothing of it
// is left.
func (h *harness) finish(t *testing.T, g *supervisor.Group) outcome {
	t.Helper()
	o := outcome{artifacts: map[rc.ArtifactName][]byte{}, frames: map[rc.ArtifactName]ArtifactFrame{}}
	readErr := ReadEvents(g.Stdout(), func(ev Event, body io.Reader) error {
		o.events = append(o.events, ev)
		switch ev.Type {
		case EventArtifact:
			b, err := io.ReadAll(body)
			if err != nil {
				return err
			}
			o.artifacts[ev.Artifact.Name] = b
			o.frames[ev.Artifact.Name] = *ev.Artifact
		case EventResult:
			o.result = ev.Result
		}
		return nil
	})
	<-g.Done()
	o.group = g.Outcome()
	if readErr != nil {
		t.Fatalf("event stream: %v", readErr)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("child stderr:\n%s", o.group.Stderr)
	}
	assertNoBrowserLeft(t, g.Dir())
	return o
}

// assertNoBrowserLeft checks the process table for any process that still
// refers to the attempt directory (every Chromium process of an attempt
// carries its profile path on the command line).
func assertNoBrowserLeft(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(dir)) {
			t.Fatalf("process %s of the attempt survived: %s", e.Name(), strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}

func wantError(t *testing.T, o outcome, code rc.Code) *rc.Error {
	t.Helper()
	if o.result == nil {
		t.Fatalf("no result; child stderr:\n%s", o.group.Stderr)
	}
	if o.result.Error == nil || o.result.Error.Code != code {
		t.Fatalf("result error = %+v, want %s; stderr:\n%s", o.result.Error, code, o.group.Stderr)
	}
	return o.result.Error
}

func wantOK(t *testing.T, o outcome) {
	t.Helper()
	if o.result == nil || o.result.Error != nil {
		var e *rc.Error
		if o.result != nil {
			e = o.result.Error
		}
		t.Fatalf("result error = %+v; stderr:\n%s", e, o.group.Stderr)
	}
}

var small = rc.Viewport{Width: 320, Height: 180, DeviceScaleFactor: 2}

func TestCaptureReadyPage(t *testing.T) {
	h := setup(t)
	o := h.run(t, h.job(fixture.Ready, rc.OpPageCapture, small), time.Minute)
	wantOK(t, o)
	img, err := png.Decode(bytes.NewReader(o.artifacts[rc.ArtifactCapture]))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 360 {
		t.Fatalf("capture is %dx%d, want 640x360", b.Dx(), b.Dy())
	}
	if f := o.frames[rc.ArtifactCapture]; f.Width != 640 || f.Height != 360 {
		t.Fatalf("frame says %dx%d", f.Width, f.Height)
	}
	// The fixture's background is #1f6feb; the bottom right corner has no text.
	r, g, b, _ := img.At(630, 350).RGBA()
	if r>>8 != 0x1f || g>>8 != 0x6f || b>>8 != 0xeb {
		t.Fatalf("pixel = %02x%02x%02x, want 1f6feb", r>>8, g>>8, b>>8)
	}
	if o.result.HostBuild != fixture.HostBuild || o.result.InputDigest != fixture.InputDigest || o.result.ArtifactID != fixture.Ready {
		t.Fatalf("host facts = %+v", o.result)
	}
	types := []string{}
	for _, ev := range o.events {
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "browser_started,ready,artifact,result" {
		t.Fatalf("events = %v", types)
	}
	if seen := h.srv.CredentialSeen("/preview/snapshots/" + fixture.Ready); len(seen) != 1 || !seen[0] {
		t.Fatalf("credential on document request = %v", seen)
	}
	if seen := h.srv.CredentialSeen("/assets/font.ttf"); len(seen) > 0 && seen[0] {
		t.Fatal("credential leaked to an asset request")
	}
}

func TestReadinessProtocolFailures(t *testing.T) {
	h := setup(t)
	cases := []struct {
		name   string
		ref    string
		mutate func(*Job)
		want   rc.Code
	}{
		{"protocol missing", fixture.Never, nil, rc.CodeContractMismatch},
		{"wrong protocol version", fixture.WrongVersion, nil, rc.CodeContractMismatch},
		{"blocking content fault", fixture.Fault, nil, rc.CodeContentError},
		{"failed visual resource", fixture.AssetFailed, nil, rc.CodeAssetNotReady},
		{"other input digest", fixture.Ready, func(j *Job) { j.Document.InputDigest = "sha256:" + strings.Repeat("0", 64) }, rc.CodeInputNotReproducible},
		{"other host build", fixture.Ready, func(j *Job) { j.Document.HostBuild = "host-2" }, rc.CodeProfileMismatch},
		{"refused credential", fixture.Ready, func(j *Job) { j.Document.AccessToken = "wrong" }, rc.CodeInputExpired},
		{"redirect to another origin", fixture.Offsite, nil, rc.CodeContractMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := h.job(tc.ref, rc.OpPageCapture, small)
			if tc.mutate != nil {
				tc.mutate(&j)
			}
			e := wantError(t, h.run(t, j, time.Minute), tc.want)
			if tc.want == rc.CodeAssetNotReady && (e.Resources == nil || e.Resources.Images.Failed != 1 || e.Retryable) {
				t.Fatalf("asset facts = %+v", e)
			}
		})
	}
	if h.srv.OtherHits() != 0 {
		t.Fatalf("the other origin was reached %d times", h.srv.OtherHits())
	}
}

// TestBrowserSandboxIsOn: Chromium's own sandbox works inside the attempt's
// namespaces (as root and unprivileged, where it nests in the attempt's user
// namespace): its renderer processes run in user and PID namespaces of their
// own, below the browser's.
func TestBrowserSandboxIsOn(t *testing.T) {
	h := setup(t)
	g := h.start(t, h.job(fixture.Forever, rc.OpPageCapture, small), 60*time.Second)
	ns := func(pid, kind string) string {
		l, _ := os.Readlink("/proc/" + pid + "/ns/" + kind)
		return l
	}
	var browser, renderer string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = loop.Until(ctx, 10*time.Millisecond, func(context.Context) error {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil || !bytes.Contains(b, []byte("--user-data-dir="+h.root+"/")) {
				continue
			}
			// Zygote-forked processes rewrite their command line
			// into one space-separated string.
			switch {
			case !bytes.HasPrefix(b, []byte(DefaultBrowserPath+"\x00")) && !bytes.HasPrefix(b, []byte(DefaultBrowserPath+" ")):
			case !bytes.Contains(b, []byte("--type=")):
				browser = e.Name()
			case bytes.Contains(b, []byte("--type=renderer")):
				renderer = e.Name()
			}
		}
		if browser == "" || renderer == "" {
			return errors.New("browser or renderer process not found yet")
		}
		return nil
	})
	if browser == "" || renderer == "" { // the bound passed: stop the group before failing
		g.Stop(supervisor.StopCancel)
		h.finish(t, g)
		t.Fatalf("browser %q or renderer %q process not found", browser, renderer)
	}
	bu, ru, bp, rp := ns(browser, "user"), ns(renderer, "user"), ns(browser, "pid"), ns(renderer, "pid")
	g.Stop(supervisor.StopCancel)
	h.finish(t, g)
	if bu == "" || ru == "" || bp == "" || rp == "" {
		t.Fatalf("namespaces unreadable: browser user %q pid %q, renderer user %q pid %q", bu, bp, ru, rp)
	}
	if bu == ru || bp == rp {
		t.Fatalf("the renderer process shares the browser's namespaces (sandbox off): user %s/%s pid %s/%s", bu, ru, bp, rp)
	}
}

func TestOtherOriginsAreBlocked(t *testing.T) {
	h := setup(t)
	o := h.run(t, h.job(fixture.Escape, rc.OpPageCapture, small), time.Minute)
	wantOK(t, o)
	if h.srv.OtherHits() != 0 {
		t.Fatalf("the other origin was reached %d times", h.srv.OtherHits())
	}
	if o.result.BlockedRequests == 0 {
		t.Fatal("no request was blocked; the fixture did not try")
	}
}

// TestKernelBoundaryHoldsWithoutTheBrowserGate: with request interception and
// resolver rules switched off, the page's fetch, XHR, WebSocket, <img>,
// <iframe>, beacon, DNS names, another loopback port and the metadata
// address still reach nothing: the network namespace has no way out but the
// egress proxy, and the proxy admits only the preview origin.
func TestKernelBoundaryHoldsWithoutTheBrowserGate(t *testing.T) {
	h := setup(t)
	// Without the gate nothing attaches the preview credential.
	h.srv.StrictAuth = false
	j := h.job(fixture.Escape, rc.OpPageCapture, small)
	j.NoBrowserGate = true
	o := h.run(t, j, time.Minute)
	wantOK(t, o)
	if h.srv.OtherHits() != 0 {
		t.Fatalf("the other origin was reached %d times", h.srv.OtherHits())
	}
	p := <-h.proxies
	if p.Blocked() < 5 {
		t.Fatalf("the egress proxy refused only %d requests; the page tried more", p.Blocked())
	}
	if o.result.BlockedRequests != 0 {
		t.Fatalf("the in-browser gate blocked %d requests although it was off", o.result.BlockedRequests)
	}
}

// TestPNGOverTheLimitFails: a 16-megapixel capture of random pixels is a PNG
// far above 32 MiB; the attempt fails with RENDER_OUTPUT_LIMIT_EXCEEDED and
// hands over no artifact.
func TestPNGOverTheLimitFails(t *testing.T) {
	h := setup(t)
	o := h.run(t, h.job(fixture.Noise, rc.OpPageCapture, rc.Viewport{Width: 4000, Height: 4000, DeviceScaleFactor: 1}), 2*time.Minute)
	if e := wantError(t, o, rc.CodeOutputLimitExceeded); !strings.Contains(e.Message, "capture is") {
		t.Fatalf("error = %+v", e)
	} else {
		t.Log(e.Message)
	}
	if len(o.artifacts) != 0 {
		t.Fatalf("an artifact was handed over: %v", o.frames)
	}
}

func TestCredentialNotCarriedAcrossRedirect(t *testing.T) {
	h := setup(t)
	o := h.run(t, h.job(fixture.Redirect, rc.OpPageCapture, small), time.Minute)
	wantOK(t, o)
	if seen := h.srv.CredentialSeen("/preview/snapshots/" + fixture.Redirect); len(seen) != 1 || !seen[0] {
		t.Fatalf("first hop credential = %v", seen)
	}
	if seen := h.srv.CredentialSeen("/preview/landing/" + fixture.Redirect); len(seen) != 1 || seen[0] {
		t.Fatalf("redirect target credential = %v, want [false]", seen)
	}
}

func decodeDiagnosis(t *testing.T, o outcome) rc.Diagnosis {
	t.Helper()
	wantOK(t, o)
	var d rc.Diagnosis
	if err := json.Unmarshal(o.artifacts[rc.ArtifactDiagnosis], &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func codes(d rc.Diagnosis, scene string) map[string]rc.Finding {
	m := map[string]rc.Finding{}
	for _, f := range d.Items {
		if f.Scene == scene {
			if _, ok := m[f.Code]; !ok {
				m[f.Code] = f
			}
		}
	}
	return m
}

func TestPageDiagnoseFindsLayoutProblems(t *testing.T) {
	h := setup(t)
	d := decodeDiagnosis(t, h.run(t, h.job(fixture.Layout, rc.OpPageDiagnose, rc.Viewport{Width: 360, Height: 270, DeviceScaleFactor: 1}), time.Minute))
	wantLayoutFindings(t, d)
}

// TestTruncatedDiagnosisKeepsErrorsAndCounts: 400 small-text warnings come
// before one overflow error in DOM order. The diagnosis counts all 401, keeps
// the error first and is marked truncated: validation (counts.error > 0)
// fails.
func TestTruncatedDiagnosisKeepsErrorsAndCounts(t *testing.T) {
	h := setup(t)
	job := h.job(fixture.Crowded, rc.OpPageDiagnose, rc.Viewport{Width: 360, Height: 270, DeviceScaleFactor: 1})
	job.Budget = time.Minute // a loaded machine takes long to start a browser
	d := decodeDiagnosis(t, h.run(t, job, 90*time.Second))
	if d.Counts.Error != 1 || d.Counts.Warning < 400 {
		t.Fatalf("counts = %+v, want 1 error and at least 400 warnings", d.Counts)
	}
	if !d.Truncated || len(d.Items) == 0 || d.Items[0].Code != rc.FindingTextOverflow || d.Items[0].Evidence.Selector != "#overflow" {
		t.Fatalf("truncated %v, first item %+v: want the overflow error first", d.Truncated, d.Items[0])
	}
	last := d.Items[len(d.Items)-1]
	if last.Code != rc.FindingItemsTruncated {
		t.Fatalf("last item %+v: want the truncation marker", last)
	}
}

// TestIncompleteAnalysisFailsInsteadOfPassing: a page with more text
// elements than the analysis checks, none of them faulty, cannot be
// reported free of problems: the execution fails.
func TestIncompleteAnalysisFailsInsteadOfPassing(t *testing.T) {
	h := setup(t)
	job := h.job(fixture.Huge, rc.OpPageDiagnose, rc.Viewport{Width: 1280, Height: 720, DeviceScaleFactor: 1})
	job.Budget = time.Minute
	wantError(t, h.run(t, job, 90*time.Second), rc.CodeOutputLimitExceeded)
}

// TestGraphicsAgainstTextAndContainers: a chart wider than its column runs
// into the text beside it (the chart leaves its container; the text runs
// over it) and a red box is painted over a line of 48 px text (an error):
// each reported with its rectangles.
func TestGraphicsAgainstTextAndContainers(t *testing.T) {
	h := setup(t)
	job := h.job(fixture.Graphics, rc.OpPageDiagnose, rc.Viewport{Width: 360, Height: 270, DeviceScaleFactor: 1})
	job.Budget = time.Minute
	d := decodeDiagnosis(t, h.run(t, job, 90*time.Second))
	type key struct {
		sev                rc.Severity
		code, sel, related string
	}
	got := map[key]rc.Evidence{}
	for _, f := range d.Items {
		got[key{f.Severity, f.Code, f.Evidence.Selector, f.Evidence.Related}] = f.Evidence
	}
	for _, want := range []key{
		{rc.SeverityError, rc.FindingGraphicOverlap, "#redbox", "#big"},
		{rc.SeverityWarning, rc.FindingGraphicOverlap, "#chart", "#side"},
		{rc.SeverityWarning, rc.FindingOutsideContainer, "#chart", "#chartcol"},
	} {
		ev, ok := got[want]
		if !ok {
			t.Errorf("no %+v; items: %+v", want, d.Items)
			continue
		}
		if ev.Rect == nil || ev.Rect.Width <= 0 || ev.Rect.Height <= 0 {
			t.Errorf("%+v without an evidence rectangle: %+v", want, ev)
		}
	}
	if d.Counts.Error < 1 {
		t.Fatalf("counts %+v: the box over the text must fail validation", d.Counts)
	}
}

// TestLayoutAnalysisIgnoresPatchedPrototypes: content that replaces
// getBoundingClientRect, getClientRects, getComputedStyle, scrollWidth,
// querySelectorAll and JSON.stringify in its own world does not change the
// diagnosis: the analysis runs in an isolated world.
func TestLayoutAnalysisIgnoresPatchedPrototypes(t *testing.T) {
	h := setup(t)
	d := decodeDiagnosis(t, h.run(t, h.job(fixture.LayoutPatched, rc.OpPageDiagnose, rc.Viewport{Width: 360, Height: 270, DeviceScaleFactor: 1}), time.Minute))
	wantLayoutFindings(t, d)
}

func wantLayoutFindings(t *testing.T, d rc.Diagnosis) {
	t.Helper()
	got := codes(d, "default")
	for code, sel := range map[string]string{
		rc.FindingTextOverflow: "#overflow",
		rc.FindingTextClipped:  "#clipped",
		rc.FindingOverlap:      "#a",
		rc.FindingTextTooSmall: "#tiny",
		rc.FindingOutOfCanvas:  "#off",
		rc.FindingBlankArea:    "",
	} {
		f, ok := got[code]
		if !ok {
			t.Errorf("no %s finding; items: %+v", code, d.Items)
			continue
		}
		if sel != "" && f.Evidence.Selector != sel {
			t.Errorf("%s evidence selector = %q, want %q", code, f.Evidence.Selector, sel)
		}
		if f.Severity == "" || f.Scene != "default" {
			t.Errorf("%s lacks severity or scene: %+v", code, f)
		}
	}
	if d.Counts.Error < 3 || len(d.Scenes) != 1 || d.Scenes[0].Layout == nil || len(d.Scenes[0].Layout.TextBlocks) < 5 {
		t.Fatalf("diagnosis = %+v", d)
	}
	if d.SchemaVersion != rc.DiagnosisSchemaVersion {
		t.Fatalf("schema = %s", d.SchemaVersion)
	}
}

// TestOverwrittenReadinessCannotFakeSuccess: the host never mounts; content
// sets window.__renderReady to a perfect ready object and replaces
// JSON.stringify, JSON.parse, Object.keys, Array.prototype.push,
// Object.prototype.toJSON, document.fonts and document.readyState. The
// attempt runs out of time: it neither succeeds nor blames the renderer's
// contract (RENDER_CONTRACT_MISMATCH would quarantine the node).
func TestOverwrittenReadinessCannotFakeSuccess(t *testing.T) {
	h := setup(t)
	for _, op := range []rc.Operation{rc.OpPageCapture, rc.OpPageDiagnose} {
		t.Run(string(op), func(t *testing.T) {
			j := h.job(fixture.FakeReady, op, small)
			j.Budget = 3 * time.Second
			o := h.run(t, j, time.Minute)
			if o.result == nil || o.result.Error == nil {
				t.Fatalf("the faked page succeeded; stderr:\n%s", o.group.Stderr)
			}
			if o.result.Error.Code == rc.CodeContractMismatch {
				t.Fatalf("content caused %s: %+v", rc.CodeContractMismatch, o.result.Error)
			}
			wantError(t, o, rc.CodeDeadlineExceeded)
			if len(o.artifacts) != 0 {
				t.Fatalf("artifacts handed over: %v", o.frames)
			}
		})
	}
}

// TestForgedChannelCallsAreIgnored: before the host mounts, content calls
// the readiness binding of an about:blank iframe from the top document and
// lets a srcdoc iframe call its own, each once with a failing state of
// another artifact and once with a payload that is not JSON, and calls a
// window.__renderReadyV1 it defined itself. None of it reaches the trusted
// state: the capture succeeds with the host's facts.
func TestForgedChannelCallsAreIgnored(t *testing.T) {
	h := setup(t)
	o := h.run(t, h.job(fixture.Forge, rc.OpPageCapture, small), time.Minute)
	wantOK(t, o)
	if o.result.ArtifactID != fixture.Forge || o.result.HostBuild != fixture.HostBuild {
		t.Fatalf("host facts = %+v", o.result)
	}
	if o.result.IgnoredReadinessCalls < 4 {
		t.Fatalf("ignored readiness calls = %d, want the 4 forged ones", o.result.IgnoredReadinessCalls)
	}
	if _, err := png.Decode(bytes.NewReader(o.artifacts[rc.ArtifactCapture])); err != nil {
		t.Fatal(err)
	}
}

// TestNavigationAwayIsNotSuccess: content replaces the top document with a
// same-origin page that reports a perfect ready state for the same
// artifact; the attempt fails as a content fault, for every operation.
func TestNavigationAwayIsNotSuccess(t *testing.T) {
	h := setup(t)
	for _, op := range []rc.Operation{rc.OpPageCapture, rc.OpPageDiagnose} {
		t.Run(string(op), func(t *testing.T) {
			before := len(h.srv.CredentialSeen("/preview/landing/" + fixture.NavigateAway))
			o := h.run(t, h.job(fixture.NavigateAway, op, small), time.Minute)
			wantError(t, o, rc.CodeContentError)
			if len(o.artifacts) != 0 {
				t.Fatalf("artifacts handed over: %v", o.frames)
			}
			if after := len(h.srv.CredentialSeen("/preview/landing/" + fixture.NavigateAway)); after == before {
				t.Fatal("test setup: the page never navigated away")
			}
		})
	}
}

func TestComponentDiagnoseRunsDeclaredScenes(t *testing.T) {
	h := setup(t)
	d := decodeDiagnosis(t, h.run(t, h.job(fixture.Component, rc.OpComponentDiagnose, small), time.Minute))
	var names []string
	for _, s := range d.Scenes {
		names = append(names, s.Scene)
	}
	if strings.Join(names, ",") != "default,dense,broken" {
		t.Fatalf("scenes = %v", names)
	}
	if _, ok := codes(d, "broken")[rc.FindingMountFailed]; !ok {
		t.Errorf("broken scene lacks %s: %+v", rc.FindingMountFailed, d.Items)
	}
	// More declared scenes than a request may run: the first 16 run and the
	// rest is an error finding — neither a pass nor an execution error (a
	// validation would stay unavailable for ever).
	many := h.job(fixture.ManyScenes, rc.OpComponentDiagnose, small)
	many.Budget = 2 * time.Minute // 16 scenes on a loaded machine
	d = decodeDiagnosis(t, h.run(t, many, 150*time.Second))
	over, ok := codes(d, "default")[rc.FindingScenesOverLimit]
	if len(d.Scenes) != rc.MaxScenes || !ok || over.Severity != rc.SeverityError || d.Counts.Error < 1 || !d.Truncated ||
		over.Evidence.Value != strconv.Itoa(rc.MaxScenes+1) {
		t.Fatalf("%d scenes, over-limit finding %+v (%v), counts %+v, truncated %v", len(d.Scenes), over, ok, d.Counts, d.Truncated)
	}
	// Requested scenes win over the declared ones.
	j := h.job(fixture.ManyScenes, rc.OpComponentDiagnose, small)
	j.Scenes = []string{"s3"}
	d = decodeDiagnosis(t, h.run(t, j, time.Minute))
	if len(d.Scenes) != 2 || d.Scenes[1].Scene != "s3" {
		t.Fatalf("scenes = %+v", d.Scenes)
	}
}

func TestPageDiagnoseReportsContentFaultInResult(t *testing.T) {
	h := setup(t)
	d := decodeDiagnosis(t, h.run(t, h.job(fixture.Fault, rc.OpPageDiagnose, small), time.Minute))
	f, ok := codes(d, "default")[rc.FindingContentFault]
	if !ok || f.Severity != rc.SeverityError || f.Evidence.Value != "PROP_MISSING" {
		t.Fatalf("content fault finding = %+v (items %+v)", f, d.Items)
	}
}

func TestComponentDiagnoseRunsScenesInSequence(t *testing.T) {
	h := setup(t)
	j := h.job(fixture.Component, rc.OpComponentDiagnose, small)
	j.Scenes = []string{"dense", "broken", "ghost"}
	d := decodeDiagnosis(t, h.run(t, j, time.Minute))
	var names []string
	for _, s := range d.Scenes {
		names = append(names, s.Scene)
	}
	if strings.Join(names, ",") != "default,dense,broken,ghost" {
		t.Fatalf("scenes = %v", names)
	}
	if _, ok := codes(d, "dense")[rc.FindingTextOverflow]; !ok {
		t.Errorf("dense scene has no overflow finding: %+v", d.Items)
	}
	broken := codes(d, "broken")
	for _, c := range []string{rc.FindingMountFailed, rc.FindingContentFault, rc.FindingRuntimeError} {
		if _, ok := broken[c]; !ok {
			t.Errorf("broken scene lacks %s: %+v", c, d.Items)
		}
	}
	if len(d.Scenes[2].RuntimeErrors) == 0 || !strings.Contains(d.Scenes[2].RuntimeErrors[0].Message, "reading 'items'") {
		t.Errorf("broken scene runtime errors = %+v", d.Scenes[2].RuntimeErrors)
	}
	if _, ok := codes(d, "ghost")[rc.FindingSceneFailed]; !ok || d.Scenes[3].Completed {
		t.Errorf("unknown scene not reported as failed: %+v", d.Scenes[3])
	}
	if !d.Scenes[0].Completed || len(codes(d, "default")) != 0 && codes(d, "default")[rc.FindingTextOverflow].Code != "" {
		t.Errorf("default scene = %+v", d.Scenes[0])
	}
}

func TestFlagsAreComplete(t *testing.T) {
	flags := strings.Join(ProfileFlags(), " ")
	for _, want := range []string{"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--disable-quic", "--disable-default-apps", "--disable-gpu", "--headless", "--proxy-server=", "--host-resolver-rules="} {
		if !strings.Contains(flags, want) {
			t.Errorf("profile flags lack %s", want)
		}
	}
	if strings.Contains(flags, "no-sandbox") {
		t.Fatal("sandbox disabled in the profile")
	}
}

var _ = exec.Command

// TestUnprivileged runs the browser tests of the boundary again as an
// unprivileged user (user-namespace mode, delegated cgroup): a capture
// succeeds, Chromium's sandbox nests inside the attempt's user namespace,
// and the kernel boundary holds with the in-browser gate switched off.
func TestUnprivileged(t *testing.T) {
	rendertest.RequireBrowser(t)
	unpriv.RunTests(t, unpriv.Options{}, "TestCaptureReadyPage", "TestBrowserSandboxIsOn", "TestOtherOriginsAreBlocked",
		"TestKernelBoundaryHoldsWithoutTheBrowserGate")
}

// TestBrowserThatDiesAtStartIsStartedAgain: a browser start that fails at once is tried once
// more, in a fresh profile, within the attempt; the capture succeeds.
func TestBrowserThatDiesAtStartIsStartedAgain(t *testing.T) {
	h := setup(t)
	// The attempt sees the host's files except /tmp (its own tmpfs), where a clone of the
	// repository may live: the wrapper is copied to where the attempt's user can run it.
	script, err := os.ReadFile("testdata/fails-first-start.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "slidecells-browser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	wrapper := filepath.Join(dir, "fails-first-start.sh")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrapper, script, 0o755); err != nil {
		t.Fatal(err)
	}
	job := h.job(fixture.Ready, rc.OpPageCapture, small)
	job.Browser.Path = wrapper
	o := h.run(t, job, time.Minute)
	wantOK(t, o)
	if _, err := png.Decode(bytes.NewReader(o.artifacts[rc.ArtifactCapture])); err != nil {
		t.Fatal(err)
	}
}
