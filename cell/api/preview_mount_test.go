package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"gocloud.dev/blob/memblob"

	"slidecells/cell/api"
	"slidecells/cell/preview"
	"slidecells/shared/ticket"
)

// The preview host's backend interface is mounted in the cell's handler and answers only the
// preview service credential.
func TestPreviewBackendMountedInTheCell(t *testing.T) {
	signer, err := ticket.GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	b := memblob.OpenBucket(nil)
	defer b.Close()
	const cred = "preview-credential-0123456789abcdef"
	cellAPI := api.New(api.Config{CellID: "cell-a", Log: zap.NewNop(), Blobs: b,
		PreviewBackend: preview.NewBackend(preview.BackendConfig{Bucket: b, Credentials: []string{cred},
			Keys: func() []ticket.PublicKey { return []ticket.PublicKey{signer.PublicKey()} }})})
	srv := httptest.NewServer(cellAPI.Handler())
	defer srv.Close()
	for _, c := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong-credential-0123456789", http.StatusUnauthorized}, {"Bearer " + cred, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+preview.BackendRoot+"/keys", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("key set with %q: %d, want %d", c.auth, resp.StatusCode, c.want)
		}
	}
}
