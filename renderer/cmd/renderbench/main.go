package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"slidecells/renderer/chromium"
	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/unpriv"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

const (
	token           = "bench-preview-token"
	benchCredential = "bench-service-credential"
)

// client sends the service credential with every control API call.
var client = &http.Client{Transport: authTransport{}}

type authTransport struct{}

func (authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+benchCredential)
	return http.DefaultTransport.RoundTrip(r)
}

func main() {
	bin := flag.String("renderer", "", "path to a built renderer binary (required)")
	n := flag.Int("n", 20, "samples per side")
	dsf := flag.Float64("dsf", 1, "device scale factor of both sides")
	waitStandby := flag.Bool("wait-standby", true, "before each renderer sample, wait until /readyz reports a ready standby (the idle slot's prepared browser), as a slot idle between attempts has; false posts at once and measures what the slot has then")
	unprivileged := flag.Bool("unprivileged", false, "run the renderer as an unprivileged user (user-namespace mode): prepares the user "+unpriv.User+", its subordinate IDs and a delegated cgroup; needs root")
	flag.Parse()
	if *bin == "" || *n < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*bin, *n, *dsf, *unprivileged, *waitStandby); err != nil {
		fmt.Fprintln(os.Stderr, "renderbench:", err)
		os.Exit(1)
	}
}

