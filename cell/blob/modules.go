package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"slidecells/cell/auth/scope"
	"slidecells/shared/digest"
)

// ModuleKey is the content-addressed key of a compiled module of a workspace; digest is
// "sha256:<hex>".
func ModuleKey(workspaceID, digest string) string {
	return DerivedKey(workspaceID, digest, ".js")
}

// DerivedKey is the content-addressed key of something the cell derived for a workspace (a
// compiled module ".js", a snapshot stylesheet ".css").
func DerivedKey(workspaceID, digest, ext string) string {
	return "ws/" + workspaceID + "/modules/" + strings.TrimPrefix(digest, "sha256:") + ext
}

// PutModule stores a compiled module under its content address, once: writing the same module
// again (a retried job) finds it there and writes nothing.
func (s *Store) PutModule(ctx context.Context, sc scope.Scope, digest string, code []byte) (string, error) {
	return s.PutDerived(ctx, sc, digest, ".js", "text/javascript; charset=utf-8", code)
}

// PutDerived stores derived content under its content address, once.
func (s *Store) PutDerived(ctx context.Context, sc scope.Scope, dg, ext, contentType string, data []byte) (string, error) {
	if sc.WorkspaceID() == "" || !strings.HasPrefix(dg, "sha256:") {
		return "", errors.New("blob: derived content needs a workspace scope and a sha256 digest")
	}
	if digest.Bytes(data) != dg {
		return "", fmt.Errorf("blob: content does not match its digest %s", dg)
	}
	key := DerivedKey(sc.WorkspaceID(), dg, ext)
	if ok, err := s.Bucket.Exists(ctx, key); err != nil || ok {
		return key, err
	}
	err := s.Bucket.WriteAll(ctx, key, data, &gcblob.WriterOptions{ContentType: contentType})
	if gcerrors.Code(err) == gcerrors.AlreadyExists {
		err = nil
	}
	return key, err
}

// ReadDerived reads derived content of the scope's workspace, at most limit bytes.
func (s *Store) ReadDerived(ctx context.Context, sc scope.Scope, dg, ext string, limit int64) ([]byte, error) {
	if sc.WorkspaceID() == "" {
		return nil, errors.New("blob: no workspace scope")
	}
	r, err := s.Bucket.NewReader(ctx, DerivedKey(sc.WorkspaceID(), dg, ext), nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("blob: derived content over %d bytes", limit)
	}
	if err == nil && digest.Bytes(b) != dg {
		err = fmt.Errorf("blob: derived content does not match its digest")
	}
	return b, err
}
