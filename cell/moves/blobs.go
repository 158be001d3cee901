package moves

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	cblob "slidecells/cell/blob"
)

// Everything a workspace owns in a cell's blob store lies under ws/<workspace>/ (assets by
// content address, compiled modules, render snapshots). A move mirrors that prefix: blobs are
// immutable and content-addressed, so copying one again is harmless, and a blob whose key names
// its SHA-256 is checked against it as it is copied.

// blobPrefix is where a workspace's blobs live.
func blobPrefix(ws string) string { return "ws/" + ws + "/" }

type blobInfo struct {
	Size int64
	MD5  []byte // nil when the store does not report one
}

func listBlobs(ctx context.Context, b *gcblob.Bucket, prefix string) (map[string]blobInfo, error) {
	out := map[string]blobInfo{}
	err := cblob.Each(ctx, b, prefix, func(obj *gcblob.ListObject) error {
		out[obj.Key] = blobInfo{Size: obj.Size, MD5: obj.MD5}
		return nil
	})
	return out, err
}

// same reports whether two listings describe the same content (size, and MD5 when both have one).
func same(a, b blobInfo) bool {
	return a.Size == b.Size && (a.MD5 == nil || b.MD5 == nil || bytes.Equal(a.MD5, b.MD5))
}

// BlobStats counts what a blob copy did.
type BlobStats struct {
	Blobs   int64 // blobs of the workspace at the source
	Bytes   int64 // their total size
	Copied  int64
	Written int64 // bytes copied
	Deleted int64 // target blobs the source does not have
}

// blobCopiers is how many blobs are copied at once.
const blobCopiers = 4

// syncBlobs makes the target's blobs of ws equal to the source's: it copies what is missing or
// different and deletes what the source does not have.
func syncBlobs(ctx context.Context, src, dst *gcblob.Bucket, ws string, progress func(done, total int64)) (BlobStats, error) {
	var st BlobStats
	prefix := blobPrefix(ws)
	have, err := listBlobs(ctx, src, prefix)
	if err != nil {
		return st, fmt.Errorf("list the source's blobs: %w", err)
	}
	there, err := listBlobs(ctx, dst, prefix)
	if err != nil {
		return st, fmt.Errorf("list the target's blobs: %w", err)
	}
	var todo []string
	var total int64
	for k, info := range have {
		st.Blobs++
		st.Bytes += info.Size
		if t, ok := there[k]; !ok || !same(info, t) {
			todo = append(todo, k)
			total += info.Size
		}
	}
	sort.Strings(todo)
	var mu sync.Mutex
	var done int64
	if progress != nil {
		progress(0, total)
	}
	work := make(chan string)
	errs := make(chan error, blobCopiers)
	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range blobCopiers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				_, replace := there[k]
				n, err := copyBlob(cctx, src, dst, k, replace)
				if err != nil {
					errs <- fmt.Errorf("copy blob %s: %w", k, err)
					cancel()
					return
				}
				mu.Lock()
				st.Copied++
				st.Written += n
				done += n
				if progress != nil {
					progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, k := range todo {
		select {
		case work <- k:
		case <-cctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return st, err
	default:
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	for k := range there {
		if _, ok := have[k]; !ok {
			if err := dst.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return st, fmt.Errorf("delete blob %s from the target: %w", k, err)
			}
			st.Deleted++
		}
	}
	return st, nil
}

// contentAddress returns the SHA-256 a key names (ws/<ws>/sha256/<hex>), or "".
func contentAddress(key string) string {
	i := strings.LastIndex(key, "/sha256/")
	if i < 0 {
		return ""
	}
	h := key[i+len("/sha256/"):]
	if len(h) != 64 {
		return ""
	}
	return h
}

// copyBlob copies one blob, checking its bytes against the SHA-256 its key names (if any) and
// the MD5 the source reports (if any) before the write is committed.
func copyBlob(ctx context.Context, src, dst *gcblob.Bucket, key string, replace bool) (int64, error) {
	attrs, err := src.Attributes(ctx, key)
	if err != nil {
		return 0, err
	}
	rd, err := src.NewReader(ctx, key, nil)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	if replace {
		if err := dst.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return 0, err
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := dst.NewWriter(wctx, key, &gcblob.WriterOptions{ContentType: attrs.ContentType})
	if err != nil {
		return 0, err
	}
	sh, mh := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(w, sh, mh), rd)
	if err == nil {
		if want := contentAddress(key); want != "" && hex.EncodeToString(sh.Sum(nil)) != want {
			err = fmt.Errorf("the source's bytes do not hash to the address %s", want)
		} else if attrs.MD5 != nil && !bytes.Equal(attrs.MD5, mh.Sum(nil)) {
			err = errors.New("the source's bytes do not match the MD5 it reports")
		}
	}
	if err != nil {
		cancel() // a canceled writer discards its bytes
		_ = w.Close()
		return 0, err
	}
	return n, w.Close()
}

// BlobSum describes a workspace's blobs on one side: count, bytes and a digest of the sorted
// keys with their sizes and MD5s.
type BlobSum struct {
	Blobs  int64  `json:"blobs"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// verifyBlobs compares the workspace's blobs on both sides: the same keys, sizes and MD5s
// (where a store reports none, the bytes of both sides are hashed and compared).
func verifyBlobs(ctx context.Context, src, dst *gcblob.Bucket, ws string) (BlobSum, BlobSum, []string, error) {
	prefix := blobPrefix(ws)
	a, errA := listBlobs(ctx, src, prefix)
	b, errB := listBlobs(ctx, dst, prefix)
	if err := errors.Join(errA, errB); err != nil {
		return BlobSum{}, BlobSum{}, nil, err
	}
	var bad []string
	for k, x := range a {
		y, ok := b[k]
		switch {
		case !ok:
			bad = append(bad, k+": missing on the target")
		case x.Size != y.Size:
			bad = append(bad, fmt.Sprintf("%s: %d bytes on the source, %d on the target", k, x.Size, y.Size))
		case x.MD5 == nil || y.MD5 == nil:
			hx, errX := hashBlob(ctx, src, k)
			hy, errY := hashBlob(ctx, dst, k)
			if err := errors.Join(errX, errY); err != nil {
				return BlobSum{}, BlobSum{}, nil, err
			}
			if hx != hy {
				bad = append(bad, k+": content differs")
			}
		case !bytes.Equal(x.MD5, y.MD5):
			bad = append(bad, k+": content differs")
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			bad = append(bad, k+": on the target only")
		}
	}
	sort.Strings(bad)
	return blobSum(a), blobSum(b), bad, nil
}

func hashBlob(ctx context.Context, b *gcblob.Bucket, key string) (string, error) {
	rd, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return "", err
	}
	defer rd.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rd); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func blobSum(m map[string]blobInfo) BlobSum {
	keys := make([]string, 0, len(m))
	var s BlobSum
	for k, v := range m {
		keys = append(keys, k)
		s.Blobs++
		s.Bytes += v.Size
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%d\x00%x\n", k, m[k].Size, m[k].MD5)
	}
	s.SHA256 = hex.EncodeToString(h.Sum(nil))
	return s
}

// deleteBlobs deletes every blob of ws from b.
func deleteBlobs(ctx context.Context, b *gcblob.Bucket, ws string) (int64, error) {
	have, err := listBlobs(ctx, b, blobPrefix(ws))
	if err != nil {
		return 0, err
	}
	var n int64
	for k := range have {
		if err := b.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return n, err
		}
		n++
	}
	return n, nil
}
