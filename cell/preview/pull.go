package preview

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"slidecells/cell/snapshot"
	"slidecells/shared/digest"
	"slidecells/shared/ticket"
)

// Puller is the preview host's side of the backend interface (BackendRoot): it pulls snapshot
// manifests, objects and the published key set from the cell with the preview service
// credential, and caches them. Manifests and objects are immutable, so cached copies never go
// stale; the key set is refreshed every KeyRefresh and at once (at most every KeyRetry) when a
// token names a key it does not know.
type Puller struct {
	base       string
	credential string
	client     *http.Client
	keyRefresh time.Duration
	keyRetry   time.Duration
	now        func() time.Time

	manifests *lru.Cache[string, *snapshot.Manifest]
	objects   *objectCache
	maxCached int64
	flight    singleflight.Group

	mu        sync.Mutex
	keys      *ticket.KeySet
	keysAt    time.Time // last successful fetch
	keysTried time.Time // last attempt
}

// PullerOptions configure a Puller.
type PullerOptions struct {
	// BackendURL is the cell's internal base URL (PREVIEW_BACKEND_URL).
	BackendURL string
	// Credential is the preview service credential (PREVIEW_SERVICE_CREDENTIAL_FILE).
	Credential string
	// Timeout bounds one call to the backend (default 10s).
	Timeout time.Duration
	// CacheBytes bounds the object cache (default 64 MiB); objects larger than an eighth of it
	// are streamed, not cached.
	CacheBytes int64
	// Manifests bounds the manifest cache (default 1024).
	Manifests int
	// KeyRefresh is how often the key set is fetched again (default 5m); KeyRetry is the least
	// time between two fetches caused by unknown key IDs (default 1s).
	KeyRefresh, KeyRetry time.Duration
	// Transport is the HTTP transport (default http.DefaultTransport).
	Transport http.RoundTripper
	// RootCAs, when set (and Transport is not), are the only CAs trusted for the backend's TLS
	// (PREVIEW_BACKEND_CA_FILE); the backend URL must then be https.
	RootCAs *x509.CertPool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ErrNotFound is a snapshot or object the backend does not have.
var ErrNotFound = errors.New("preview: not found")

// NewPuller returns a Puller.
func NewPuller(o PullerOptions) (*Puller, error) {
	if err := CheckBase(o.BackendURL); err != nil {
		return nil, fmt.Errorf("backend URL: %w", err)
	}
	if o.Credential == "" {
		return nil, errors.New("preview service credential is empty")
	}
	if o.RootCAs != nil {
		if !strings.HasPrefix(o.BackendURL, "https://") {
			return nil, errors.New("backend URL: a CA is configured, so it must be https (the service credential never crosses in clear)")
		}
		if o.Transport == nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
			o.Transport = t
		}
	}
	p := &Puller{
		base:       strings.TrimRight(o.BackendURL, "/"),
		credential: o.Credential,
		client:     &http.Client{Timeout: or(o.Timeout, 10*time.Second), Transport: o.Transport},
		keyRefresh: or(o.KeyRefresh, 5*time.Minute),
		keyRetry:   or(o.KeyRetry, time.Second),
		now:        o.Now,
	}
	// Never follow a redirect: the credential goes to the configured backend only.
	p.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if p.now == nil {
		p.now = time.Now
	}
	n := o.Manifests
	if n <= 0 {
		n = 1024
	}
	p.manifests, _ = lru.New[string, *snapshot.Manifest](n)
	size := o.CacheBytes
	if size <= 0 {
		size = 64 << 20
	}
	p.objects = newObjectCache(size)
	p.maxCached = size / 8
	return p, nil
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (p *Puller) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+BackendRoot+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.credential)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("preview backend: %w", stripURL(err))
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return resp, nil
	case resp.StatusCode == http.StatusNotFound:
		resp.Body.Close()
		return nil, ErrNotFound
	default:
		resp.Body.Close()
		return nil, fmt.Errorf("preview backend answered HTTP %d", resp.StatusCode)
	}
}

// stripURL keeps the transport's reason and drops the URL an *url.Error carries.
func stripURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap()
	}
	return err
}

