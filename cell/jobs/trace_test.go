package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"slidecells/shared/tracing"
)

// TestJobRunsInTheSubmittersTrace: a job stores the traceparent of the request that submitted
// it, and its run (in any worker) has that trace in its context, so its log lines and spans
// carry it; a job submitted without a trace stores none and still runs in a trace of its own.
func TestJobRunsInTheSubmittersTrace(t *testing.T) {
	f := setup(t)
	seen := make(chan string, 2)
	f.pool(t, map[string]Handler{"ok": func(ctx context.Context, r *Run) (json.RawMessage, error) {
		seen <- tracing.TraceID(ctx)
		return nil, commitProject(ctx, r)
	}})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, _ := tracing.Start(tracing.Extract(context.Background(), http.Header{"Traceparent": {tp}}, ""), "request")
	j, err := f.q.Enqueue(ctx, f.scope, NewJob{Kind: "ok", Input: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	f.q.Notify()
	if sc, ok := tracing.Parse(j.Traceparent); !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("stored traceparent %q", j.Traceparent)
	}
	if got := f.wait(t, j.ID, Succeeded, Failed); got.Status != Succeeded || got.Traceparent != j.Traceparent {
		t.Fatalf("job %s, traceparent %q", got.Status, got.Traceparent)
	}
	if got := <-seen; got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the run's trace is %q", got)
	}

	plain := f.enqueue(t, "ok", 0)
	if plain.Traceparent != "" {
		t.Errorf("a job without a trace stored %q", plain.Traceparent)
	}
	f.wait(t, plain.ID, Succeeded, Failed)
	if got := <-seen; got == "" || got == "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("a job without a stored trace ran in trace %q", got)
	}
}
