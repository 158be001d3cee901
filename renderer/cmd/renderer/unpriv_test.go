package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
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

	"slidecells/shared/testenv"

	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/rendertest"
	"slidecells/renderer/internal/unpriv"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// unprivHost prepares the unprivileged user and a delegated cgroup, and
// copies the built binary where that user (and the attempt users) can
// execute it.
func unprivHost(t *testing.T) (*unpriv.Host, string) {
	t.Helper()
	requireBrowser(t)
	testenv.MustHaveRoot(t, "preparing an unprivileged user and a delegated cgroup")
	h, cleanup, err := unpriv.Prepare(unpriv.Options{Name: rendertest.Name("slidecells-unpriv-bin-")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Errorf("delegated cgroup: %v", err)
		}
	})
	bin, remove, err := unpriv.CopyExecutable(build(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return h, bin
}

// unprivEnv is a complete configuration for the unprivileged renderer: its
// credential file belongs to the user, its temp root does not exist yet.
func unprivEnv(t *testing.T, h *unpriv.Host, previewBase string, signer *ticket.Signer) (env []string, root string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "ru")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cred := writeCredential(t, dir)
	for _, p := range []string{dir, cred} {
		if err := os.Chown(p, h.UID, h.GID); err != nil {
			t.Fatal(err)
		}
	}
	root = filepath.Join(dir, "r")
	env = append([]string{
		"PATH=/usr/bin:/bin",
		"RENDER_WORKER_ID=" + rendertest.Name("w-unpriv-"),
		"RENDER_TICKET_PUBLIC_KEYS=" + signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=" + previewBase,
		"RENDER_TEMP_ROOT=" + root,
		"RENDER_LISTEN_ADDR=127.0.0.1:0",
		"RENDER_CLEANUP_GRACE_SECONDS=1",
		"RENDER_MIN_FREE_DISK_MB=1",
		"RENDER_SERVICE_CREDENTIAL_FILE=" + cred,
	}, h.Env()...)
	return env, root
}

// submit posts a page.capture of ref as attempt id, generation gen.
func submit(t *testing.T, base string, signer *ticket.Signer, caps rc.Capabilities, id, ref string, gen int64) {
	t.Helper()
	now := time.Now()
	req := &rc.ExecutionRequest{
		ContractVersion: rc.ContractVersion, Operation: rc.OpPageCapture,
		RequestID: "rr_" + id, AttemptID: "ra_" + id, WorkspaceID: "ws_unpriv", TraceID: "tr_" + id,
		SnapshotRef: ref, InputDigest: fixture.InputDigest, RenderProfileDigest: caps.EnvironmentDigest,
		Viewport:   rc.Viewport{Width: 320, Height: 180, DeviceScaleFactor: 2},
		DeadlineAt: now.Add(time.Minute), RemainingBudgetMS: 60000,
		PreviewAccess: rc.PreviewAccess{Token: token, ExpiresAt: now.Add(time.Minute)},
	}
	req.RequestDigest, _ = req.ComputeRequestDigest()
	req.AdmissionTicket, _ = signer.Sign(&ticket.Admission{
		RequestID: req.RequestID, AttemptID: req.AttemptID, RequestDigest: req.RequestDigest, WorkspaceID: req.WorkspaceID,
		WorkerID: caps.WorkerID, Epoch: caps.Epoch, SlotGeneration: gen, IssuedAt: now, AcceptBy: now.Add(time.Minute), StopBy: now.Add(2 * time.Minute),
	})
	body, _ := json.Marshal(req)
	post, _ := http.NewRequest("POST", base+rc.APIRoot+"/executions", bytes.NewReader(body))
	post.Header.Set("Authorization", "Bearer "+credential)
	resp, err := http.DefaultClient.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d %s", resp.StatusCode, b)
	}
}

// waitNoProcessesUnder waits until no attempt process is left under root: the kernel takes an
// attempt with its killed control process.
func waitNoProcessesUnder(t *testing.T, root string) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, 10*time.Millisecond, "no attempt process under "+root, func() error {
		if left := rendertest.ProcessesUnder(root); len(left) > 0 {
			return fmt.Errorf("attempt processes survived the killed control process: %v", left)
		}
		return nil
	})
}

