package preview

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	gcblob "gocloud.dev/blob"

	"slidecells/cell/snapshot"
	"slidecells/shared/ids"
	"slidecells/shared/ticket"
)

// BackendRoot is the path prefix of the preview-runtime ↔ backend interface on the cell
// (external-api-v1.md: preview context, resource and configuration bundles, snapshot pull,
// token validation against a published key set). Only the preview host calls it, with the
// preview service credential as a bearer token:
//
//	GET /internal/preview/v1/keys
//	    the published key set verifying preview-access tokens: {"keys": ["kid:base64", …]}
//	GET /internal/preview/v1/workspaces/{ws}/snapshots/{ref}
//	    the snapshot manifest (the preview context: entity, canvas, scenes, identity, objects)
//	GET /internal/preview/v1/workspaces/{ws}/snapshots/{ref}/objects/{hex}
//	    one object the manifest lists (module, styles, a font or an asset), streamed with its
//	    length and type; an object the manifest does not list is 404 like a missing snapshot
const BackendRoot = "/internal/preview/v1"

// BackendConfig is what the cell's side of the interface needs.
type BackendConfig struct {
	// Bucket is the cell's blob store holding snapshots (cell/snapshot).
	Bucket *gcblob.Bucket
	// Credentials are the accepted preview service credentials: the current one and, during a
	// rotation, the next (PREVIEW_SERVICE_CREDENTIAL_FILE, one per line).
	Credentials []string
	// Keys returns the public keys to publish (the cell's ticket signer's, and any key still
	// verifying tokens in flight).
	Keys func() []ticket.PublicKey
}

// NewBackend returns the handler of BackendRoot for the cell to mount.
func NewBackend(c BackendConfig) http.Handler {
	b := &backend{c: c}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+BackendRoot+"/keys", b.keys)
	mux.HandleFunc("GET "+BackendRoot+"/workspaces/{ws}/snapshots/{ref}", b.manifest)
	mux.HandleFunc("GET "+BackendRoot+"/workspaces/{ws}/snapshots/{ref}/objects/{hex}", b.object)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !b.authorized(r) {
			// Nothing of the presented value is logged or echoed.
			w.Header().Set("WWW-Authenticate", `Bearer realm="preview"`)
			http.Error(w, "preview service credential required", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type backend struct{ c BackendConfig }

func (b *backend) authorized(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return false
	}
	match := 0
	for _, want := range b.c.Credentials {
		if want != "" {
			match |= subtle.ConstantTimeCompare([]byte(got), []byte(want))
		}
	}
	return match == 1
}

// KeysBody is the body of GET /keys.
type KeysBody struct {
	Keys []string `json:"keys"`
}

func (b *backend) keys(w http.ResponseWriter, r *http.Request) {
	var body KeysBody
	if b.c.Keys != nil {
		for _, k := range b.c.Keys() {
			body.Keys = append(body.Keys, k.String())
		}
	}
	if len(body.Keys) == 0 {
		http.Error(w, "no preview key is published", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func (b *backend) load(w http.ResponseWriter, r *http.Request) *snapshot.Manifest {
	ws, ref := r.PathValue("ws"), r.PathValue("ref")
	if !ids.Valid(ids.Workspace, ws) || !ids.Valid(ids.Snapshot, ref) {
		http.NotFound(w, r)
		return nil
	}
	m, err := snapshot.Load(r.Context(), b.c.Bucket, ws, ref)
	if errors.Is(err, snapshot.ErrNotFound) {
		http.NotFound(w, r)
		return nil
	}
	if err != nil {
		http.Error(w, "snapshot unreadable", http.StatusInternalServerError)
		return nil
	}
	return m
}

func (b *backend) manifest(w http.ResponseWriter, r *http.Request) {
	m := b.load(w, r)
	if m == nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(m)
}

func (b *backend) object(w http.ResponseWriter, r *http.Request) {
	m := b.load(w, r)
	if m == nil {
		return
	}
	o, ok := m.Object(r.PathValue("hex"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	rd, err := b.c.Bucket.NewReader(r.Context(), o.Key, nil)
	if err != nil {
		http.Error(w, "object unreadable", http.StatusInternalServerError)
		return
	}
	defer rd.Close()
	if rd.Size() != o.Bytes {
		http.Error(w, "object size differs from its manifest", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", o.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(o.Bytes, 10))
	w.Header().Set("X-Content-Digest", o.Digest)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, rd)
}
