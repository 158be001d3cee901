package blob

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"slidecells/cell/auth/scope"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Store writes and reads content-addressed blobs in one bucket.
type Store struct {
	Bucket *gcblob.Bucket
}

// Key is the content-addressed key of content with the given SHA-256 (lower-case hex) in a
// workspace.
func Key(workspaceID, sha256Hex string) string {
	return "ws/" + workspaceID + "/sha256/" + sha256Hex
}

// TempPrefix is where uploads are streamed before their digest is known.
const TempPrefix = "tmp/"

// PutOptions says what Put accepts.
type PutOptions struct {
	// Declared is the media type the client declared; "" or application/octet-stream leave the
	// decision to the sniffed type.
	Declared string
	// MaxBytes caps the content; 0 is MaxBytes. It cannot be raised above MaxBytes.
	MaxBytes int64
	// Kinds restricts the kinds accepted (e.g. only KindFont); nil accepts the whole allow-list.
	Kinds []Kind
}

// Object is stored content.
type Object struct {
	Key         string
	SHA256      string // lower-case hex
	Size        int64
	ContentType string // canonical, sniffed
	Kind        Kind
	// Created is false when the final key existed already (same content uploaded before).
	Created bool
}

// Put streams r into the store: it sniffs the media type from the first bytes and checks it
// against the allow-list, the declared type and opts.Kinds before writing anything, then
// streams to a temporary key while hashing and counting, and promotes the temporary blob to
// its content-addressed key only if that key does not exist yet. Errors are problem errors:
// 413 PAYLOAD_TOO_LARGE over the limit, 415 UNSUPPORTED_MEDIA_TYPE for a type that is not
// accepted or does not match the declared one, 422 VALIDATION_FAILED for an empty body, 400
// when the body cannot be read. On every error nothing is left behind but, at worst (a crash),
// a temporary key for SweepTemp.
func (s *Store) Put(ctx context.Context, sc scope.Scope, r io.Reader, opts PutOptions) (Object, error) {
	ws := sc.WorkspaceID()
	if ws == "" {
		return Object{}, problem.Wrap(errors.New("blob: no workspace scope"), "internal error")
	}
	limit := opts.MaxBytes
	if limit <= 0 || limit > MaxBytes {
		limit = MaxBytes
	}
	body := &bodyReader{r: r}
	br := bufio.NewReaderSize(body, SniffLen)
	head, err := br.Peek(SniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return Object{}, readError(err, limit)
	}
	if len(head) == 0 {
		return Object{}, problem.Invalid(problem.FieldError{Field: "body", Message: "the content is empty"})
	}
	ct := Sniff(head)
	if err := checkType(opts, ct); err != nil {
		return Object{}, err
	}
	obj := Object{ContentType: ct, Kind: KindOf(ct)}
	if err := checkImageHeader(ct, head); err != nil { // a decompression bomb declares its size
		return Object{}, err
	}

	tmp := TempPrefix + ws + "/" + ids.New("up")
	defer s.remove(ctx, tmp)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.Bucket.NewWriter(wctx, tmp, &gcblob.WriterOptions{ContentType: ct})
	if err != nil {
		return Object{}, problem.Wrap(err, "the content could not be stored")
	}
	var svg *svgCheck
	sinks := []io.Writer{w}
	if ct == TypeSVG {
		svg = newSVGCheck()
		defer svg.abort()
		sinks = append(sinks, svg)
	}
	h := sha256.New()
	sinks = append(sinks, h)
	n, err := io.Copy(io.MultiWriter(sinks...), io.LimitReader(br, limit+1))
	abort := func(e error) (Object, error) {
		cancel() // a canceled writer discards its bytes on Close
		_ = w.Close()
		return Object{}, e
	}
	switch {
	case body.err != nil:
		return abort(readError(body.err, limit))
	case errors.Is(err, errSVGStopped):
		return abort(svg.finish())
	case err != nil:
		return abort(problem.Wrap(err, "the content could not be stored"))
	case n > limit:
		return abort(tooLarge(limit))
	}
	if svg != nil {
		if err := svg.finish(); err != nil {
			return abort(err)
		}
	}
	if err := w.Close(); err != nil {
		return Object{}, problem.Wrap(err, "the content could not be stored")
	}
	if err := s.verifyTemp(ctx, tmp, ct); err != nil {
		return Object{}, err
	}
	obj.Size = n
	obj.SHA256 = hex.EncodeToString(h.Sum(nil))
	obj.Key = Key(ws, obj.SHA256)
	created, err := s.promote(ctx, tmp, obj)
	if err != nil {
		return Object{}, err
	}
	obj.Created = created
	return obj, nil
}

// verifyTemp decodes a raster image from its temporary blob before it becomes content.
func (s *Store) verifyTemp(ctx context.Context, tmp, ct string) error {
	if ct != TypePNG && ct != TypeJPEG {
		return nil
	}
	rd, err := s.Bucket.NewReader(ctx, tmp, nil)
	if err != nil {
		return problem.Wrap(err, "the content could not be read")
	}
	defer rd.Close()
	return verifyRaster(ctx, ct, rd)
}