// waitReceipt polls the receipt of attempt id until done says so.
func waitReceipt(t *testing.T, base, id string, done func(rc.Receipt) bool) rc.Receipt {
	t.Helper()
	var rec rc.Receipt
	testenv.Eventually(t, time.Minute, 20*time.Millisecond, "the receipt's state", func() error {
		rec = rc.Receipt{}
		getJSON(t, base+rc.APIRoot+"/executions/ra_"+id, &rec)
		if !done(rec) {
			return fmt.Errorf("receipt %+v", rec)
		}
		return nil
	})
	return rec
}

// attemptUsers are the user IDs of the processes under root.
func attemptUsers(t *testing.T, root string) map[int]bool {
	t.Helper()
	users := map[int]bool{}
	for _, p := range rendertest.ProcessesUnder(root) {
		pid, _, _ := strings.Cut(p, ":")
		st, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[0] == "Uid:" {
				uid, _ := strconv.Atoi(f[1])
				users[uid] = true
			}
		}
	}
	return users
}

// TestUnprivilegedRenderer: the renderer binary run as an unprivileged user
// (a system user with a subordinate ID range in /etc/subuid and /etc/subgid,
// Debian's uidmap helpers, a cgroup delegated to it that it runs in)
// chooses the user-namespace mode, passes its launch probe, captures a page
// (every attempt process is a user of the range, not the control process's
// user), and on SIGTERM mid-attempt leaves no process behind.
func TestUnprivilegedRenderer(t *testing.T) {
	h, bin := unprivHost(t)
	fx := fixture.Start(token)
	defer fx.Close()
	signer, _ := ticket.GenerateSigner("k1")
	env, root := unprivEnv(t, h, fx.BaseURL(), signer)
	cmd := h.Command(bin)
	cmd.Env = env
	base, cmd, logs, exited := startBinary(t, cmd)
	if !strings.Contains(logs.String(), `"isolation_mode":"user-namespace"`) {
		t.Fatalf("not in user-namespace mode:\n%s", logs.String())
	}
	waitReady(t, base)
	var caps rc.Capabilities
	getJSON(t, base+rc.APIRoot+"/capabilities", &caps)

	submit(t, base, signer, caps, "capture", fixture.Ready, 1)
	rec := waitReceipt(t, base, "capture", func(r rc.Receipt) bool { return r.State == rc.StateTerminal })
	if rec.Outcome != rc.OutcomeSucceeded || rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("capture = %+v %+v\n%s", rec, rec.Error, logs.String())
	}
	req, _ := http.NewRequest("GET", base+rc.APIRoot+"/executions/ra_capture/artifacts/capture.png", nil)
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.DecodeConfig(resp.Body)
	resp.Body.Close()
	if err != nil || img.Width != 640 || img.Height != 360 {
		t.Fatalf("capture.png: %v %dx%d", err, img.Width, img.Height)
	}

	submit(t, base, signer, caps, "forever", fixture.Forever, 2)
	waitReceipt(t, base, "forever", func(r rc.Receipt) bool { return r.Times.BrowserStartedAt != nil })
	users := attemptUsers(t, root)
	if len(users) != 1 {
		t.Fatalf("attempt processes run as %v, want one user", users)
	}
	for uid := range users {
		if uid < unpriv.First || uid > unpriv.Last || uid == h.UID {
			t.Fatalf("attempt runs as %d, want a user of %d-%d other than the control process's %d", uid, unpriv.First, unpriv.Last, h.UID)
		}
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
	if left := rendertest.ProcessesUnder(root); len(left) != 0 {
		t.Fatalf("processes of the attempt survived the renderer: %v", left)
	}
}

