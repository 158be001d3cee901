package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"slidecells/shared/digest"
	rc "slidecells/shared/rendercontract"
)

// TestArtifactIsCheckedAgainstItsDescriptor: the coordinator stores an artifact only when its
// bytes are the ones its descriptor names; anything else is RENDER_RESULT_LOST.
func TestArtifactIsCheckedAgainstItsDescriptor(t *testing.T) {
	t.Parallel()
	body := []byte("\x89PNG not really, but bytes")
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		if !strings.HasSuffix(r.URL.Path, "/executions/att_1/artifacts/"+string(rc.ArtifactCapture)) {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c := newClient("client-test-credential-0123456789")
	desc := func(sha string, n int64) rc.Artifact {
		return rc.Artifact{Name: rc.ArtifactCapture, ContentType: rc.ArtifactCapture.ContentType(), Bytes: n, SHA256: sha}
	}
	sum := digest.Bytes(body)
	for _, tc := range []struct {
		name string
		d    rc.Artifact
		ok   bool
	}{
		{"digest string", desc(sum, int64(len(body))), true},
		{"bare hex digest", desc(strings.TrimPrefix(sum, digest.Prefix), int64(len(body))), true},
		{"other bytes", desc(digest.Bytes([]byte("other")), int64(len(body))), false},
		{"other length", desc(sum, int64(len(body))+1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, e := c.artifact(context.Background(), srv.URL, "att_1", tc.d)
			if tc.ok {
				if e != nil || string(data) != string(body) {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil || e.Code != rc.CodeResultLost || data != nil {
				t.Fatalf("got %d bytes and %v, want RENDER_RESULT_LOST", len(data), e)
			}
		})
	}
	if gotAuth != "Bearer client-test-credential-0123456789" {
		t.Fatalf("Authorization %q, want the service credential", gotAuth)
	}
}
