package stack

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"slidecells/shared/pgserver"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// ChromiumPath is the Debian browser binary the renderers launch.
const ChromiumPath = "/usr/lib/chromium/chromium"

// ensureChromium installs Debian's chromium and fonts when the browser is missing and we are root.
func ensureChromium(log func(string, ...any)) error {
	if _, err := os.Stat(ChromiumPath); err == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("chromium not found at " + ChromiumPath + ": install Debian's chromium package")
	}
	log("installing Debian's chromium and fonts")
	cmd := exec.Command("apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium", "fonts-dejavu-core", "fonts-liberation2")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install chromium: %v: %s", err, lastLines(out))
	}
	return nil
}

func lastLines(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 1500 {
		s = s[len(s)-1500:]
	}
	return s
}

// ticketKeys returns the public key list renderers verify admission tickets with, creating the
// local key pair once. The private key stays in dir (0600) for the cells' coordinators.
func ticketKeys(dir string) (string, error) {
	path := filepath.Join(dir, "ticket-signer")
	if b, err := os.ReadFile(path); err == nil {
		s, err := ticket.ParseSigner(strings.TrimSpace(string(b)))
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return s.PublicKey().String(), nil
	}
	s, err := ticket.GenerateSigner("local-1")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(s.EncodePrivate()+"\n"), 0o600); err != nil {
		return "", err
	}
	return s.PublicKey().String(), nil
}

// serviceCredential returns the path of the renderers' service credential file, creating a
// random credential once (0600 in dir). Renderers require it on every endpoint but /livez; the
// cells read the same file for their health probe and coordinators.
func serviceCredential(dir string) (string, error) {
	return credentialFile(dir, "renderer-service-credential")
}

// credentialFile returns the path of dir/name, creating a random credential there once (0600).
func credentialFile(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// RenderersPerCell is how many renderers the stack starts for each cell (worker IDs
// <cell>-r1, <cell>-r2, …): more than one, so that scheduling across workers runs locally too.
const RenderersPerCell = 2

// rendererSpec is one renderer as the stack starts it and as its cell is told about it.
type rendererSpec struct {
	WorkerID string `json:"worker_id"`
	URL      string `json:"url"`
	port     int
}

// planRenderers picks the worker IDs and ports of a cell's renderers.
func planRenderers(cell string) ([]rendererSpec, error) {
	out := make([]rendererSpec, RenderersPerCell)
	for i := range out {
		port, err := pgserver.FreePort()
		if err != nil {
			return nil, err
		}
		out[i] = rendererSpec{WorkerID: cell + "-r" + strconv.Itoa(i+1), URL: "http://127.0.0.1:" + strconv.Itoa(port), port: port}
	}
	return out, nil
}

// workersConfig is RENDER_WORKERS_CONFIG for a cell: its renderers' identities and addresses.
func workersConfig(specs []rendererSpec) string {
	b, _ := json.Marshal(specs)
	return string(b)
}

// tag tells this deployment's host-wide names from another's: a hash of its folder, so a
// deployment restarted on the same folder (make run) finds its own leftovers again.
func (s *Stack) tag() string {
	dir, err := filepath.Abs(s.opts.Dir)
	if err != nil {
		dir = s.opts.Dir
	}
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:4])
}

// tempRoot is a renderer's RENDER_TEMP_ROOT (at most 40 characters); Stop removes it.
func (s *Stack) tempRoot(worker string) string {
	return "/tmp/scr-" + s.tag() + "-" + worker
}

// startRenderer starts one renderer of a cell. It opens preview documents at the cell's preview
// host (previewURL, the origin the browser may reach) and runs with the stack's profile
// manifest, so its environment digest is the one the cell requires.
func (s *Stack) startRenderer(cell string, spec rendererSpec, previewURL, publicKeys, credentialFile, manifest string) (*Proc, error) {
	o := s.opts
	p := &Proc{Name: spec.WorkerID, URL: spec.URL, bin: filepath.Join(o.BinDir, "renderer"),
		log: filepath.Join(o.Dir, "logs", spec.WorkerID+".log"),
		env: append([]string{
			"RENDER_WORKER_ID=" + spec.WorkerID,
			"RENDER_LISTEN_ADDR=127.0.0.1:" + strconv.Itoa(spec.port),
			"RENDER_TICKET_PUBLIC_KEYS=" + publicKeys,
			"RENDER_PREVIEW_BASE_URL=" + previewURL + "/",
			"RENDER_ASSET_ORIGINS=" + previewURL,
			"RENDER_PROFILE_MANIFEST=" + manifest,
			// Host-wide names of this deployment's own: another deployment on the host (parallel
			// tests, a benchmark next to make run) has renderers of the same worker IDs, and a
			// renderer's start kills what it finds in its cgroup and removes its temp root's
			// results.
			"RENDER_TEMP_ROOT=" + s.tempRoot(spec.WorkerID),
			"RENDER_CGROUP_NAME=slidecells-renderer-" + s.tag() + "-" + spec.WorkerID,
			"RENDER_SERVICE_CREDENTIAL_FILE=" + credentialFile,
		}, o.Env["renderer"]...)}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// writeProfile writes the release's render profile manifest once per start, with `renderer
// profile` (so it matches the Chromium and fonts installed now), pinning the preview host build
// the cells' snapshots record. Renderers and cells both get the file as RENDER_PROFILE_MANIFEST.
func (s *Stack) writeProfile(ctx context.Context, dir string) (path, digest string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.opts.BinDir, "renderer"), "profile", "--preview-host-build", rc.PreviewHostBuild)
	cmd.Env = append(os.Environ(), s.opts.Env["renderer"]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("renderer profile: %v: %s", err, lastLines([]byte(stderr.String())))
	}
	var p rc.RenderProfile
	if err := json.Unmarshal(out, &p); err != nil {
		return "", "", fmt.Errorf("renderer profile printed no profile: %w", err)
	}
	if digest, err = p.Digest(); err != nil {
		return "", "", err
	}
	path = filepath.Join(dir, "render-profile.json")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	return path, digest, os.WriteFile(path, out, 0o644)
}

// StartSpareRenderer starts one more renderer on a cell's preview host that the cell does not
// know (it is not in the cell's RENDER_WORKERS_CONFIG): benchmarks drive it directly to measure
// the executor alone next to the whole path.
func (s *Stack) StartSpareRenderer(cell string) (*Proc, error) {
	pv := s.Previews[cell]
	if pv == nil || s.ProfileManifest == "" {
		return nil, fmt.Errorf("stack: cell %s has no preview host or the stack no renderers", cell)
	}
	keys := filepath.Join(s.opts.Dir, "keys")
	publicKeys, err := ticketKeys(keys)
	if err != nil {
		return nil, err
	}
	cred, err := serviceCredential(keys)
	if err != nil {
		return nil, err
	}
	port, err := pgserver.FreePort()
	if err != nil {
		return nil, err
	}
	spec := rendererSpec{WorkerID: cell + "-spare", URL: "http://127.0.0.1:" + strconv.Itoa(port), port: port}
	p, err := s.startRenderer(cell, spec, pv.URL, publicKeys, cred, s.ProfileManifest)
	if err != nil {
		return nil, err
	}
	s.spares = append(s.spares, p) // not one of the cell's renderers (Renderers[cell])
	return p, nil
}
