package preview

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"slidecells/cell/snapshot"
	"slidecells/shared/httpserve"
	"slidecells/shared/ids"
	"slidecells/shared/logging"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// CookieName is the cookie the document sets so its subresources load without a token: the
// preview-access token itself, HttpOnly, SameSite=Strict, limited to the document's path and
// expiring with the token.
const CookieName = "preview_access"

// AccessParam is the query parameter a public browser may carry the token in (the renderer
// uses the rc.PreviewAccessHeader header).
const AccessParam = "access"

// Options configure a Host.
type Options struct {
	Puller  *Puller
	Runtime *Runtime
	Bases   BaseConfig
	// PlatformDir, when set, is served under <prefix>/platform/ (platform assets: no tenant data).
	PlatformDir string
	Log         *zap.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Host serves preview documents, their subresources and the runtime.
type Host struct {
	o   Options
	mux *http.ServeMux
}

// New returns a Host.
func New(o Options) (*Host, error) {
	if o.Puller == nil || o.Runtime == nil {
		return nil, errors.New("preview: a puller and a runtime are required")
	}
	for _, b := range []string{o.Bases.RuntimeAssetBase, o.Bases.PlatformAssetBase} {
		if b != "" {
			if err := CheckBase(b); err != nil {
				return nil, err
			}
		}
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Host{o: o, mux: http.NewServeMux()}
	for _, p := range []string{"", "/preview/w/{ws}"} {
		h.mux.HandleFunc("GET "+p+"/snapshots/{ref}", h.document)
		h.mux.HandleFunc("GET "+p+"/snapshots/{ref}/{file...}", h.subresource)
		h.mux.HandleFunc("GET "+p+"/runtime/{version}/{file...}", h.runtimeFile)
		h.mux.HandleFunc("GET "+p+"/platform/{file...}", h.platformFile)
	}
	h.mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	h.mux.HandleFunc("GET /readyz", h.readyz)
	return h, nil
}

// Handler is the host's HTTP handler, with an access log that never holds a token (paths only).
func (h *Host) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpserve.StatusWriter{ResponseWriter: w}
		setSecurityHeaders(sw.Header())
		ctx, span := traceRequest(r)
		h.mux.ServeHTTP(sw, r.WithContext(ctx))
		endRequestSpan(span, sw.Status())
		if r.URL.Path != "/livez" && r.URL.Path != "/readyz" {
			h.o.Log.Info("request", zap.String("method", r.Method), zap.String("path", r.URL.Path),
				zap.Int("status", sw.Status()), logging.Trace(ctx), zap.Duration("duration", time.Since(start)))
		}
	})
}

