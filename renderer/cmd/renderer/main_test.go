package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"

	"slidecells/shared/testenv"

	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/rendertest"
	"slidecells/renderer/supervisor"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

const (
	token      = "preview-token-main-tests"
	credential = "service-credential-main-tests"
)

// writeCredential writes the service credential file into dir.
func writeCredential(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "credential")
	if err := os.WriteFile(p, []byte(credential+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "renderer")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func requireBrowser(t *testing.T) {
	t.Helper()
	testenv.MustHaveChromium(t)
}

func TestSIGTERMMidAttemptLeavesNoBrowser(t *testing.T) {
	requireBrowser(t)
	bin := build(t)
	fx := fixture.Start(token)
	defer fx.Close()
	signer, _ := ticket.GenerateSigner("k1")
	root, err := os.MkdirTemp("/tmp", "rs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)

	// runBinary reads the log through a synchronised buffer (a plain one raced its reader).
	base, cmd, logs, exited := runBinary(t, bin, []string{
		"PATH=/usr/bin:/bin",
		"RENDER_WORKER_ID=w-e2e",
		"RENDER_TICKET_PUBLIC_KEYS=" + signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=" + fx.BaseURL(),
		"RENDER_TEMP_ROOT=" + root,
		"RENDER_LISTEN_ADDR=127.0.0.1:0",
		"RENDER_CLEANUP_GRACE_SECONDS=1",
		"RENDER_MIN_FREE_DISK_MB=1",
		"RENDER_SERVICE_CREDENTIAL_FILE=" + writeCredential(t, t.TempDir()),
	})
	var caps rc.Capabilities
	getJSON(t, base+rc.APIRoot+"/capabilities", &caps)
	waitReady(t, base)
	submit(t, base, signer, caps, "e2e", fixture.Forever, 1)
	waitReceipt(t, base, "e2e", func(r rc.Receipt) bool { return r.Times.BrowserStartedAt != nil })
	if n := countUnder(root); n == 0 {
		t.Fatal("test setup: no attempt process found while running")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("renderer exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("renderer did not exit after SIGTERM\n%s", logs.String())
	}
	if n := countUnder(root); n != 0 {
		t.Fatalf("%d processes of the attempt survived the renderer", n)
	}
	if !strings.Contains(logs.String(), `"outcome":"failed"`) || strings.Contains(logs.String(), token) {
		t.Fatalf("logs lack the terminal outcome or leak the token:\n%s", logs.String())
	}
}

func TestInvalidConfigurationFailsStartup(t *testing.T) {
	bin := build(t)
	signer, _ := ticket.GenerateSigner("k1")
	good := []string{
		"PATH=/usr/bin:/bin", "RENDER_WORKER_ID=w1", "RENDER_TICKET_PUBLIC_KEYS=" + signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=http://127.0.0.1:9/preview/", "RENDER_TEMP_ROOT=/tmp/rcfg",
		"RENDER_SERVICE_CREDENTIAL_FILE=" + writeCredential(t, t.TempDir()),
	}
	cases := []struct {
		name  string
		env   []string
		wants []string
	}{
		{"old browser variable", append(good, "CHROME_PATH=/usr/bin/chromium", "PUPPETEER_EXECUTABLE_PATH=/x"), []string{"CHROME_PATH → RENDER_BROWSER_PATH", "PUPPETEER_EXECUTABLE_PATH → RENDER_BROWSER_PATH"}},
		{"missing worker id", without(good, "RENDER_WORKER_ID"), []string{"RENDER_WORKER_ID"}},
		{"bad key set", append(without(good, "RENDER_TICKET_PUBLIC_KEYS"), "RENDER_TICKET_PUBLIC_KEYS=k1:nope"), []string{"RENDER_TICKET_PUBLIC_KEYS"}},
		{"bad grace", append(good, "RENDER_CLEANUP_GRACE_SECONDS=soon"), []string{"RENDER_CLEANUP_GRACE_SECONDS"}},
		{"no service credential", without(good, "RENDER_SERVICE_CREDENTIAL_FILE"), []string{"RENDER_SERVICE_CREDENTIAL_FILE"}},
		{"relative temp root", append(without(good, "RENDER_TEMP_ROOT"), "RENDER_TEMP_ROOT=tmp"), []string{"RENDER_TEMP_ROOT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Env = tc.env
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v, want code 2\n%s", err, out)
			}
			for _, w := range tc.wants {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestKeygenPrintsAUsableKeyPair(t *testing.T) {
	bin := build(t)
	out, err := exec.Command(bin, "keygen", "k2026").Output()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("keygen output:\n%s", out)
	}
	ks, err := ticket.ParseKeySet(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	s, err := ticket.ParseSigner(lines[1])
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := s.Sign(&ticket.PreviewAccess{WorkspaceID: "w", SnapshotRef: "s", Origin: "http://h", Path: "/p", IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
	var pa ticket.PreviewAccess
	if err := ks.Verify(tok, time.Now(), &pa); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits until /readyz answers 200 (the launch probe passed).
func waitReady(t *testing.T, base string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "renderer ready", func() error {
		req, _ := http.NewRequest("GET", base+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+credential)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		return nil
	})
}

func without(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// countUnder counts processes whose command line or working directory lies
// under root.
func countUnder(root string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		if bytes.Contains(cmd, []byte(root)) || strings.HasPrefix(cwd, root) {
			n++
		}
	}
	return n
}

// runBinary starts the renderer binary with env and waits for its address.
func runBinary(t *testing.T, bin string, env []string) (base string, cmd *exec.Cmd, logs *testenv.Buffer, exited chan error) {
	t.Helper()
	cmd = exec.Command(bin)
	cmd.Env = env
	return startBinary(t, cmd)
}

// startBinary starts cmd, a renderer, and waits for its address.
func startBinary(t *testing.T, cmd *exec.Cmd) (base string, _ *exec.Cmd, logs *testenv.Buffer, exited chan error) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs = &testenv.Buffer{}
	exited = make(chan error, 1)
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			var line struct{ Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Addr != "" {
				addrCh <- line.Addr
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case a := <-addrCh:
		base = "http://" + a
	case err := <-exited:
		t.Fatalf("renderer exited early: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("renderer never logged its address")
	}
	return base, cmd, logs, exited
}

// TestStartAfterAKilledEpoch: an epoch killed with SIGKILL mid-attempt takes
// its browser with it (parent-death signal on the namespace's init); a
// process that survived in its cgroup (planted here, escaped by setsid) is
// killed by the next epoch's start-up before the old folders are removed,
// and the new epoch becomes ready.
func TestStartAfterAKilledEpoch(t *testing.T) {
	rendertest.RequireBrowser(t)
	rendertest.RequireIsolation(t)
	bin := build(t)
	fx := fixture.Start(token)
	defer fx.Close()
	signer, _ := ticket.GenerateSigner("k1")
	root, err := os.MkdirTemp("/tmp", "rk")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	worker := rendertest.Name("w-kill-")
	env := []string{
		"PATH=/usr/bin:/bin",
		"RENDER_WORKER_ID=" + worker,
		"RENDER_TICKET_PUBLIC_KEYS=" + signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=" + fx.BaseURL(),
		"RENDER_TEMP_ROOT=" + root,
		"RENDER_LISTEN_ADDR=127.0.0.1:0",
		"RENDER_MIN_FREE_DISK_MB=1",
		"RENDER_SERVICE_CREDENTIAL_FILE=" + writeCredential(t, t.TempDir()),
	}
	base, cmd, logs, exited := runBinary(t, bin, env)
	waitReady(t, base)
	var caps rc.Capabilities
	getJSON(t, base+rc.APIRoot+"/capabilities", &caps)
	submit(t, base, signer, caps, "kill", fixture.Forever, 1)
	waitReceipt(t, base, "kill", func(r rc.Receipt) bool { return r.Times.BrowserStartedAt != nil })
	_ = cmd.Process.Kill()
	<-exited
	// The kernel takes the attempt with the killed control process.
	waitNoProcessesUnder(t, root)
	// A leftover that survived anyway, in the killed epoch's cgroup.
	cg, err := supervisor.OpenCgroups("", "slidecells-renderer-"+worker)
	if err != nil {
		t.Fatal(err)
	}
	planted, err := cg.Create("a-planted", supervisor.CgroupLimits{})
	if err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("setsid", "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	if err := planted.Add(sleeper.Process.Pid); err != nil {
		t.Fatal(err)
	}
	sleeperDone := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(sleeperDone) }()
	if err := os.Mkdir(filepath.Join(root, "a-planted"), 0o700); err != nil {
		t.Fatal(err)
	}

	var old []string
	ents, _ := os.ReadDir(cg.Dirs()[0])
	for _, e := range ents {
		if e.IsDir() {
			old = append(old, filepath.Join(cg.Dirs()[0], e.Name()))
		}
	}
	if len(old) < 2 {
		t.Fatalf("test setup: expected the killed attempt's and the planted cgroup, found %v", old)
	}
	base2, cmd2, logs2, exited2 := runBinary(t, bin, env)
	defer func() {
		_ = cmd2.Process.Signal(syscall.SIGTERM)
		<-exited2
	}()
	// (The new epoch's launch probe may have a group of its own by now.)
	assertLeftoversKilled(t, sleeperDone, func() { _ = sleeper.Process.Kill() }, logs2, base2, append(old, filepath.Join(root, "a-planted"))...)
	_ = logs
}

// assertLeftoversKilled: a new epoch's start killed the processes an earlier one left (done
// closes; kill ends them when it did not), removed the folders and cgroups named by gone, said
// so in its log, and became ready.
func assertLeftoversKilled(t *testing.T, done <-chan struct{}, kill func(), logs *testenv.Buffer, base string, gone ...string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		kill()
		t.Fatalf("the leftovers of the killed epoch survived the new start\n%s", logs.String())
	}
	for _, p := range gone {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("leftover %s not removed: %v", p, err)
		}
	}
	if !strings.Contains(logs.String(), "killed processes left by an earlier epoch") {
		t.Fatalf("start-up did not report the leftovers:\n%s", logs.String())
	}
	waitReady(t, base)
}

// TestTLS: with RENDER_TLS_CERT_FILE and RENDER_TLS_KEY_FILE the control API
// speaks TLS only, and still wants the credential.
func TestTLS(t *testing.T) {
	rendertest.RequireBrowser(t)
	rendertest.RequireIsolation(t)
	bin := build(t)
	dir := t.TempDir()
	ca := testenv.NewCA(t, "127.0.0.1")
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certPath, ca.CertPEM, 0o600)
	_ = os.WriteFile(keyPath, ca.KeyPEM, 0o600)
	root, err := os.MkdirTemp("/tmp", "rtls")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	signer, _ := ticket.GenerateSigner("k1")
	base, cmd, _, exited := runBinary(t, bin, []string{
		"PATH=/usr/bin:/bin",
		"RENDER_WORKER_ID=" + rendertest.Name("w-tls-"),
		"RENDER_TICKET_PUBLIC_KEYS=" + signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=http://127.0.0.1:9/preview/",
		"RENDER_TEMP_ROOT=" + root,
		"RENDER_LISTEN_ADDR=127.0.0.1:0",
		"RENDER_MIN_FREE_DISK_MB=1",
		"RENDER_SERVICE_CREDENTIAL_FILE=" + writeCredential(t, dir),
		"RENDER_TLS_CERT_FILE=" + certPath,
		"RENDER_TLS_KEY_FILE=" + keyPath,
	})
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	https := "https://" + strings.TrimPrefix(base, "http://")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}, Timeout: 10 * time.Second}
	if resp, err := http.Get(base + "/livez"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered on a TLS listener")
		}
	}
	for _, c := range []struct {
		path, auth string
		want       int
	}{{"/livez", "", 200}, {rc.APIRoot + "/capabilities", "", 401}, {rc.APIRoot + "/capabilities", "Bearer " + credential, 200}} {
		req, _ := http.NewRequest("GET", https+c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("GET %s = %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
}

// TestProfileManifestFlow: `renderer profile` prints the profile a release
// writes as RENDER_PROFILE_MANIFEST; a renderer started with that manifest
// reports exactly the manifest's digest (what the cells compare with the
// same file), pins the preview host build, and an edited or incomplete
// manifest fails start-up.
func TestProfileManifestFlow(t *testing.T) {
	rendertest.RequireBrowser(t)
	rendertest.RequireIsolation(t)
	bin := build(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "profile", "--preview-host-build", "preview-host-1", "--image-digest", "sha256:feed")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("renderer profile: %v\n%s", err, stderr.String())
	}
	var want rc.RenderProfile
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("profile output: %v\n%s", err, out)
	}
	if want.PreviewHostBuild != "preview-host-1" || want.ImageDigest != "sha256:feed" || want.BrowserBuild == "" || want.ReadinessProtocol != rc.ReadinessProtocol {
		t.Fatalf("profile = %+v", want)
	}
	digest, _ := want.Digest()
	if !strings.Contains(stderr.String(), digest) {
		t.Fatalf("stderr does not name the digest %s: %s", digest, stderr.String())
	}
	manifest := filepath.Join(dir, "profile.json")
	if err := os.WriteFile(manifest, out, 0o644); err != nil {
		t.Fatal(err)
	}

	root, err := os.MkdirTemp("/tmp", "rp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	signer, _ := ticket.GenerateSigner("k1")
	env := []string{
		"PATH=/usr/bin:/bin",
		"RENDER_WORKER_ID=" + rendertest.Name("w-prof-"),
		"RENDER_TICKET_PUBLIC_KEYS=" + signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=http://127.0.0.1:9/preview/",
		"RENDER_TEMP_ROOT=" + root,
		"RENDER_LISTEN_ADDR=127.0.0.1:0",
		"RENDER_MIN_FREE_DISK_MB=1",
		"RENDER_SERVICE_CREDENTIAL_FILE=" + writeCredential(t, dir),
	}
	base, rcmd, _, exited := runBinary(t, bin, append(env, "RENDER_PROFILE_MANIFEST="+manifest))
	var caps rc.Capabilities
	getJSON(t, base+rc.APIRoot+"/capabilities", &caps)
	_ = rcmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if caps.EnvironmentDigest != digest {
		t.Fatalf("renderer reports %s, the manifest's digest is %s", caps.EnvironmentDigest, digest)
	}

	// Edited or incomplete manifests fail start-up, naming the fields.
	var fields map[string]any
	_ = json.Unmarshal(out, &fields)
	edit := func(f func(map[string]any)) string {
		m := map[string]any{}
		for k, v := range fields {
			m[k] = v
		}
		f(m)
		b, _ := json.Marshal(m)
		p := filepath.Join(t.TempDir(), "manifest.json")
		_ = os.WriteFile(p, b, 0o644)
		return p
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"other locale", edit(func(m map[string]any) { m["locale"] = "de-DE" }), "RENDER_PROFILE_MISMATCH: this instance does not match RENDER_PROFILE_MANIFEST in locale"},
		{"other browser", edit(func(m map[string]any) { m["browser_build"] = "Chromium 1.0" }), "in browser_build"},
		{"missing field", edit(func(m map[string]any) { delete(m, "fonts_digest") }), "RENDER_PROFILE_MANIFEST lacks fonts_digest"},
		{"unknown field", edit(func(m map[string]any) { m["gpu"] = "on" }), `unknown field "gpu"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := exec.Command(bin)
			c.Env = append(append([]string(nil), env...), "RENDER_PROFILE_MANIFEST="+tc.path)
			out, err := c.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v, want 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

func TestProfileRejectsBadFlags(t *testing.T) {
	bin := build(t)
	for _, args := range [][]string{{"profile", "extra"}, {"profile", "--preview-host-build", "a b"}, {"profile", "--nope"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Fatalf("%v: exit = %v, want 2\n%s", args, err, out)
		}
	}
}
