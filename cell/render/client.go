package render

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"
	"time"

	"slidecells/shared/digest"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/tracing"
)

// client speaks the renderer's control protocol (/internal/render/v1) to one trusted address
// with the service credential. It never logs the credential, tickets or tokens.
type client struct {
	http       *http.Client
	credential string
}

// errUnreachable is a transport failure: the answer is unknown, not "not executed".
var errUnreachable = errors.New("renderer unreachable")

// nonContract is an HTTP answer that is not one of the contract's: a proxy's 502, a server's
// own 431, a page of HTML. It says nothing about what the renderer did with the request and
// blames nobody: the caller handles it as an unclear answer (the attempt is queried, the
// worker is unready until the registry's next look), never as the renderer's protocol fault.
type nonContract struct{ status int }

func (e *nonContract) Error() string {
	return fmt.Sprintf("the renderer's address answered HTTP %d without a contract answer (a proxy or the server's own limits)", e.status)
}

func (e *nonContract) Unwrap() error { return errUnreachable }

// answer is a decoded control-API answer: a 2xx body, or a contract error.
type answer struct {
	status int
	err    *rc.Error
}

func (c *client) do(ctx context.Context, method, url string, body any, out any) (answer, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.credential)
	tracing.Inject(ctx, req.Header) // the attempt's trace (traceAttempt), for the renderer's log lines
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The cause (a refused connection, a TLS failure such as an unknown authority) is kept
		// for the logs; net/url's wrapper is dropped (it repeats the URL).
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return answer{}, fmt.Errorf("%w: %s %s: %w", errUnreachable, method, redactURL(url), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return answer{}, fmt.Errorf("%w: reading the answer", errUnreachable)
	}
	a := answer{status: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out != nil {
			if !json.Valid(data) {
				return a, &nonContract{status: resp.StatusCode} // not JSON: not the renderer's answer
			}
			if err := json.Unmarshal(data, out); err != nil {
				// JSON of another shape: a renderer of another contract.
				a.err = rc.NewError(rc.CodeContractMismatch, rc.StageRetrieval, "renderer answer is not %s", rc.ContractVersion)
			}
		}
		return a, nil
	}
	var e rc.Error
	if json.Unmarshal(data, &e) != nil || !e.Code.Known() {
		// Not an answer of the contract (a proxy's 502, Go's 431): nothing is known about the
		// request, and nothing blames the renderer.
		return a, &nonContract{status: resp.StatusCode}
	}
	a.err = &e
	return a, nil
}

func (c *client) capabilities(ctx context.Context, base string) (rc.Capabilities, answer, error) {
	var caps rc.Capabilities
	a, err := c.do(ctx, http.MethodGet, base+rc.APIRoot+"/capabilities", nil, &caps)
	return caps, a, err
}

func (c *client) post(ctx context.Context, base string, req *rc.ExecutionRequest) (rc.Receipt, answer, error) {
	var rec rc.Receipt
	a, err := c.do(ctx, http.MethodPost, base+rc.APIRoot+"/executions", req, &rec)
	return rec, a, err
}

func (c *client) get(ctx context.Context, base, attemptID string) (rc.Receipt, answer, error) {
	var rec rc.Receipt
	a, err := c.do(ctx, http.MethodGet, base+rc.APIRoot+"/executions/"+attemptID, nil, &rec)
	return rec, a, err
}

// await reads the receipt with the renderer's long-poll (rc.QueryReceiptState): the renderer
// answers once the attempt is no longer in state, or after wait. A renderer that predates the
// parameters answers at once, as get; the caller paces itself for that (Coordinator.poll).
func (c *client) await(ctx context.Context, base, attemptID string, state rc.AttemptState, wait time.Duration) (rc.Receipt, answer, error) {
	ms := wait.Milliseconds()
	if !state.Valid() || ms < 1 {
		return c.get(ctx, base, attemptID) // nothing the renderer would accept to wait on
	}
	q := neturl.Values{rc.QueryReceiptState: {string(state)}, rc.QueryReceiptWaitMS: {strconv.FormatInt(min(ms, rc.MaxReceiptWaitMS), 10)}}
	var rec rc.Receipt
	a, err := c.do(ctx, http.MethodGet, base+rc.APIRoot+"/executions/"+attemptID+"?"+q.Encode(), nil, &rec)
	return rec, a, err
}

func (c *client) cancel(ctx context.Context, base, attemptID string, version int64) (answer, error) {
	return c.do(ctx, http.MethodPut, base+rc.APIRoot+"/executions/"+attemptID+"/cancellation",
		rc.CancelRequest{CancelVersion: version, Reason: "cancelled by the coordinator"}, nil)
}

func (c *client) consume(ctx context.Context, base, attemptID string) (answer, error) {
	return c.do(ctx, http.MethodPut, base+rc.APIRoot+"/executions/"+attemptID+"/result-consumption", struct{}{}, nil)
}

// artifact fetches one artifact and verifies it against its descriptor: length, type and
// SHA-256 (the header and the bytes). A mismatch is RENDER_RESULT_LOST: nothing incomplete is
// committed.
func (c *client) artifact(ctx context.Context, base, attemptID string, d rc.Artifact) ([]byte, *rc.Error) {
	lost := func(format string, args ...any) ([]byte, *rc.Error) {
		return nil, rc.NewError(rc.CodeResultLost, rc.StageRetrieval, format, args...)
	}
	if !d.Name.Valid() || d.Bytes <= 0 || d.Bytes > d.Name.MaxBytes() || d.ContentType != d.Name.ContentType() {
		return nil, rc.NewError(rc.CodeOutputLimitExceeded, rc.StageRetrieval, "artifact descriptor outside the contract limits")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+rc.APIRoot+"/executions/"+attemptID+"/artifacts/"+string(d.Name), nil)
	if err != nil {
		return lost("artifact request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.credential)
	resp, err := c.http.Do(req)
	if err != nil {
		return lost("artifact could not be fetched")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return lost("artifact answered %d", resp.StatusCode)
	}
	if n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil && n != d.Bytes {
		return lost("artifact length %d differs from its descriptor", n)
	}
	if resp.Header.Get(rc.HeaderArtifactSHA256) != "" && resp.Header.Get(rc.HeaderArtifactSHA256) != d.SHA256 {
		return lost("artifact digest header differs from its descriptor")
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, d.Bytes+1))
	if err != nil || int64(len(data)) != d.Bytes {
		return lost("artifact bytes differ from the descriptor's length")
	}
	// The contract's digest string; a bare hex digest is accepted too.
	if got := digest.Bytes(data); got != d.SHA256 && got != digest.Prefix+d.SHA256 {
		return lost("artifact bytes do not match their SHA-256")
	}
	return data, nil
}

func newClient(credential string) *client { return newClientTrusting(credential, nil) }

// newClientTrusting returns the renderers' client; with roots, only those CAs are trusted for
// TLS (RENDER_WORKERS_CA_FILE).
func newClientTrusting(credential string, roots *x509.CertPool) *client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if roots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	t.MaxIdleConnsPerHost = 8
	t.ResponseHeaderTimeout = 10 * time.Second
	return &client{http: &http.Client{Transport: t, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, credential: credential}
}

// redactURL keeps scheme, host and path of a renderer URL (they carry no secret) for errors.
func redactURL(u string) string {
	if len(u) > 200 {
		return u[:200]
	}
	return u
}
