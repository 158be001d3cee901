package api_test

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"

	"slidecells/cell/api"
	"slidecells/cell/ratelimit"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
)

// admissionServer is cell-a's API over a fresh cell database with small limits: a workspace
// may make 20 requests at once (then 1/s), an address may fail authentication 10 times at once
// (then one every 10 s); no token limit, so that the workspace's is the one a member meets.
// The rates are low so that the outcomes do not depend on how fast this machine is.
func admissionServer(t *testing.T, b *bundle, trusted []netip.Prefix) *httptest.Server {
	t.Helper()
	a := newAPI(t, api.Config{CellID: "cell-a", DB: dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell)),
		Log: zap.NewNop(), Blobs: newBucket(t),
		Dir:              directory.NewCached(b.dir, directory.CacheOptions{TTL: time.Minute, MaxStale: time.Minute}),
		RateWorkspace:    ratelimit.Limit{Rate: 1, Burst: 20},
		RateAuthFailures: ratelimit.Limit{Rate: 0.1, Burst: 10},
		TrustedProxies:   trusted,
	})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// bogusToken is a well-shaped token nobody holds (its lookup reaches the directory).
func bogusToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return directory.TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

type admissionAnswer struct {
	status int
	scope  string
	retry  string
}

func admissionGet(t *testing.T, base, token, ws, forwardedFor string) admissionAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/projects", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Workspace-ID", ws)
	if forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", forwardedFor)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return admissionAnswer{resp.StatusCode, resp.Header.Get(ratelimit.ScopeHeader), resp.Header.Get("Retry-After")}
}

// TestAdmissionOnlyMembersSpend: a flood of distinct bogus tokens naming a member's workspace,
// from one address (as the router forwards it), never costs the member a 429, is itself turned
// away (429 for its address, with Retry-After) after a few 401s, and does not touch another
// address; the member behind the flooding address keeps working; a member flooding its own
// workspace still gets 429 for the workspace.
func TestAdmissionOnlyMembersSpend(t *testing.T) {
	b := setup(t)
	srv := admissionServer(t, b, api.DefaultTrustedProxies)
	const flooder, member, bystander = "203.0.113.7", "198.51.100.1", "198.51.100.9"
	// The member's first read from the flooding address: its token is then known good there.
	if a := admissionGet(t, srv.URL, b.pat, b.ws, flooder); a.status != http.StatusOK {
		t.Fatalf("first read: %+v", a)
	}
	var unauthorized, limited, memberLimited int
	for i := range 300 {
		switch a := admissionGet(t, srv.URL, bogusToken(), b.ws, flooder); {
		case a.status == http.StatusUnauthorized:
			unauthorized++
		case a.status == http.StatusTooManyRequests && a.scope == "address" && a.retry != "":
			limited++
		default:
			t.Fatalf("bogus token: %+v", a)
		}
		if i%20 == 0 { // 15 reads, within the workspace's burst of 20 (less the first read)
			from := member
			if i%40 == 0 {
				from = flooder
			}
			if a := admissionGet(t, srv.URL, b.pat, b.ws, from); a.status != http.StatusOK {
				memberLimited++
				t.Errorf("member read from %s during the flood: %+v", from, a)
			}
		}
	}
	// The burst of 10 failures, plus at most the refill of the time the flood took.
	if unauthorized < 10 || limited < 200 {
		t.Fatalf("flood: %d × 401, %d × 429", unauthorized, limited)
	}
	if memberLimited != 0 {
		t.Fatalf("the member got %d refusals", memberLimited)
	}
	// Another address is not affected by the flooding one.
	if a := admissionGet(t, srv.URL, bogusToken(), b.ws, bystander); a.status != http.StatusUnauthorized {
		t.Fatalf("another address: %+v", a)
	}
	// A member flooding its own workspace is held to the workspace's rate.
	var ok, refused int
	for range 100 {
		switch a := admissionGet(t, srv.URL, b.pat, b.ws, member); {
		case a.status == http.StatusOK:
			ok++
		case a.status == http.StatusTooManyRequests && a.scope == "workspace" && a.retry != "":
			refused++
		default:
			t.Fatalf("member flood: %+v", a)
		}
	}
	if refused == 0 {
		t.Fatalf("member flooding its workspace: %d served, %d refused", ok, refused)
	}
}

// TestAdmissionIgnoresClientForwardedFor: from a peer that is not a trusted proxy, the
// X-Forwarded-For a client sends is not read: changing it on every request does not escape the
// failed-authentication limit of the connection's own address.
func TestAdmissionIgnoresClientForwardedFor(t *testing.T) {
	b := setup(t)
	srv := admissionServer(t, b, nil) // the loopback test client is no proxy here
	var unauthorized, limited int
	for i := range 60 {
		switch a := admissionGet(t, srv.URL, bogusToken(), b.ws, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).String()); {
		case a.status == http.StatusUnauthorized:
			unauthorized++
		case a.status == http.StatusTooManyRequests && a.scope == "address":
			limited++
		default:
			t.Fatalf("bogus token: %+v", a)
		}
	}
	if unauthorized > 20 || limited < 40 {
		t.Fatalf("forged X-Forwarded-For: %d × 401, %d × 429", unauthorized, limited)
	}
	// And the same through a trusted peer: each forwarded address has its own bucket.
	trusting := admissionServer(t, b, api.DefaultTrustedProxies)
	for i := range 30 {
		if a := admissionGet(t, trusting.URL, bogusToken(), b.ws, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).String()); a.status != http.StatusUnauthorized {
			t.Fatalf("trusted X-Forwarded-For %d: %+v", i, a)
		}
	}
}
