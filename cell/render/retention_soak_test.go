package render

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"slidecells/cell/snapshot"
	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
)

// BenchmarkRetentionSoak runs a mixed render load through the coordinator's own dispatch,
// commit, finish and cancel paths (real PostgreSQL, real file blob store; the renderers are
// database rows and each execution's result is written as a renderer's would be fetched), with
// two cleaners (two replicas) and a short retention window, and prints the render tables' row
// counts and the bytes under renders/ and snapshots/ every 5 s. The mix per 10 operations: 5
// screenshots (a 64 KiB PNG each, 4 of 5 consumed), 2 validations (consumed), 1 content
// failure, 1 screenshot cancelled after its PNG was stored (a late commit: an orphan PNG under
// its request), 1 expired-later preview artifact (a manifest no request refers to, valid 5 s).
//
//	RENDER_SOAK_SECONDS=120 go test ./cell/render -run '^$' -bench RetentionSoak -benchtime 1x
func BenchmarkRetentionSoak(b *testing.B) {
	dur := 60 * time.Second
	if s, err := strconv.Atoi(os.Getenv("RENDER_SOAK_SECONDS")); err == nil && s > 0 {
		dur = time.Duration(s) * time.Second
	}
	const workspaces, rate = 4, 20 // operations per second
	f := setup(b, workspaces)
	c := f.coordinator(b, f.addWorkers(b, 8), nil)
	cfg := RetentionConfig{Window: 10 * time.Second, Grace: time.Second, Interval: time.Second, Batch: 100,
		OrphanInterval: 5 * time.Second, OrphanAfter: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		r := NewRetention(cfg, f.coordinator(b, nil, nil).db, c.bucket, nil)
		go r.Run(ctx)
	}
	png := bytes.Repeat([]byte{1}, 64<<10)
	sample := func() string {
		var reqs, atts, res int
		_ = f.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM render_requests), (SELECT count(*) FROM render_attempts),
			(SELECT count(*) FROM render_results)`).Scan(&reqs, &atts, &res)
		var rn, rb, sn, sb int64
		_ = filepath.WalkDir(filepath.Join(f.bucket, "ws"), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, ".attrs") {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			switch {
			case strings.Contains(p, "/renders/"):
				rn, rb = rn+1, rb+info.Size()
			case strings.Contains(p, "/snapshots/"):
				sn, sb = sn+1, sb+info.Size()
			}
			return nil
		})
		return fmt.Sprintf("| %d | %d | %d | %d | %.1f | %d | %.1f |", reqs, atts, res, rn, float64(rb)/(1<<20), sn, float64(sb)/(1<<10))
	}
	fmt.Printf("| t (s) | operations | render_requests | render_attempts | render_results | PNGs | renders/ MiB | manifests | snapshots/ KiB |\n")
	b.ResetTimer()
	start := time.Now()
	next := start
	ops := 0
	for i := 0; time.Since(start) < dur; i++ {
		if !time.Now().Before(next) {
			el := time.Since(start).Round(time.Second)
			fmt.Printf("| %d | %d %s\n", int(el.Seconds()), ops, sample())
			next = next.Add(5 * time.Second)
		}
		time.Sleep(time.Second / rate)
		sc := f.scopes[i%workspaces]
		kind := i % 10
		if kind == 9 {
			m := manifest(b, sc, i)
			now := time.Now().UTC()
			m.Ref, m.Owner, m.CreatedAt, m.ExpiresAt = ids.New(ids.Snapshot), "preview:soak", now, now.Add(5*time.Second)
			if err := snapshot.Save(ctx, c.bucket, m); err != nil {
				b.Fatal(err)
			}
			ops++
			continue
		}
		cat := Background
		if kind == 5 || kind == 6 {
			cat = Interactive
		}
		r := f.submit(b, c, sc, i, cat)
		rsv, err := c.dispatchOne(ctx)
		if err != nil || rsv == nil || rsv.req.ID != r.ID {
			b.Fatalf("dispatch: %v %v", err, rsv)
		}
		a := &attempt{req: rsv.req, attemptID: rsv.attemptID, workerID: rsv.workerID, epoch: rsv.epoch, url: rsv.url,
			slotGeneration: rsv.slotGeneration, state: "dispatched"}
		res := &Result{AttemptID: a.attemptID, HostBuild: "preview-host-1"}
		if cat == Background {
			res.ArtifactKey = rendersPrefix(sc.WorkspaceID()) + r.ID + "/" + a.attemptID + "/" + fmt.Sprintf("%064x", i) + ".png"
			res.ArtifactSHA256, res.Bytes, res.Width, res.Height = "sha256:"+fmt.Sprintf("%064x", i), int64(len(png)), 320, 180
			if err := c.bucket.WriteAll(ctx, res.ArtifactKey, png, nil); err != nil {
				b.Fatal(err)
			}
		} else {
			res.Diagnosis = &rc.Diagnosis{SchemaVersion: rc.DiagnosisSchemaVersion, Operation: r.Operation}
		}
		switch {
		case kind == 7:
			c.finish(ctx, a, rc.NewError(rc.CodeContentError, rc.StageCapture, "broken"), true)
		case kind == 8:
			if _, err := c.Cancel(ctx, sc, r.ID); err != nil {
				b.Fatal(err)
			}
			c.commit(ctx, a, res) // late: the PNG stays under the request, unreferenced
		default:
			c.commit(ctx, a, res)
			if kind != 4 {
				if _, err := c.Result(ctx, sc, r.ID); err != nil {
					b.Fatal(err)
				}
			}
		}
		ops++
	}
	b.StopTimer()
	fmt.Printf("| %d | %d %s\n", int(time.Since(start).Round(time.Second).Seconds()), ops, sample())
}
