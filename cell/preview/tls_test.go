package preview

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"slidecells/shared/testenv"
)

// privateCA is a cell's private CA with one server certificate for 127.0.0.1.
func privateCA(t *testing.T) (*x509.CertPool, tls.Certificate) {
	ca := testenv.NewCA(t, "127.0.0.1")
	return ca.Pool, ca.Cert
}

// The preview host's pulls over TLS (PREVIEW_BACKEND_CA_FILE): a puller trusting the cell's
// private CA reads the key set and a snapshot from the cell's backend interface served with a
// certificate of that CA; one without the CA is refused at the handshake; a CA with an http
// backend URL is refused at construction (the credential never crosses in clear).
func TestPullOverTLS(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{Source: `export default function P() { return <p>tls</p>; }`})
	pool, cert := privateCA(t)
	backend := NewBackend(BackendConfig{Bucket: e.bucket, Credentials: []string{testCredential}, Keys: e.publishedKeys})
	srv := httptest.NewUnstartedServer(backend)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	p, err := NewPuller(PullerOptions{BackendURL: srv.URL, Credential: testCredential, RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := p.KeySet(context.Background())
	if err != nil || ks == nil {
		t.Fatalf("key set over TLS: %v", err)
	}
	got, err := p.Manifest(context.Background(), m.WorkspaceID, m.Ref)
	if err != nil || got.InputDigest != m.InputDigest {
		t.Fatalf("manifest over TLS: %v", err)
	}

	plain, err := NewPuller(PullerOptions{BackendURL: srv.URL, Credential: testCredential})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Manifest(context.Background(), m.WorkspaceID, m.Ref); err == nil {
		t.Fatal("a puller without the cell's CA read the snapshot")
	}
	var unknown x509.UnknownAuthorityError
	_, err = plain.KeySet(context.Background())
	if err == nil || !errors.As(err, &unknown) {
		t.Fatalf("a puller without the CA: %v, want an unknown-authority refusal", err)
	}

	if _, err := NewPuller(PullerOptions{BackendURL: "http://127.0.0.1:1", Credential: testCredential, RootCAs: pool}); err == nil ||
		!strings.Contains(err.Error(), "https") {
		t.Fatalf("a CA with an http backend: %v", err)
	}
}
