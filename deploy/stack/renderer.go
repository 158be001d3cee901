package stack

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"slidecells/shared/pgserver"
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
	path := filepath.Join(dir, "renderer-service-credential")
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

// startRenderer starts one renderer for a cell. Its preview base is the cell's preview host path.
func (s *Stack) startRenderer(cell, cellURL, publicKeys, credentialFile string) (*Proc, error) {
	port, err := pgserver.FreePort()
	if err != nil {
		return nil, err
	}
	o := s.opts
	p := &Proc{Name: cell + "-renderer", URL: "http://127.0.0.1:" + strconv.Itoa(port), bin: filepath.Join(o.BinDir, "renderer"),
		log: filepath.Join(o.Dir, "logs", cell+"-renderer.log"),
		env: append([]string{
			"RENDER_WORKER_ID=" + cell + "-r1",
			"RENDER_LISTEN_ADDR=127.0.0.1:" + strconv.Itoa(port),
			"RENDER_TICKET_PUBLIC_KEYS=" + publicKeys,
			"RENDER_PREVIEW_BASE_URL=" + cellURL + "/preview",
			"RENDER_TEMP_ROOT=/tmp/slidecells-r-" + cell,
			"RENDER_SERVICE_CREDENTIAL_FILE=" + credentialFile,
		}, o.Env["renderer"]...)}
	if err := p.Start(); err != nil {
		return nil, err
	}
	s.Renderers[cell] = p
	return p, nil
}
