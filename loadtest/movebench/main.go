// Command movebench measures a workspace move: it starts its own PostgreSQL, directory, two
// cells and the router on loopback, gives a workspace -pages pages with one version each and
// -assets MiB of assets, and moves it from cell-a to cell-b with cellctl while a client writes to
// it through the router without pause (each write retried with its Idempotency-Key on 503). It
// reports the move's step timings, the write-unavailable window cellctl recorded (fence → flip)
// and the window the client saw (from its first 503 to its first success after it), then moves
// the workspace back (a second move, which finds the source's old copy gone).
//
//	make build && go run ./loadtest/movebench -pages 1000 -assets 200
//
// Pages and versions are written into the cell database directly (each a 2 KiB TSX source and
// its dependencies), since creating a thousand pages through jobs would measure the compiler;
// assets are uploaded through the API (2 MiB PNGs of random pixels), so their blobs are what a
// cell writes.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"slidecells/deploy/stack"
	"slidecells/shared/db"
)

func main() {
	pages := flag.Int("pages", 1000, "pages, one version each")
	assets := flag.Int("assets", 200, "MiB of assets (2 MiB each)")
	bin := flag.String("bin", "bin", "folder with the built binaries (make build)")
	keep := flag.Bool("keep", false, "keep the temp dir (logs)")
	flag.Parse()
	if err := run(*pages, *assets, *bin, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "movebench:", err)
		os.Exit(1)
	}
}

func run(pages, assetMiB int, bin string, keep bool) error {
	ctx := context.Background()
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "movebench-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755)
	if !keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("temp dir:", dir)
	}
	s, err := stack.Start(ctx, stack.Options{Dir: dir, BinDir: bin, Cells: []string{"cell-a", "cell-b"},
		Env: map[string][]string{"cell": {"LOG_LEVEL=warn", "CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0"}, "router": {"LOG_LEVEL=warn"}}})
	if err != nil {
		return err
	}
	defer s.Stop()
	demo, err := s.SeedDemo(ctx, filepath.Join(dir, "demo.json"))
	if err != nil {
		return err
	}
	ws := demo.WorkspaceA
	call := func(method, path, key, ctype string, body []byte) (int, []byte, http.Header, error) {
		req, _ := http.NewRequest(method, s.RouterURL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+demo.PAT)
		req.Header.Set("X-Workspace-ID", ws)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header, nil
	}
	st, b, _, err := call("POST", "/api/v1/projects", "bench-project", "application/json", []byte(`{"name":"Bench"}`))
	if err != nil || st != 201 {
		return fmt.Errorf("project: %d %s %v", st, b, err)
	}
	var prj struct{ ID string }
	_ = json.Unmarshal(b, &prj)

	start := time.Now()
	cell, err := db.Open(ctx, s.CellDBURL["cell-a"], db.Options{})
	if err != nil {
		return err
	}
	defer cell.Close()
	source := strings.Repeat("// a line of a slide's source, as long as an editor writes them\n", 32)
	for i := 0; i < pages; i += 100 {
		if _, err := cell.Pool.Exec(ctx, `
			INSERT INTO pages (workspace_id, id, project_id, key, title, file_type, created_by)
			SELECT $1, 'pg_bench' || g, $2, 'page-' || g, 'Page ' || g, 'tsx', 'usr_bench' FROM generate_series($3::INT8, $4::INT8) g`,
			ws, prj.ID, i, min(i+99, pages-1)); err != nil {
			return err
		}
		if _, err := cell.Pool.Exec(ctx, `
			INSERT INTO page_versions (workspace_id, page_id, version, file_type, source, source_digest, compiled_digest, dependencies, job_id, created_by)
			SELECT $1, 'pg_bench' || g, 1, 'tsx', $2 || g, 'sha256:' || md5(g::TEXT), 'sha256:' || md5(g::TEXT || 'c'),
			       '[{"key": "button", "version": 3, "depth": 1}]', 'job_bench' || g, 'usr_bench' FROM generate_series($3::INT8, $4::INT8) g`,
			ws, source, i, min(i+99, pages-1)); err != nil {
			return err
		}
	}
	for i := range assetMiB / 2 {
		img := image.NewNRGBA(image.Rect(0, 0, 724, 724)) // 2 MiB of random pixels: incompressible
		_, _ = rand.Read(img.Pix)
		var buf bytes.Buffer
		enc := png.Encoder{CompressionLevel: png.NoCompression}
		if err := enc.Encode(&buf, img); err != nil {
			return err
		}
		st, b, _, err := call("POST", fmt.Sprintf("/api/v1/assets/content?name=asset-%d", i), fmt.Sprintf("bench-asset-%d", i), "image/png", buf.Bytes())
		if err != nil || st != 201 {
			return fmt.Errorf("asset %d: %d %.200s %v", i, st, b, err)
		}
	}
	fmt.Printf("seeded %d pages, %d versions and %d MiB of assets in %s\n", pages, pages, assetMiB, time.Since(start).Round(time.Millisecond))

	for _, leg := range []struct{ from, to string }{{"cell-a", "cell-b"}, {"cell-b", "cell-a"}} {
		// A client writes without pause and measures what it sees.
		var stop atomic.Bool
		var firstFail, recovered atomic.Int64
		var writes, retries atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("w-%s-%d", leg.to, i)
				for !stop.Load() {
					st, _, h, err := call("POST", "/api/v1/projects", key, "application/json", []byte(fmt.Sprintf(`{"name":"w %d"}`, i)))
					now := time.Now().UnixNano()
					if err == nil && st == 201 {
						writes.Add(1)
						if firstFail.Load() != 0 && recovered.Load() == 0 {
							recovered.Store(now)
						}
						break
					}
					if err == nil && st == 503 && h.Get("Retry-After") != "" {
						retries.Add(1)
						firstFail.CompareAndSwap(0, now)
						time.Sleep(10 * time.Millisecond)
						continue
					}
					fmt.Fprintf(os.Stderr, "unexpected answer: %d %v\n", st, err)
					return
				}
			}
		}()
		time.Sleep(time.Second)
		cmd := exec.Command(filepath.Join(bin, "cellctl"), "workspaces", "move", ws, "--to", leg.to, "--grace", "0")
		cmd.Env = append(os.Environ(), "DIRECTORY_DATABASE_URL="+s.DirURL, "CELLCTL_CELLS_FILE="+s.CellsFile)
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(t0)
		time.Sleep(time.Second)
		stop.Store(true)
		<-done
		fmt.Printf("\n== move %s → %s: %s (cellctl wall time, connections included)\n%s", leg.from, leg.to, took.Round(time.Millisecond), out)
		if err != nil {
			return fmt.Errorf("move: %v", err)
		}
		seen := "no write was refused"
		if f, r := firstFail.Load(), recovered.Load(); f != 0 && r != 0 {
			seen = fmt.Sprintf("first 503 to first success after it: %s", time.Duration(r-f).Round(time.Millisecond))
		}
		id := regexp.MustCompile(`move (mv_\w+)`).FindSubmatch(out)
		fmt.Printf("client: %d writes, %d retried 503s; %s\n", writes.Load(), retries.Load(), seen)
		if id != nil {
			show := exec.Command(filepath.Join(bin, "cellctl"), "moves", "show", string(id[1]))
			show.Env = cmd.Env
			sout, _ := show.CombinedOutput()
			for _, l := range strings.Split(string(sout), "\n") {
				if strings.HasPrefix(l, "  ") && !strings.Contains(l, "/") {
					fmt.Println(l)
				}
			}
		}
	}
	return nil
}