// Manifest returns a snapshot's checked manifest.
func (p *Puller) Manifest(ctx context.Context, ws, ref string) (*snapshot.Manifest, error) {
	key := ws + "/" + ref
	if m, ok := p.manifests.Get(key); ok {
		return m, nil
	}
	v, err, _ := p.flight.Do("m "+key, func() (any, error) {
		resp, err := p.get(ctx, "/workspaces/"+ws+"/snapshots/"+ref)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var m snapshot.Manifest
		if err := json.NewDecoder(io.LimitReader(resp.Body, snapshot.MaxManifestBytes)).Decode(&m); err != nil {
			return nil, fmt.Errorf("preview backend: manifest of %s: %w", ref, err)
		}
		if err := m.Check(ws, ref); err != nil {
			return nil, err
		}
		p.manifests.Add(key, &m)
		return &m, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*snapshot.Manifest), nil
}

// Cacheable reports whether Object keeps o in memory (else use OpenObject).
func (p *Puller) Cacheable(o snapshot.Object) bool { return o.Bytes <= p.maxCached }

// Object returns the bytes of a small object the manifest lists, verified against its digest.
func (p *Puller) Object(ctx context.Context, m *snapshot.Manifest, o snapshot.Object) ([]byte, error) {
	if b, ok := p.objects.get(o.Digest); ok {
		return b, nil
	}
	v, err, _ := p.flight.Do("o "+o.Digest, func() (any, error) {
		rc, err := p.OpenObject(ctx, m, o)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			return nil, err
		}
		if p.Cacheable(o) {
			p.objects.add(o.Digest, b)
		}
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// ErrDigestMismatch is what an object's reader returns at its end when the bytes are not the
// ones the manifest pins.
var ErrDigestMismatch = errors.New("preview: object bytes do not match their digest")

// OpenObject streams an object the manifest lists. The reader returns exactly o.Bytes bytes
// and then io.EOF, or ErrDigestMismatch (at the end) when they are not the pinned content.
func (p *Puller) OpenObject(ctx context.Context, m *snapshot.Manifest, o snapshot.Object) (io.ReadCloser, error) {
	resp, err := p.get(ctx, "/workspaces/"+m.WorkspaceID+"/snapshots/"+m.Ref+"/objects/"+o.Hex())
	if err != nil {
		return nil, err
	}
	if resp.ContentLength >= 0 && resp.ContentLength != o.Bytes {
		resp.Body.Close()
		return nil, fmt.Errorf("preview backend: object of %d bytes, the manifest says %d", resp.ContentLength, o.Bytes)
	}
	return &verifying{body: resp.Body, r: io.LimitReader(resp.Body, o.Bytes+1), left: o.Bytes, want: o.Digest, h: sha256.New()}, nil
}

type verifying struct {
	body io.Closer
	r    io.Reader
	left int64
	want string // the digest string
	h    hash.Hash
}

func (v *verifying) Read(b []byte) (int, error) {
	n, err := v.r.Read(b)
	v.h.Write(b[:n])
	v.left -= int64(n)
	if v.left < 0 {
		return n, ErrDigestMismatch
	}
	if err == io.EOF {
		if v.left != 0 || digest.FromSum(v.h.Sum(nil)) != v.want {
			return n, ErrDigestMismatch
		}
	}
	return n, err
}

func (v *verifying) Close() error { return v.body.Close() }

// KeySet returns the published key set, fetching it when it is older than KeyRefresh. When a
// refresh fails the last set keeps being used.
func (p *Puller) KeySet(ctx context.Context) (*ticket.KeySet, error) {
	p.mu.Lock()
	ks, at := p.keys, p.keysAt
	p.mu.Unlock()
	if ks != nil && p.now().Sub(at) < p.keyRefresh {
		return ks, nil
	}
	fresh, err := p.fetchKeys(ctx)
	if err != nil {
		if ks != nil {
			return ks, nil
		}
		return nil, err
	}
	return fresh, nil
}

// RefreshKeys fetches the key set again after a token named an unknown key, unless the last
// attempt is more recent than KeyRetry (so tokens with made-up key IDs cannot hammer the cell).
// It reports whether a new set was fetched.
func (p *Puller) RefreshKeys(ctx context.Context) (*ticket.KeySet, bool) {
	p.mu.Lock()
	recent := p.now().Sub(p.keysTried) < p.keyRetry
	p.mu.Unlock()
	if recent {
		return nil, false
	}
	ks, err := p.fetchKeys(ctx)
	return ks, err == nil
}

func (p *Puller) fetchKeys(ctx context.Context) (*ticket.KeySet, error) {
	v, err, _ := p.flight.Do("keys", func() (any, error) {
		p.mu.Lock()
		p.keysTried = p.now()
		p.mu.Unlock()
		resp, err := p.get(ctx, "/keys")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var body KeysBody
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body); err != nil {
			return nil, fmt.Errorf("preview backend: key set: %w", err)
		}
		ks, err := ticket.ParseKeySet(strings.Join(body.Keys, ","))
		if err != nil {
			return nil, fmt.Errorf("preview backend: key set: %w", err)
		}
		p.mu.Lock()
		p.keys, p.keysAt = ks, p.now()
		p.mu.Unlock()
		return ks, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*ticket.KeySet), nil
}

// objectCache is an LRU of object bytes bounded by their total size.
type objectCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	cache *lru.Cache[string, []byte]
}

func newObjectCache(max int64) *objectCache {
	c := &objectCache{max: max}
	c.cache, _ = lru.NewWithEvict[string, []byte](1<<20, func(_ string, b []byte) { c.size -= int64(len(b)) })
	return c
}

func (c *objectCache) get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache.Get(k)
}

func (c *objectCache) add(k string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cache.Peek(k); ok {
		return
	}
	c.cache.Add(k, bytes.Clone(b))
	c.size += int64(len(b))
	for c.size > c.max {
		if _, _, ok := c.cache.RemoveOldest(); !ok {
			break
		}
	}
}
