package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"slidecells/cell/preview"
	"slidecells/cell/snapshot"
	"slidecells/shared/digest"
	"slidecells/shared/ids"
	"slidecells/shared/pgserver"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
	"slidecells/shared/ticket"
)

func TestLoadNamesEveryBadSetting(t *testing.T) {
	for k, v := range map[string]string{
		"PREVIEW_LISTEN_ADDR":             "nowhere",
		"PREVIEW_BACKEND_URL":             "ftp://cell",
		"PREVIEW_SERVICE_CREDENTIAL_FILE": filepath.Join(t.TempDir(), "missing"),
		"RENDER_RUNTIME_ASSET_BASE_URL":   "https://cdn.example/x?y=1",
		"RENDER_PLATFORM_ASSET_BASE_URL":  "/relative",
		"PREVIEW_OBJECT_CACHE_MB":         "0",
		"PREVIEW_PLATFORM_ASSET_DIR":      filepath.Join(t.TempDir(), "nope"),
		"PREVIEW_BACKEND_CA_FILE":         filepath.Join(t.TempDir(), "no-ca.crt"),
	} {
		t.Setenv(k, v)
	}
	_, err := load()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, name := range []string{"PREVIEW_LISTEN_ADDR", "PREVIEW_BACKEND_URL", "PREVIEW_SERVICE_CREDENTIAL_FILE", "RENDER_RUNTIME_ASSET_BASE_URL",
		"RENDER_PLATFORM_ASSET_BASE_URL", "PREVIEW_OBJECT_CACHE_MB", "PREVIEW_PLATFORM_ASSET_DIR", "PREVIEW_BACKEND_CA_FILE"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

// binaries builds cmd/preview (or takes it from SLIDECELLS_BIN) and a runtime for it.
func binaries(t *testing.T) (bin, runtimeDir string) {
	t.Helper()
	dir := os.Getenv("SLIDECELLS_BIN")
	bin = filepath.Join(dir, "preview")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if dir == "" {
		bin = filepath.Join(t.TempDir(), "preview")
		cmd := exec.Command("go", "build", "-o", bin, "./cell/cmd/preview")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	runtimeDir = filepath.Join(t.TempDir(), "rt")
	cmd := exec.Command(bin, "build-runtime", "-src", filepath.Join(root, "cell/preview/runtime"), "-out", runtimeDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-runtime (needs `make npm`): %v\n%s", err, out)
	}
	return bin, runtimeDir
}

func credentialFile(t *testing.T, cred string) string {
	p := filepath.Join(t.TempDir(), "credential")
	if err := os.WriteFile(p, []byte(cred+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The preview host as a process: it refuses to start without its runtime, and with it serves a
// document from its cell's backend interface, then stops on SIGTERM.
func TestProcess(t *testing.T) {
	bin, rtDir := binaries(t)
	const cred = "process-test-preview-credential"

	out, err := exec.Command(bin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "PREVIEW_BACKEND_URL") {
		t.Fatalf("start without configuration: %v %s", err, out)
	}
	noRuntime := exec.Command(bin)
	noRuntime.Env = append(os.Environ(), "PREVIEW_BACKEND_URL=http://127.0.0.1:1", "PREVIEW_SERVICE_CREDENTIAL_FILE="+credentialFile(t, cred),
		"PREVIEW_RUNTIME_DIR="+t.TempDir())
	out, err = noRuntime.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "preview runtime files are missing") || !strings.Contains(string(out), "make build") {
		t.Fatalf("start without runtime files: %v %s", err, out)
	}

	// A cell: its blob store with one snapshot, and the backend interface.
	bucket, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	signer, _ := ticket.GenerateSigner("proc-1")
	ws := ids.New(ids.Workspace)
	m := writeSnapshot(t, bucket, ws)
	cell := httptest.NewServer(preview.NewBackend(preview.BackendConfig{Bucket: bucket, Credentials: []string{cred},
		Keys: func() []ticket.PublicKey { return []ticket.PublicKey{signer.PublicKey()} }}))
	defer cell.Close()

	port, err := pgserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var logs testenv.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PREVIEW_LISTEN_ADDR="+addr, "PREVIEW_BACKEND_URL="+cell.URL,
		"PREVIEW_SERVICE_CREDENTIAL_FILE="+credentialFile(t, cred), "PREVIEW_RUNTIME_DIR="+rtDir)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	base := "http://" + addr
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if i > 300 {
			t.Fatalf("host not ready: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	tok, _ := signer.Sign(&ticket.PreviewAccess{WorkspaceID: ws, SnapshotRef: m.Ref, Origin: base, Path: "/snapshots/" + m.Ref,
		IssuedAt: time.Now().Add(-time.Second), ExpiresAt: time.Now().Add(time.Minute)})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/snapshots/"+m.Ref, nil)
	req.Header.Set(rc.PreviewAccessHeader, tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ref":"`+m.Ref+`"`) {
		t.Fatalf("document: %d %.200s", resp.StatusCode, body)
	}
	i := strings.Index(string(body), `"react":"`)
	if i < 0 {
		t.Fatalf("no import map: %.400s", body)
	}
	reactURL := strings.SplitN(string(body)[i+len(`"react":"`):], `"`, 2)[0]
	if r, err := http.Get(base + reactURL); err != nil || r.StatusCode != 200 || r.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("runtime file %s: %v %v", reactURL, err, r)
	}
	if strings.Contains(logs.String(), tok) {
		t.Fatal("the log holds the token")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

func writeSnapshot(t *testing.T, b *gcblob.Bucket, ws string) *snapshot.Manifest {
	t.Helper()
	put := func(data []byte, ctype string) snapshot.Object {
		d := digest.Bytes(data)
		o := snapshot.Object{Key: "ws/" + ws + "/objects/" + strings.TrimPrefix(d, "sha256:"), Digest: d, Bytes: int64(len(data)), ContentType: ctype}
		if err := b.WriteAll(context.Background(), o.Key, data, nil); err != nil {
			t.Fatal(err)
		}
		return o
	}
	m := &snapshot.Manifest{Schema: snapshot.Schema, Ref: ids.New(ids.Snapshot), WorkspaceID: ws, Owner: "test",
		Entity: snapshot.Entity{Kind: snapshot.KindPage}, FileType: "tsx", Scenes: []string{"default"},
		Module:    put([]byte(`import {jsx} from "react/jsx-runtime"; export default function P() { return jsx("p", {children: "hi"}); }`), "text/javascript"),
		Styles:    put([]byte(":root{}"), "text/css"),
		HostBuild: preview.HostBuild, Canvas: snapshot.Canvas{Width: 320, Height: 200, DeviceScaleFactor: 1},
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	d, err := m.ComputeInputDigest()
	if err != nil {
		t.Fatal(err)
	}
	m.InputDigest = d
	if err := snapshot.Save(context.Background(), b, m); err != nil {
		t.Fatal(err)
	}
	return m
}
