package render

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"slidecells/shared/config"
	"slidecells/shared/pgserver"
	"slidecells/shared/testenv"
	"slidecells/shared/ticket"
)

// cellEnv adds the cell's other required render settings.
func cellEnv(env map[string]string) {
	env["RENDER_PROFILE_MANIFEST"] = filepath.Join("..", "..", "deploy", "k8s", "components", "release", "render-profile.json")
	env["RENDER_RUNTIME_NAVIGATION_BASE_URL"] = "http://127.0.0.1:9/preview"
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A renderer given a certificate of the cell's private CA (RENDER_TLS_CERT_FILE,
// RENDER_TLS_KEY_FILE) serves its control API over TLS only: the cell's client configured with
// that CA (RENDER_WORKERS_CA_FILE) reaches it with the service credential; a client without
// the CA is refused at the handshake, before any credential is sent; plain HTTP gets no answer.
func TestRendererControlOverTLS(t *testing.T) {
	bin := rendererBinary(t)
	dir := t.TempDir()
	ca := testenv.NewCA(t, "127.0.0.1")
	const cred = "tls-test-credential-0123456789"
	credFile := writeFile(t, dir, "credential", []byte(cred+"\n"))
	caFile := writeFile(t, dir, "ca.crt", ca.CAPEM)
	signer, err := ticket.GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := pgserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(p)
	id := "w-tls-" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"RENDER_WORKER_ID="+id,
		"RENDER_LISTEN_ADDR=127.0.0.1:"+port,
		"RENDER_TICKET_PUBLIC_KEYS="+signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL=http://127.0.0.1:9/preview/",
		"RENDER_TEMP_ROOT="+shortTemp(t),
		"RENDER_MIN_FREE_DISK_MB=1",
		"RENDER_SERVICE_CREDENTIAL_FILE="+credFile,
		"RENDER_TLS_CERT_FILE="+writeFile(t, dir, "tls.crt", ca.CertPEM),
		"RENDER_TLS_KEY_FILE="+writeFile(t, dir, "tls.key", ca.KeyPEM),
	)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	// The cell's configuration, read as the cell reads it.
	env := map[string]string{
		"RENDER_WORKERS_CONFIG":          `[{"worker_id":"` + id + `","url":"https://127.0.0.1:` + port + `"}]`,
		"RENDER_SERVICE_CREDENTIAL_FILE": credFile,
		"RENDER_WORKERS_CA_FILE":         caFile,
	}
	cellEnv(env)
	l := &config.Loader{Getenv: func(k string) string { return env[k] }}
	cfg := Load(l, l.Getenv, signer)
	if err := l.Err(); err != nil || cfg == nil || cfg.WorkersCA == nil {
		t.Fatalf("config: %v", err)
	}
	base := cfg.Workers[0].URL
	withCA := newClientTrusting(cfg.Credential, cfg.WorkersCA)
	testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "the renderer answering over TLS", func() error {
		select {
		case <-exited:
			t.Fatalf("renderer exited: %s", log.String())
		default:
		}
		caps, a, err := withCA.capabilities(context.Background(), base)
		if err != nil {
			return err
		}
		if a.status != http.StatusOK || caps.WorkerID != id {
			t.Fatalf("capabilities over TLS: status %d, worker %q", a.status, caps.WorkerID)
		}
		return nil
	})

	// Without the CA: refused at the handshake (unknown authority).
	_, _, err = newClient(cfg.Credential).capabilities(context.Background(), base)
	var unknown x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &unknown) {
		t.Fatalf("a client without the CA: %v, want an unknown-authority refusal", err)
	}
	// Plain HTTP on the TLS port is not served.
	resp, err := http.Get("http://127.0.0.1:" + port + "/livez")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the TLS listener")
		}
	}
}

// RENDER_WORKERS_CA_FILE: a bundle without a certificate fails start-up, and with a CA every
// worker must be https (the credential never crosses in clear).
func TestWorkersCAConfig(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t, "renderer-0.renderer")
	signer, _ := ticket.GenerateSigner("k1")
	cred := writeFile(t, dir, "credential", []byte("config-test-credential-0123456789\n"))
	for _, tc := range []struct {
		name, url, ca, wantErr string
	}{
		{"https with the CA", "https://renderer-0.renderer:8093", writeFile(t, dir, "ca.crt", ca.CAPEM), ""},
		{"http with the CA", "http://renderer-0.renderer:8093", filepath.Join(dir, "ca.crt"), "is not https although RENDER_WORKERS_CA_FILE is set"},
		{"no certificate in the bundle", "https://renderer-0.renderer:8093", writeFile(t, dir, "empty.crt", []byte("not pem")), "RENDER_WORKERS_CA_FILE"},
		{"missing bundle", "https://renderer-0.renderer:8093", filepath.Join(dir, "absent.crt"), "RENDER_WORKERS_CA_FILE"},
		{"http without a CA (make run on loopback)", "http://127.0.0.1:8093", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{
				"RENDER_WORKERS_CONFIG":          `[{"worker_id":"w1","url":"` + tc.url + `"}]`,
				"RENDER_SERVICE_CREDENTIAL_FILE": cred,
				"RENDER_WORKERS_CA_FILE":         tc.ca,
			}
			cellEnv(env)
			l := &config.Loader{Getenv: func(k string) string { return env[k] }}
			cfg := Load(l, l.Getenv, signer)
			err := l.Err()
			if tc.wantErr == "" {
				if err != nil || cfg == nil || (tc.ca != "") != (cfg.WorkersCA != nil) {
					t.Fatalf("config: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