// TestUnprivilegedStartAfterAKilledEpoch: unprivileged too, a new epoch
// proves the earlier epoch's processes gone before it serves: the killed
// control process takes its attempt with it, and what survived anyway in the
// earlier epoch's cgroups (here: a process of the renderer's user and one in
// a user namespace of its own, both escaped by setsid) is killed by the next
// start-up.
func TestUnprivilegedStartAfterAKilledEpoch(t *testing.T) {
	h, bin := unprivHost(t)
	fx := fixture.Start(token)
	defer fx.Close()
	signer, _ := ticket.GenerateSigner("k1")
	env, root := unprivEnv(t, h, fx.BaseURL(), signer)
	worker := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RENDER_WORKER_ID="); ok {
			worker = v
		}
	}
	cmd := h.Command(bin)
	cmd.Env = env
	base, cmd, logs, exited := startBinary(t, cmd)
	waitReady(t, base)
	var caps rc.Capabilities
	getJSON(t, base+rc.APIRoot+"/capabilities", &caps)
	submit(t, base, signer, caps, "kill", fixture.Forever, 1)
	waitReceipt(t, base, "kill", func(r rc.Receipt) bool { return r.Times.BrowserStartedAt != nil })
	_ = cmd.Process.Kill()
	<-exited
	waitNoProcessesUnder(t, root)
	// Plant leftovers in the killed epoch's cgroups (below the renderer's
	// group in each delegated hierarchy), as the renderer's user.
	var planted []string
	for _, d := range h.Cgroups {
		p := filepath.Join(d, "slidecells-renderer-"+worker, "a-planted")
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatalf("%v (the killed epoch's cgroup should still be there)", err)
		}
		planted = append(planted, p)
	}
	var script strings.Builder
	for _, p := range planted {
		fmt.Fprintf(&script, "echo $$ > %s/cgroup.procs || exit 97\n", p)
	}
	script.WriteString("exec /usr/bin/setpriv --reuid=" + strconv.Itoa(h.UID) + " --regid=" + strconv.Itoa(h.GID) +
		" --init-groups -- sh -c 'setsid sleep 300 & setsid unshare --user sleep 301 & wait'\n")
	sleepers := exec.Command("/bin/sh", "-c", script.String())
	if err := sleepers.Start(); err != nil {
		t.Fatal(err)
	}
	sleepersDone := make(chan struct{})
	go func() { _ = sleepers.Wait(); close(sleepersDone) }()
	testenv.Eventually(t, 5*time.Second, 10*time.Millisecond, "test setup: planted processes in "+planted[0], func() error {
		if b, _ := os.ReadFile(filepath.Join(planted[0], "cgroup.procs")); len(strings.Fields(string(b))) < 3 {
			return fmt.Errorf("cgroup.procs %q", b)
		}
		return nil
	})
	cmd2 := h.Command(bin)
	cmd2.Env = env
	base2, cmd2, logs2, exited2 := startBinary(t, cmd2)
	defer func() {
		_ = cmd2.Process.Signal(syscall.SIGTERM)
		<-exited2
	}()
	assertLeftoversKilled(t, sleepersDone, func() { _ = sleepers.Process.Kill() }, logs2, base2, planted...)
	_ = logs
}

// TestUnprivilegedStartupNamesWhatIsMissing: unprivileged, start-up fails
// with status 2 and says what the host lacks: no weaker mode.
func TestUnprivilegedStartupNamesWhatIsMissing(t *testing.T) {
	h, bin := unprivHost(t)
	signer, _ := ticket.GenerateSigner("k1")
	env, _ := unprivEnv(t, h, "http://127.0.0.1:9/preview/", signer)
	noCgroup := *h
	noCgroup.Cgroups = nil
	nnp := *h
	nnp.NoNewPrivs = true
	noSetuid := *h
	noSetuid.BoundingSetDrop = "-setuid"
	cases := []struct {
		name string
		host *unpriv.Host
		env  []string
		want string
	}{
		{"range outside the user's subordinate IDs", h, append(without(env, "RENDER_CHILD_UID_RANGE"), "RENDER_CHILD_UID_RANGE=400000-400999"),
			"/etc/subuid gives user " + unpriv.User + " no subordinate user IDs covering 400000-400999"},
		{"no uidmap helpers", h, append(without(env, "PATH"), "PATH=/nonexistent"), "newuidmap not found in PATH (install Debian's uidmap package)"},
		{"no_new_privs", &nnp, env, "no_new_privs is set on the control process"},
		{"no CAP_SETUID in the bounding set", &noSetuid, env, "CAP_SETUID is not in the control process's capability bounding set"},
		{"no delegated cgroup", &noCgroup, env, "running unprivileged: the directory RENDER_CGROUP_PARENT names, or the renderer's own cgroup, must be owned by user " + strconv.Itoa(h.UID)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := tc.host.Command(bin)
			cmd.Env = tc.env
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v, want code 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}
