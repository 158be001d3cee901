package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"slidecells/shared/ticket"
)

func TestLoadNamesEveryBadSetting(t *testing.T) {
	for k, v := range map[string]string{
		"CELL_ID":                    "Cell_A",
		"CELL_LISTEN_ADDR":           "nowhere",
		"CELL_DATABASE_URL":          "",
		"DIRECTORY_DATABASE_URL":     "postgres://x/y",
		"CELL_BLOB_URL":              "ftp://bucket",
		"CELL_RENDERER_URLS":         "http://127.0.0.1:1",
		"RENDER_WORKERS_CONFIG":      `[{"worker_id":"r1","url":"ftp://x"}]`,
		"CELL_IDEMPOTENCY_RETENTION": "1h",
		"CELL_DIRECTORY_CACHE_TTL":   "soon",
	} {
		t.Setenv(k, v)
	}
	_, err := load()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, name := range []string{"CELL_ID", "CELL_LISTEN_ADDR", "CELL_DATABASE_URL", "CELL_BLOB_URL", "CELL_RENDERER_URLS", "RENDER_WORKERS_CONFIG",
		"RENDER_PROFILE_MANIFEST", "RENDER_SERVICE_CREDENTIAL_FILE", "RENDER_RUNTIME_NAVIGATION_BASE_URL", "RENDER_TICKET_SIGNING_KEY_FILE",
		"CELL_IDEMPOTENCY_RETENTION", "CELL_DIRECTORY_CACHE_TTL"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Setenv("CELL_ID", "cell-a")
	t.Setenv("CELL_DATABASE_URL", "postgres://127.0.0.1/cell")
	t.Setenv("DIRECTORY_DATABASE_URL", "postgres://127.0.0.1/directory")
	t.Setenv("CELL_BLOB_URL", "file:///tmp/blobs")
	s, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if s.ListenAddr != "127.0.0.1:8081" || s.IdemRetention.Hours() != 24 || s.Render != nil {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestLoadPreviewAndTicketSettings(t *testing.T) {
	t.Setenv("CELL_ID", "cell-a")
	t.Setenv("CELL_DATABASE_URL", "postgres://127.0.0.1/cell")
	t.Setenv("DIRECTORY_DATABASE_URL", "postgres://127.0.0.1/directory")
	t.Setenv("CELL_BLOB_URL", "file:///tmp/blobs")
	dir := t.TempDir()
	creds := filepath.Join(dir, "preview-credential")
	if err := os.WriteFile(creds, []byte("current-preview-credential\nnext-preview-credential\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PREVIEW_SERVICE_CREDENTIAL_FILE", creds)
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "RENDER_TICKET_SIGNING_KEY_FILE") {
		t.Fatalf("preview credential without a signing key: %v", err)
	}
	signer, _ := ticket.GenerateSigner("k1")
	key := filepath.Join(dir, "ticket-signer")
	if err := os.WriteFile(key, []byte(signer.EncodePrivate()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RENDER_TICKET_SIGNING_KEY_FILE", key)
	s, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if s.TicketSigner == nil || s.TicketSigner.PublicKey().String() != signer.PublicKey().String() ||
		len(s.PreviewCredentials) != 2 || s.PreviewCredentials[1] != "next-preview-credential" {
		t.Fatalf("settings: %+v", s)
	}
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "RENDER_TICKET_SIGNING_KEY_FILE") || strings.Contains(err.Error(), "not a key") {
		t.Fatalf("bad signing key: %v", err)
	}
}

// The internal TLS listener's three settings go together.
func TestLoadInternalTLSSettingsGoTogether(t *testing.T) {
	t.Setenv("CELL_ID", "cell-a")
	t.Setenv("CELL_DATABASE_URL", "postgres://127.0.0.1/cell")
	t.Setenv("DIRECTORY_DATABASE_URL", "postgres://127.0.0.1/directory")
	t.Setenv("CELL_BLOB_URL", "file:///tmp/blobs")
	t.Setenv("CELL_INTERNAL_TLS_LISTEN_ADDR", ":8443")
	if _, err := load(); err == nil || !strings.Contains(err.Error(), "CELL_INTERNAL_TLS_LISTEN_ADDR") {
		t.Fatalf("a TLS listener without a certificate: %v", err)
	}
	t.Setenv("CELL_TLS_CERT_FILE", "/etc/tls/tls.crt")
	t.Setenv("CELL_TLS_KEY_FILE", "/etc/tls/tls.key")
	s, err := load()
	if err != nil || s.InternalTLSAddr != ":8443" || s.TLSKeyFile != "/etc/tls/tls.key" {
		t.Fatalf("TLS settings: %v %+v", err, s.InternalTLSAddr)
	}
}
