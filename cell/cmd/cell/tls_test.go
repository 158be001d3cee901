package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"slidecells/shared/httpserve"
	"slidecells/shared/testenv"
)

// The internal TLS listener serves the same handler as the plain one with a certificate of the
// cell's private CA: a client trusting that CA (the preview host's PREVIEW_BACKEND_CA_FILE)
// reaches it, one without is refused at the handshake; plain HTTP keeps working on the other
// listener; shutting down stops both.
func TestServeWithTLS(t *testing.T) {
	ca := testenv.NewCA(t, "127.0.0.1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "cell") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- serveWithTLS(ctx, ln, tln, ca.Cert, h, time.Second, httpserve.Limits{})
	}()

	withCA := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}, Timeout: 10 * time.Second}
	get := func(c *http.Client, url string) (string, error) {
		resp, err := c.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get(withCA, "https://"+tln.Addr().String()+"/"); err != nil || body != "cell" {
		t.Fatalf("over TLS with the CA: %q %v", body, err)
	}
	_, err = get(&http.Client{Timeout: 10 * time.Second}, "https://"+tln.Addr().String()+"/")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("without the CA: %v, want an unknown-authority refusal", err)
	}
	if body, err := get(http.DefaultClient, "http://"+ln.Addr().String()+"/"); err != nil || body != "cell" {
		t.Fatalf("plain listener: %q %v", body, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serveWithTLS did not return after shutdown")
	}
}