// promote copies the temporary blob to its final key unless that exists. The copy is a
// create-if-absent write (not Bucket.Copy, which has no precondition), re-hashed on the way so a
// corrupted temporary blob never becomes content.
func (s *Store) promote(ctx context.Context, tmp string, obj Object) (bool, error) {
	// An error here is not final: the local file driver reads an attributes file that a
	// concurrent writer of the same key may be half-way through (a bare EOF). The
	// create-if-absent write below decides either way.
	if exists, err := s.Bucket.Exists(ctx, obj.Key); err == nil && exists {
		return false, nil
	}
	rd, err := s.Bucket.NewReader(ctx, tmp, nil)
	if err != nil {
		return false, problem.Wrap(err, "the content could not be stored")
	}
	defer rd.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.Bucket.NewWriter(wctx, obj.Key, &gcblob.WriterOptions{ContentType: obj.ContentType, IfNotExist: true})
	if err != nil {
		return false, problem.Wrap(err, "the content could not be stored")
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(w, h), rd)
	if err == nil && hex.EncodeToString(h.Sum(nil)) != obj.SHA256 {
		err = fmt.Errorf("blob: temporary blob %s does not hash to %s", tmp, obj.SHA256)
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return false, problem.Wrap(err, "the content could not be stored")
	}
	if err := w.Close(); err != nil {
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return false, nil // a concurrent upload of the same bytes won; its blob is ours too
		}
		return false, problem.Wrap(err, "the content could not be stored")
	}
	return true, nil
}

// remove deletes a temporary key, ignoring its absence; it runs even when ctx has ended.
func (s *Store) remove(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = s.Bucket.Delete(ctx, key)
}

// Open reads the content at key, which must lie in the scope's workspace. A key outside it,
// or a missing blob, is an integrity failure (500), never another workspace's bytes.
func (s *Store) Open(ctx context.Context, sc scope.Scope, key string) (*gcblob.Reader, error) {
	if sc.WorkspaceID() == "" || !strings.HasPrefix(key, "ws/"+sc.WorkspaceID()+"/sha256/") {
		return nil, problem.Wrap(fmt.Errorf("blob: key %q outside workspace %q", key, sc.WorkspaceID()), "internal error")
	}
	rd, err := s.Bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, problem.Wrap(err, "the content could not be read")
	}
	return rd, nil
}

// SweepTemp deletes temporary blobs last modified before cutoff (left by a crashed upload) and
// returns how many it deleted. Run it periodically with a cutoff well beyond the longest upload.
func (s *Store) SweepTemp(ctx context.Context, cutoff time.Time) (int, error) {
	n := 0
	err := Each(ctx, s.Bucket, TempPrefix, func(obj *gcblob.ListObject) error {
		if !obj.ModTime.Before(cutoff) {
			return nil
		}
		if err := s.Bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// Each calls fn for every blob under prefix (in key order) until fn fails.
func Each(ctx context.Context, b *gcblob.Bucket, prefix string, fn func(*gcblob.ListObject) error) error {
	it := b.List(&gcblob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if obj.IsDir {
			continue
		}
		if err := fn(obj); err != nil {
			return err
		}
	}
}

// Keys lists the keys of the blobs under prefix, in order.
func Keys(ctx context.Context, b *gcblob.Bucket, prefix string) ([]string, error) {
	var out []string
	err := Each(ctx, b, prefix, func(obj *gcblob.ListObject) error {
		out = append(out, obj.Key)
		return nil
	})
	return out, err
}

func checkType(opts PutOptions, sniffed string) error {
	kind := KindOf(sniffed)
	if kind == "" {
		return unsupported("body", "the content is %s, which is not accepted; accepted types: %s", sniffed, strings.Join(AllowedTypes(), ", "))
	}
	if d := Normalize(opts.Declared); !Generic(d) {
		if KindOf(d) == "" {
			return unsupported("header.Content-Type", "%s is not accepted; accepted types: %s", d, strings.Join(AllowedTypes(), ", "))
		}
		if !Compatible(d, sniffed) {
			return unsupported("header.Content-Type", "declared %s but the content is %s", d, sniffed)
		}
	}
	if len(opts.Kinds) > 0 {
		for _, k := range opts.Kinds {
			if k == kind {
				return nil
			}
		}
		var want []string
		for _, k := range opts.Kinds {
			want = append(want, TypesOf(k)...)
		}
		return unsupported("body", "the content is %s; here only %s are accepted", sniffed, strings.Join(want, ", "))
	}
	return nil
}

func unsupported(field, format string, args ...any) error {
	e := problem.New(problem.UnsupportedMediaType, "the content type is not accepted")
	e.Fields = []problem.FieldError{{Field: field, Message: fmt.Sprintf(format, args...)}}
	return e
}

func tooLarge(limit int64) error {
	return problem.New(problem.PayloadTooLarge, "the content is larger than %d bytes", limit)
}

func readError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge(limit)
	}
	e := problem.New(problem.BadRequest, "the request body could not be read")
	e.Cause = err
	return e
}

// bodyReader remembers a read error of the client's body, so it is told apart from a failure
// to write to the bucket.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

// Remove deletes the blob at key and returns its size; an absent blob is no error (ok false),
// so that concurrent or repeated deletes of the same key are harmless.
func Remove(ctx context.Context, b *gcblob.Bucket, key string) (size int64, ok bool, err error) {
	attrs, err := b.Attributes(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	err = b.Delete(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return attrs.Size, true, nil
}
