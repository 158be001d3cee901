package blob

import (
	"context"
	"errors"
	"strings"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"slidecells/cell/auth"
)

// ModuleKey is the content-addressed key of a compiled module of a workspace; digest is
// "sha256:<hex>".
func ModuleKey(workspaceID, digest string) string {
	return "ws/" + workspaceID + "/modules/" + strings.TrimPrefix(digest, "sha256:") + ".js"
}

// PutModule stores a compiled module under its content address, once: writing the same module
// again (a retried job) finds it there and writes nothing.
func (s *Store) PutModule(ctx context.Context, sc auth.Scope, digest string, code []byte) (string, error) {
	if sc.WorkspaceID() == "" || !strings.HasPrefix(digest, "sha256:") {
		return "", errors.New("blob: module needs a workspace scope and a sha256 digest")
	}
	key := ModuleKey(sc.WorkspaceID(), digest)
	if ok, err := s.Bucket.Exists(ctx, key); err != nil || ok {
		return key, err
	}
	err := s.Bucket.WriteAll(ctx, key, code, &gcblob.WriterOptions{ContentType: "text/javascript; charset=utf-8"})
	if gcerrors.Code(err) == gcerrors.AlreadyExists {
		err = nil
	}
	return key, err
}