func run(bin string, n int, dsf float64, unprivileged, waitStandby bool) error {
	fx := fixture.Start(token)
	defer fx.Close()
	// The baseline browser cannot send the credential header.
	fx.StrictAuth = false
	signer, err := ticket.GenerateSigner("bench")
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("/tmp", "rb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o711); err != nil {
		return err
	}

	credPath := filepath.Join(root, "credential")
	if err := os.WriteFile(credPath, []byte(benchCredential+"\n"), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin)
	var extraEnv []string
	if unprivileged {
		h, cleanup, err := unpriv.Prepare(unpriv.Options{Name: fmt.Sprintf("slidecells-renderbench-%d", os.Getpid())})
		if err != nil {
			return err
		}
		defer func() {
			if err := cleanup(); err != nil {
				fmt.Fprintln(os.Stderr, "renderbench: delegated cgroup:", err)
			}
		}()
		copied, remove, err := unpriv.CopyExecutable(bin)
		if err != nil {
			return err
		}
		defer remove()
		for _, p := range []string{root, credPath} {
			if err := os.Chown(p, h.UID, h.GID); err != nil {
				return err
			}
		}
		cmd = h.Command(copied)
		extraEnv = h.Env()
	}
	cmd.Env = []string{
		"RENDER_SERVICE_CREDENTIAL_FILE=" + credPath,
		// Info, for the address line; the renderer logs a few lines
		// per attempt, which is part of what is measured.
		"PATH=/usr/bin:/bin", "LOG_LEVEL=info",
		"RENDER_WORKER_ID=w-bench",
		"RENDER_TICKET_PUBLIC_KEYS=" + signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=" + fx.BaseURL(),
		"RENDER_TEMP_ROOT=" + filepath.Join(root, "r"),
		"RENDER_LISTEN_ADDR=127.0.0.1:0",
		"RENDER_MIN_FREE_DISK_MB=1",
	}
	if v, ok := os.LookupEnv("RENDER_STANDBY_CPUS"); ok {
		// To compare a standby prepared at the attempt's CPU (0) with one
		// under a cap.
		cmd.Env = append(cmd.Env, "RENDER_STANDBY_CPUS="+v)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Addr != "" {
				addr <- l.Addr
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(60 * time.Second):
		return fmt.Errorf("renderer did not start")
	}
	// The launch probe must have passed before the renderer takes work.
	for i := 0; ; i++ {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i > 600 {
			return fmt.Errorf("renderer never became ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var caps rc.Capabilities
	if err := getJSON(base+rc.APIRoot+"/capabilities", &caps); err != nil {
		return err
	}
	vp := rc.Viewport{Width: 1280, Height: 720, DeviceScaleFactor: dsf}

	var ours, plain, toResult []time.Duration
	stages := map[string][]time.Duration{}
	loadBefore := loadavg()
	// One warm-up of each side so page cache effects hit both equally.
	if _, _, err := attempt(base, signer, caps, vp, 0); err != nil {
		return err
	}
	if _, err := baseline(fx.BaseURL()+"snapshots/"+fixture.Slide, root, dsf); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		if waitStandby {
			if err := standbyReady(base); err != nil {
				return err
			}
		}
		d, rec, err := attempt(base, signer, caps, vp, int64(i))
		if err != nil {
			return err
		}
		ours = append(ours, d)
		t := rec.Times
		if t.AcceptedAt != nil && t.WorkFinishedAt != nil {
			toResult = append(toResult, t.WorkFinishedAt.Sub(*t.AcceptedAt))
		}
		for _, st := range []struct {
			name     string
			from, to *time.Time
		}{
			{"1 admission → browser started", t.AcceptedAt, t.BrowserStartedAt},
			{"2 browser started → ready", t.BrowserStartedAt, t.ReadyAt},
			{"3 ready → result", t.ReadyAt, t.WorkFinishedAt},
			{"4 result → released", t.WorkFinishedAt, t.CleanupFinishedAt},
		} {
			if st.from != nil && st.to != nil {
				stages[st.name] = append(stages[st.name], st.to.Sub(*st.from))
			}
		}
		b, err := baseline(fx.BaseURL()+"snapshots/"+fixture.Slide, root, dsf)
		if err != nil {
			return err
		}
		plain = append(plain, b)
	}
	hwm, rss := memory(cmd.Process.Pid)
	mo, mp := median(ours), median(plain)
	mode := "root"
	if unprivileged {
		mode = "unprivileged (user-namespace mode)"
	}
	fmt.Printf("renderer page.capture 1280x720 dsf %g, n=%d, %d CPUs, %s, renderer %s\n", dsf, n, runtime.NumCPU(), caps.Profile.BrowserBuild, mode)
	fmt.Printf("load average (1, 5, 15 min): %s before, %s after\n", loadBefore, loadavg())
	fmt.Printf("| measure | median | p90 | min | max |\n|---|---|---|---|---|\n")
	fmt.Printf("| renderer POST → terminal receipt → artifact | %s | %s | %s | %s |\n", ms(mo), ms(pct(ours, 0.9)), ms(pct(ours, 0)), ms(pct(ours, 1)))
	if len(toResult) > 0 {
		fmt.Printf("| renderer admission → result (receipt times) | %s | %s | %s | %s |\n", ms(median(toResult)), ms(pct(toResult, 0.9)), ms(pct(toResult, 0)), ms(pct(toResult, 1)))
	}
	fmt.Printf("| chromium --headless --screenshot | %s | %s | %s | %s |\n", ms(mp), ms(pct(plain, 0.9)), ms(pct(plain, 0)), ms(pct(plain, 1)))
	fmt.Printf("\nratio of medians: %.2f (POST → artifact)", float64(mo)/float64(mp))
	if len(toResult) > 0 {
		fmt.Printf(", %.2f (admission → result)", float64(median(toResult))/float64(mp))
	}
	fmt.Println()
	fmt.Printf("\nrenderer stage medians (from receipt times):\n")
	names := make([]string, 0, len(stages))
	for k := range stages {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Printf("- %s: %s\n", k[2:], ms(median(stages[k])))
	}
	fmt.Printf("renderer control process: peak RSS (VmHWM) %.1f MiB, current RSS %.1f MiB\n", hwm, rss)
	iso, err := isolationCosts(base)
	if err != nil {
		return err
	}
	fmt.Printf("attempts by start (warm-up included): warm %d, cold %d; standby replacements: %d\n", iso.warm, iso.cold, iso.replaced)
	fmt.Printf("standby launch → ready (mean over %d standbys, from /metrics): %.0f ms\n", iso.launches, iso.mean["launch_probe"]*1000)
	fmt.Printf("\nisolation set-up per child start (mean over %d: attempts, warm-up and launch probe; from /metrics):\n", iso.count)
	for _, st := range []string{"isolation_cgroup", "isolation_namespaces", "isolation_idmap", "isolation_cgroup_join", "isolation_egress"} {
		fmt.Printf("- %s: %.2f ms\n", st, iso.mean[st]*1000)
	}
	return nil
}

type costs struct {
	count      int
	launches   int
	mean       map[string]float64
	warm, cold int
	replaced   int
}

// isolationCosts reads the stage histograms' sums and counts.
func isolationCosts(base string) (costs, error) {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return costs{}, err
	}
	defer resp.Body.Close()
	sum, cnt := map[string]float64{}, map[string]float64{}
	c := costs{mean: map[string]float64{}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		for _, m := range []struct {
			prefix string
			n      *int
		}{{`renderer_attempt_starts_total{start="warm"} `, &c.warm}, {`renderer_attempt_starts_total{start="cold"} `, &c.cold}, {`renderer_standby_replacements_total{`, nil}} {
			if rest, ok := strings.CutPrefix(l, m.prefix); ok {
				if m.n == nil {
					_, rest, _ = strings.Cut(rest, "} ")
				}
				v, _ := strconv.ParseFloat(rest, 64)
				if m.n == nil {
					c.replaced += int(v)
				} else {
					*m.n = int(v)
				}
			}
		}
		for _, kind := range []string{"_sum", "_count"} {
			prefix := "renderer_stage_duration_seconds" + kind + `{stage="`
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				name, val, _ := strings.Cut(rest, `"} `)
				v, _ := strconv.ParseFloat(val, 64)
				if kind == "_sum" {
					sum[name] = v
				} else {
					cnt[name] = v
				}
			}
		}
	}
	for k, n := range cnt {
		if n > 0 {
			c.mean[k] = sum[k] / n
		}
	}
	c.count = int(cnt["isolation_namespaces"])
	c.launches = int(cnt["launch_probe"])
	return c, sc.Err()
}

func attempt(base string, signer *ticket.Signer, caps rc.Capabilities, vp rc.Viewport, gen int64) (time.Duration, rc.Receipt, error) {
	now := time.Now()
	id := fmt.Sprintf("ra_bench_%d_%d", gen, now.UnixNano())
	req := &rc.ExecutionRequest{
		ContractVersion: rc.ContractVersion, Operation: rc.OpPageCapture,
		RequestID: "rr_bench", AttemptID: id, WorkspaceID: "ws_bench", TraceID: "tr_" + id,
		SnapshotRef: fixture.Slide, InputDigest: fixture.InputDigest, RenderProfileDigest: caps.EnvironmentDigest,
		Viewport: vp, DeadlineAt: now.Add(time.Minute), RemainingBudgetMS: 60000,
		PreviewAccess: rc.PreviewAccess{Token: token, ExpiresAt: now.Add(time.Minute)},
	}
	req.RequestDigest, _ = req.ComputeRequestDigest()
	var err error
	req.AdmissionTicket, err = signer.Sign(&ticket.Admission{
		RequestID: req.RequestID, AttemptID: id, RequestDigest: req.RequestDigest, WorkspaceID: req.WorkspaceID,
		WorkerID: caps.WorkerID, Epoch: caps.Epoch, SlotGeneration: gen + 1,
		IssuedAt: now, AcceptBy: now.Add(time.Minute), StopBy: now.Add(2 * time.Minute),
	})
	if err != nil {
		return 0, rc.Receipt{}, err
	}
	body, _ := json.Marshal(req)
	start := time.Now()
	resp, err := client.Post(base+rc.APIRoot+"/executions", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, rc.Receipt{}, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return 0, rc.Receipt{}, fmt.Errorf("POST = %d", resp.StatusCode)
	}
	var rec rc.Receipt
	for {
		if err := getJSON(base+rc.APIRoot+"/executions/"+id, &rec); err != nil {
			return 0, rc.Receipt{}, err
		}
		if rec.State == rc.StateTerminal {
			break
		}
		// Polling is how a coordinator learns the outcome; 10 ms
		// bounds the error this adds to the measurement.
		time.Sleep(10 * time.Millisecond)
	}
	if rec.Outcome != rc.OutcomeSucceeded {
		return 0, rc.Receipt{}, fmt.Errorf("attempt %s: %+v", rec.Outcome, rec.Error)
	}
	resp, err = client.Get(base + rc.APIRoot + "/executions/" + id + "/artifacts/capture.png")
	if err != nil {
		return 0, rc.Receipt{}, err
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK || n != rec.Result.Artifacts[0].Bytes {
		return 0, rc.Receipt{}, fmt.Errorf("artifact = %d, %d bytes", resp.StatusCode, n)
	}
	return d, rec, nil
}

// baseline runs the plain headless screenshot of the same page, with a fresh
// profile, under the same unprivileged user the renderer's child uses.
func baseline(url, root string, dsf float64) (time.Duration, error) {
	dir, err := os.MkdirTemp(root, "b")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(chromium.DefaultBrowserPath, "--headless", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+filepath.Join(dir, "p"), "--screenshot="+filepath.Join(dir, "s.png"),
		"--window-size=1280,720", fmt.Sprintf("--force-device-scale-factor=%g", dsf), "--hide-scrollbars", url)
	cmd.Env = []string{"HOME=" + dir, "TMPDIR=" + dir, "PATH=/usr/bin:/bin"}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return 0, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return 0, err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("baseline: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "s.png")); err != nil {
		return 0, fmt.Errorf("baseline wrote no screenshot:\n%s", out)
	}
	return d, nil
}

func memory(pid int) (hwm, rss float64) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmHWM:":
			hwm = kb / 1024
		case "VmRSS:":
			rss = kb / 1024
		}
	}
	return hwm, rss
}

// standbyReady waits (bounded) until /readyz reports a ready standby.
func standbyReady(base string) error {
	for i := 0; i < 1200; i++ {
		var body struct {
			Standby struct{ State string } `json:"standby"`
		}
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && body.Standby.State == "ready" {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no ready standby within a minute")
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func getJSON(url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s = %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func median(ds []time.Duration) time.Duration { return pct(ds, 0.5) }

func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
