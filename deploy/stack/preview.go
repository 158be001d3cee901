package stack

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"slidecells/shared/pgserver"
)

// previewBinary is the preview host's binary in the bin folder. The stack starts one per cell
// when it exists (it is built from cell/cmd/preview).
func (s *Stack) previewBinary() (string, bool) {
	p := filepath.Join(s.opts.BinDir, "preview")
	st, err := os.Stat(p)
	return p, err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// previewPlan is where a cell's preview host listens and the service credential it and its
// cell share.
type previewPlan struct {
	URL        string // http://127.0.0.1:port, no trailing slash
	port       int
	credential string
}

func planPreview(keys, cell string) (previewPlan, error) {
	port, err := pgserver.FreePort()
	if err != nil {
		return previewPlan{}, err
	}
	// One credential per cell: a cell's preview host can pull only from its own cell.
	cred, err := credentialFile(keys, "preview-service-credential-"+cell)
	if err != nil {
		return previewPlan{}, err
	}
	return previewPlan{URL: "http://127.0.0.1:" + strconv.Itoa(port), port: port, credential: cred}, nil
}

// startPreview starts a cell's preview host: it serves the renderers' documents
// (GET /snapshots/{ref}) and the router's public form (/preview/w/{ws}/…), pulling snapshots
// from cellURL with the shared credential.
func (s *Stack) startPreview(cell, bin, cellURL string, plan previewPlan) (*Proc, error) {
	o := s.opts
	p := &Proc{Name: cell + "-preview", URL: plan.URL, bin: bin,
		log: filepath.Join(o.Dir, "logs", cell+"-preview.log"),
		env: append(append([]string{
			"PREVIEW_LISTEN_ADDR=127.0.0.1:" + strconv.Itoa(plan.port),
			"PREVIEW_BACKEND_URL=" + cellURL,
			"PREVIEW_SERVICE_CREDENTIAL_FILE=" + plan.credential,
		}, o.Env["preview"]...), o.Env[cell+"-preview"]...)}
	if err := p.Start(); err != nil {
		return nil, err
	}
	s.Previews[cell] = p
	return p, nil
}

// waitAnswering waits until the process answers HTTP at all (any status): the stack does not
// assume which health endpoints a preview host has.
func (p *Proc) waitAnswering(ctx context.Context, limit time.Duration) error {
	return p.poll(ctx, limit, "/livez", "", func(int) bool { return true }, "answering")
}
