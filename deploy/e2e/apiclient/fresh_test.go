package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"

	"slidecells/cell/api"
)

// TestClientIsFresh fails when the cell's OpenAPI 3.0 document is no longer the one the
// committed client was generated from: the API changed and `make api-client` was not run.
func TestClientIsFresh(t *testing.T) {
	srv := httptest.NewServer(api.New(api.Config{CellID: "cell-client", Log: zap.NewNop()}).Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/openapi-3.0.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/openapi-3.0.json: %d %v", resp.StatusCode, err)
	}
	sum := sha256.Sum256(doc)
	recorded, err := os.ReadFile("openapi-3.0.sha256")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(sum[:]), strings.TrimSpace(string(recorded)); got != want {
		t.Fatalf("the cell's /openapi-3.0.json (sha256 %s) is not the document client.gen.go was generated from (%s): run make api-client", got, want)
	}
}
