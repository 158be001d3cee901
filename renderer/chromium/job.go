package chromium

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	rc "slidecells/shared/rendercontract"
)

// Job is what the control process tells the child. It arrives on standard
// input because it holds the preview token.
type Job struct {
	AttemptID string           `json:"attempt_id"`
	TraceID   string           `json:"trace_id"`
	Operation rc.Operation     `json:"operation"`
	Viewport  rc.Viewport      `json:"viewport"`
	Scenes    []string         `json:"scenes"`
	Browser   BrowserSettings  `json:"browser"`
	Document  DocumentSettings `json:"document"`
	// Budget is how long the child may work, counted from when it reads
	// the job. The supervisor's hard deadline is the real limit; the
	// child uses Budget only to stop polling in time to report what it
	// saw.
	Budget time.Duration `json:"budget"`
	// ContentReady is the content budget: a committed document that is not ready within it
	// (counted from the first readiness read) is the page's fault, RENDER_CONTENT_ERROR. Zero
	// means none (only Budget).
	ContentReady time.Duration `json:"content_ready,omitempty"`
	// BrowserLog forwards the browser's own output to the child's
	// standard error, for diagnosing launch problems.
	BrowserLog bool `json:"browser_log,omitempty"`
	// EgressProxy is host:port of the attempt's egress proxy inside its
	// network namespace: the browser's only way out.
	EgressProxy string `json:"egress_proxy"`
	// Probe asks for the launch probe only: start the browser with the
	// attempt's flags and sandbox, open a blank page, close it.
	Probe bool `json:"probe,omitempty"`
	// Standby marks the first message of a child prepared before its
	// attempt is known: only the launch parameters (Browser, BrowserLog,
	// EgressProxy, Document.AllowedOrigins, NoBrowserGate) and
	// StandbyCheck are set, no request data. The attempt's job follows on
	// standard input when an attempt takes the child.
	Standby bool `json:"standby,omitempty"`
	// StandbyCheck is how often a standby checks its idle browser; zero
	// means DefaultStandbyCheck.
	StandbyCheck time.Duration `json:"standby_check,omitempty"`
	// NoBrowserGate switches the in-browser network layers (request
	// interception, resolver rules) off. Only tests set it, to show that
	// the kernel boundary holds alone.
	NoBrowserGate bool `json:"no_browser_gate,omitempty"`
	// Traceparent is the attempt's W3C trace context (shared/tracing), sent with the request
	// for the preview document only, like the access token: the preview host logs the
	// caller's trace for the document it serves. Page scripts never see request headers.
	Traceparent string `json:"traceparent,omitempty"`
}

// DocumentSettings say what to open and what to expect there.
type DocumentSettings struct {
	// URL is the preview document, built by the control process from
	// trusted configuration and the snapshot reference.
	URL string `json:"url"`
	// AllowedOrigins are the only origins the browser may contact; the
	// document's origin is always among them.
	AllowedOrigins []string `json:"allowed_origins"`
	// AccessToken is attached as rc.PreviewAccessHeader to requests for
	// exactly the document's origin and path.
	AccessToken string `json:"access_token"`
	// ArtifactID and InputDigest must match what the host reports.
	ArtifactID  string `json:"artifact_id"`
	InputDigest string `json:"input_digest"`
	// HostBuild, when set, must match the host's host_build.
	HostBuild string `json:"host_build,omitempty"`
}

// BrowserSettings fix how Chromium runs.
type BrowserSettings struct {
	Path     string `json:"path"`
	Locale   string `json:"locale"`
	Timezone string `json:"timezone"`
}

// Event types.
const (
	EventBrowserStarted = "browser_started"
	EventReady          = "ready"
	EventArtifact       = "artifact"
	EventResult         = "result"
	// EventStandbyReady: a standby's browser started with the attempt's
	// launch parameters and passed its first check; it waits for a job.
	EventStandbyReady = "standby_ready"
	// EventStandbyFailed: a standby's browser did not start, exited or
	// failed a check before any job arrived (Message says which); the
	// child ends.
	EventStandbyFailed = "standby_failed"
)

// Event is one line of the child's output.
type Event struct {
	Type     string         `json:"type"`
	At       time.Time      `json:"at"`
	Artifact *ArtifactFrame `json:"artifact,omitempty"`
	Result   *ChildResult   `json:"result,omitempty"`
	// Message is a short, fixed reason (EventStandbyFailed); never
	// request data.
	Message string `json:"message,omitempty"`
}

// ArtifactFrame announces Bytes raw bytes of artifact Name after the line.
type ArtifactFrame struct {
	Name   rc.ArtifactName `json:"name"`
	Bytes  int64           `json:"bytes"`
	Width  int             `json:"width,omitempty"`
	Height int             `json:"height,omitempty"`
}

// ChildResult ends the child's output. Error nil means the artifact events
// before it are the complete result.
type ChildResult struct {
	Error       *rc.Error `json:"error,omitempty"`
	HostBuild   string    `json:"host_build,omitempty"`
	ArtifactID  string    `json:"artifact_id,omitempty"`
	InputDigest string    `json:"input_digest,omitempty"`
	// BlockedRequests counts requests the browser was not allowed to
	// make.
	BlockedRequests int `json:"blocked_requests"`
	// IgnoredReadinessCalls counts calls of the readiness binding that
	// did not come from the preview document's main world (iframes, other
	// documents): content trying the channel.
	IgnoredReadinessCalls int `json:"ignored_readiness_calls"`
}

// maxEventLine bounds one JSON line; artifacts travel as raw frames.
const maxEventLine = 64 << 10

// EventWriter writes events; safe for concurrent use.
type EventWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEventWriter wraps w.
func NewEventWriter(w io.Writer) *EventWriter { return &EventWriter{w: w} }

// Send writes one event line.
func (e *EventWriter) Send(ev Event) error {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err = e.w.Write(append(b, '\n'))
	return err
}

// SendArtifact writes an artifact frame and its bytes.
func (e *EventWriter) SendArtifact(f ArtifactFrame, data []byte) error {
	f.Bytes = int64(len(data))
	b, err := json.Marshal(Event{Type: EventArtifact, At: time.Now().UTC(), Artifact: &f})
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		return err
	}
	_, err = e.w.Write(data)
	return err
}

// ErrFrameTooLarge is returned by ReadEvents for an artifact above its
// contract limit; the reader stops, because the stream can no longer be
// trusted.
var ErrFrameTooLarge = errors.New("chromium: artifact frame above its limit")

// ReadEvents reads events until EOF. For an artifact event, body yields
// exactly the announced bytes; handle must consume it or the rest is
// discarded. Artifact names outside the allowed set and frames above the
// artifact's limit end reading with an error.
func ReadEvents(r io.Reader, handle func(ev Event, body io.Reader) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("chromium: bad event line: %w", err)
		}
		if ev.Type != EventArtifact {
			if err := handle(ev, nil); err != nil {
				return err
			}
			continue
		}
		if ev.Artifact == nil || !ev.Artifact.Name.Valid() || ev.Artifact.Bytes < 0 {
			return fmt.Errorf("chromium: bad artifact frame")
		}
		if ev.Artifact.Bytes > ev.Artifact.Name.MaxBytes() {
			return ErrFrameTooLarge
		}
		body := io.LimitReader(br, ev.Artifact.Bytes)
		if err := handle(ev, body); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if errors.Is(err, os.ErrClosed) {
			// The supervisor closes its end once the group is gone;
			// at a line boundary that is the end of the stream.
			err = io.EOF
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxEventLine {
			return nil, fmt.Errorf("chromium: event line above %d bytes", maxEventLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}