func (h *Host) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	if _, err := h.o.Puller.KeySet(ctx); err != nil {
		http.Error(w, "backend unreachable", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

func setSecurityHeaders(hd http.Header) {
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), usb=(), payment=(), clipboard-read=(), clipboard-write=()")
}

// refuse is the one answer to every refused or unknown document or subresource: it does not
// tell a bad token from a missing snapshot or object.
func refuse(w http.ResponseWriter) {
	plain(w, http.StatusNotFound, "preview not found", "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
}

func unavailable(w http.ResponseWriter) {
	plain(w, http.StatusServiceUnavailable, "preview host unavailable", "Retry-After", "1")
}

// plain answers a status with a line of text, never cached, with more headers (name, value…).
func plain(w http.ResponseWriter, status int, text string, header ...string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	for i := 0; i+1 < len(header); i += 2 {
		hd.Set(header[i], header[i+1])
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n")
}

// errUnavailable: the key set or the snapshot could not be read (not a refusal).
var errUnavailable = errors.New("preview: backend unavailable")

// verify checks a token for the document at docPath: signature (refreshing the key set once
// for an unknown key), type, expiry, snapshot, exact path and, under the router's prefix, the
// workspace. Every failure but an unreachable backend is a refusal.
func (h *Host) verify(ctx context.Context, token, ref, docPath, prefixWS string) (*ticket.PreviewAccess, error) {
	if token == "" {
		return nil, errRefused
	}
	ks, err := h.o.Puller.KeySet(ctx)
	if err != nil {
		return nil, errUnavailable
	}
	var c ticket.PreviewAccess
	err = ks.Verify(token, h.o.Now(), &c)
	if errors.Is(err, ticket.ErrUnknownKey) {
		if fresh, ok := h.o.Puller.RefreshKeys(ctx); ok {
			c = ticket.PreviewAccess{}
			err = fresh.Verify(token, h.o.Now(), &c)
		}
	}
	if err != nil || c.SnapshotRef != ref || c.Path != docPath || !ids.Valid(ids.Workspace, c.WorkspaceID) ||
		(prefixWS != "" && prefixWS != c.WorkspaceID) {
		return nil, errRefused
	}
	return &c, nil
}

var errRefused = errors.New("preview: refused")

// target reads the snapshot and prefix of a request; ok is false for malformed ones.
func target(r *http.Request) (ref, prefixWS, prefix string, ok bool) {
	ref, prefixWS = r.PathValue("ref"), r.PathValue("ws")
	if !ids.Valid(ids.Snapshot, ref) {
		return "", "", "", false
	}
	if strings.HasPrefix(r.URL.Path, "/preview/w/") && !validPrefixWorkspace(prefixWS) {
		return "", "", "", false
	}
	return ref, prefixWS, Prefix(prefixWS), true
}

// manifest loads the snapshot the claims name; missing or expired snapshots are refusals.
func (h *Host) manifest(ctx context.Context, c *ticket.PreviewAccess) (*snapshot.Manifest, error) {
	m, err := h.o.Puller.Manifest(ctx, c.WorkspaceID, c.SnapshotRef)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, errRefused
	case err != nil:
		h.o.Log.Warn("snapshot manifest unavailable", zap.String("snapshot_ref", c.SnapshotRef), zap.Error(err))
		return nil, errUnavailable
	case !m.ExpiresAt.IsZero() && h.o.Now().After(m.ExpiresAt):
		return nil, errRefused
	}
	return m, nil
}

// admitted ends the checks of a request: the manifest of an access that passed them, or the
// answer to one that did not (503 when the backend was unreachable, else the one refusal).
func (h *Host) admitted(w http.ResponseWriter, r *http.Request, c *ticket.PreviewAccess, err error) (*snapshot.Manifest, bool) {
	var m *snapshot.Manifest
	if err == nil {
		m, err = h.manifest(r.Context(), c)
	}
	switch {
	case errors.Is(err, errUnavailable):
		unavailable(w)
	case err != nil:
		refuse(w)
	}
	return m, err == nil
}

func (h *Host) document(w http.ResponseWriter, r *http.Request) {
	ref, prefixWS, prefix, ok := target(r)
	if !ok {
		refuse(w)
		return
	}
	token := r.Header.Get(rc.PreviewAccessHeader)
	if token == "" {
		token = r.URL.Query().Get(AccessParam)
	}
	docPath := prefix + "/snapshots/" + ref
	c, err := h.verify(r.Context(), token, ref, r.URL.EscapedPath(), prefixWS)
	if err == nil && r.URL.EscapedPath() != docPath {
		err = errRefused
	}
	m, ok := h.admitted(w, r, c, err)
	if !ok {
		return
	}
	var body []byte
	if m.FileType == "html" {
		if body, err = h.o.Puller.Object(r.Context(), m, m.Module); err != nil {
			h.o.Log.Warn("html page body unavailable", zap.String("snapshot_ref", ref), zap.Error(err))
			unavailable(w)
			return
		}
	}
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	doc, err := buildDocument(h.o.Runtime, m, Resolve(h.o.Bases, prefix, ref, h.o.Runtime.Version), base64.StdEncoding.EncodeToString(nonce), body)
	if err != nil {
		h.o.Log.Warn("preview document not built", zap.String("snapshot_ref", ref), zap.Error(err))
		unavailable(w)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: token, Path: docPath, Expires: c.ExpiresAt, MaxAge: max(1, int(c.ExpiresAt.Sub(h.o.Now()).Seconds())),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: strings.HasPrefix(c.Origin, "https:"),
	})
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", doc.csp)
	hd.Set("Content-Length", strconv.Itoa(len(doc.body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(doc.body)
	}
}

func (h *Host) subresource(w http.ResponseWriter, r *http.Request) {
	ref, prefixWS, prefix, ok := target(r)
	if !ok {
		refuse(w)
		return
	}
	docPath := prefix + "/snapshots/" + ref
	var c *ticket.PreviewAccess
	var err error = errRefused
	for _, ck := range r.Cookies() {
		if ck.Name != CookieName {
			continue
		}
		if c, err = h.verify(r.Context(), ck.Value, ref, docPath, prefixWS); err == nil || errors.Is(err, errUnavailable) {
			break
		}
	}
	if err == nil && !strings.HasPrefix(r.URL.EscapedPath(), c.Path+"/") {
		err = errRefused
	}
	m, ok := h.admitted(w, r, c, err)
	if !ok {
		return
	}
	var o snapshot.Object
	var ctype string
	switch file := r.PathValue("file"); {
	case file == "module.js" && m.FileType != "html":
		o, ctype = m.Module, "text/javascript; charset=utf-8"
	case file == "styles.css":
		o, ctype = m.Styles, "text/css; charset=utf-8"
	case strings.HasPrefix(file, "blobs/"):
		o, ok = blobOf(m, strings.TrimPrefix(file, "blobs/"))
		if !ok {
			refuse(w)
			return
		}
		ctype = safeType(o.ContentType)
	default:
		refuse(w)
		return
	}
	h.serveObject(w, r, m, o, ctype)
}

// blobOf finds a font or asset the manifest lists by its digest's hex (module and styles have
// their own names).
func blobOf(m *snapshot.Manifest, hex string) (snapshot.Object, bool) {
	for _, f := range m.Fonts {
		if f.Hex() == hex {
			return f, true
		}
	}
	for _, a := range m.Assets {
		if a.Hex() == hex {
			return a.Object, true
		}
	}
	return snapshot.Object{}, false
}

// safeType passes the types of fonts and raster or vector images and makes anything else an
// opaque download.
func safeType(t string) string {
	mt, _, err := mime.ParseMediaType(t)
	if err != nil {
		return "application/octet-stream"
	}
	switch {
	case strings.HasPrefix(mt, "font/"), mt == "application/font-woff", mt == "application/font-woff2",
		mt == "image/png", mt == "image/jpeg", mt == "image/gif", mt == "image/webp", mt == "image/avif", mt == "image/svg+xml":
		return mt
	}
	return "application/octet-stream"
}

func (h *Host) serveObject(w http.ResponseWriter, r *http.Request, m *snapshot.Manifest, o snapshot.Object, ctype string) {
	hd := w.Header()
	hd.Set("Cache-Control", "private, max-age=600")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	// An object opened as a document (an SVG) runs nothing.
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	if h.o.Puller.Cacheable(o) {
		b, err := h.o.Puller.Object(r.Context(), m, o)
		if err != nil {
			h.objectError(w, o, err)
			return
		}
		hd.Set("Content-Type", ctype)
		hd.Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(b)
		}
		return
	}
	rd, err := h.o.Puller.OpenObject(r.Context(), m, o)
	if err != nil {
		h.objectError(w, o, err)
		return
	}
	defer rd.Close()
	hd.Set("Content-Type", ctype)
	hd.Set("Content-Length", strconv.FormatInt(o.Bytes, 10))
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, rd); err != nil {
		// The bytes are not the pinned ones, or the backend went away: break the response so
		// the browser counts a failed load, never a complete one.
		h.o.Log.Warn("snapshot object stream broken", zap.String("snapshot_ref", m.Ref), zap.String("digest", o.Digest), zap.Error(err))
		panic(http.ErrAbortHandler)
	}
}

func (h *Host) objectError(w http.ResponseWriter, o snapshot.Object, err error) {
	h.o.Log.Warn("snapshot object unavailable", zap.String("digest", o.Digest), zap.Error(err))
	if errors.Is(err, ErrNotFound) {
		// Listed by the manifest but gone from the store: the host's problem, not a refusal.
		http.Error(w, "snapshot object unavailable", http.StatusBadGateway)
		return
	}
	unavailable(w)
}

// publicFile sets the headers of a file any origin may load (the runtime, platform assets)
// and returns the header for the rest.
func publicFile(w http.ResponseWriter, cacheControl string) http.Header {
	hd := w.Header()
	hd.Set("Cache-Control", cacheControl)
	hd.Set("Access-Control-Allow-Origin", "*")
	hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	return hd
}

func (h *Host) runtimeFile(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("version") != h.o.Runtime.Version {
		http.NotFound(w, r)
		return
	}
	b, ok := h.o.Runtime.File(r.PathValue("file"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	hd := publicFile(w, "public, max-age=31536000, immutable")
	hd.Set("Content-Type", "text/javascript; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func (h *Host) platformFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if h.o.PlatformDir == "" || !validRuntimeName(name) || path.Clean(name) != name {
		http.NotFound(w, r)
		return
	}
	f, err := os.OpenInRoot(h.o.PlatformDir, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	hd := publicFile(w, "public, max-age=300")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		hd.Set("Content-Type", safeType(t))
	} else {
		hd.Set("Content-Type", "application/octet-stream")
	}
	http.ServeContent(w, r, "", st.ModTime(), f)
}
