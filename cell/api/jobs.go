package api

import (
	"context"
	"net/http"
	"strings"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/jobs"
)

const jobsPath = "/api/v1/jobs/mutations"

// kindScopes are the scopes reading and changing a job of a kind need (the job operations
// declare workspace:read; the kind's own scope is checked once the job is loaded).
func kindScopes(kind string) (read, write auth.Permission) {
	if strings.HasPrefix(kind, "component.") {
		return auth.ComponentRead, auth.ComponentWrite
	}
	return auth.PageRead, auth.PageWrite
}

type jobsAPI struct {
	q   *jobs.Queue
	svc *authoring.Service
}

type jobIn = struct{ ObjectID }

func (s *Server) registerJobs(q *jobs.Queue, svc *authoring.Service) {
	h := &jobsAPI{q: q, svc: svc}
	tags := []string{"jobs"}
	Scoped(s, Operation{ID: "get-mutation-job", Method: http.MethodGet, Path: jobsPath + "/{job_id}", Tags: tags, ReadOnly: true,
		Summary: "Mutation job status (poll it: the only progress channel); needs the read scope of the job's kind", Scopes: []auth.Permission{auth.WorkspaceRead}},
		h.get)
	Scoped(s, Operation{ID: "cancel-mutation-job", Method: http.MethodPost, Path: jobsPath + "/{job_id}/cancel", Tags: tags, Idempotency: KeyRequired,
		Summary: "Cancel a job: a pending one at once, a running one cooperatively before any write; a finished one is 409", Scopes: []auth.Permission{auth.WorkspaceRead}},
		h.cancel)
	Scoped(s, Operation{ID: "retry-mutation-job", Method: http.MethodPost, Path: jobsPath + "/{job_id}/retry", Tags: tags, Idempotency: KeyRequired,
		Status: http.StatusAccepted, Summary: "Retry a failed or canceled job manually: a new job linked by retry_of_job_id", Scopes: []auth.Permission{auth.WorkspaceRead}},
		h.retry)
}

// load reads a job and checks the caller holds scope of its kind; a job the caller may not see
// at all is the one 404.
func (h *jobsAPI) load(ctx context.Context, sc auth.Scope, id string, write bool) (jobs.Job, error) {
	j, err := h.q.Get(ctx, sc, id)
	if err != nil {
		return j, err
	}
	read, w := kindScopes(j.Kind)
	if err := sc.Require(read); err != nil {
		return jobs.Job{}, err
	}
	if write {
		return j, sc.Require(w)
	}
	return j, nil
}

func (h *jobsAPI) get(ctx context.Context, sc auth.Scope, in *jobIn) (*Single[jobs.JobView], error) {
	j, err := h.load(ctx, sc, in.ID(), false)
	if err != nil {
		return nil, err
	}
	return &Single[jobs.JobView]{Body: jobs.ViewOf(j)}, nil
}

func (h *jobsAPI) cancel(ctx context.Context, sc auth.Scope, in *jobIn) (*Single[jobs.JobView], error) {
	if _, err := h.load(ctx, sc, in.ID(), true); err != nil {
		return nil, err
	}
	j, err := h.q.Cancel(ctx, sc, in.ID())
	if err != nil {
		return nil, err
	}
	return &Single[jobs.JobView]{Body: jobs.ViewOf(j)}, nil
}

func (h *jobsAPI) retry(ctx context.Context, sc auth.Scope, in *jobIn) (*Accepted[jobs.JobView], error) {
	if _, err := h.load(ctx, sc, in.ID(), true); err != nil {
		return nil, err
	}
	return accepted(h.q.Retry(ctx, sc, in.ID()))
}

// JobOptions are what every job submission may add.
type JobOptions struct {
	MaxAttempts int  `json:"max_attempts,omitempty" minimum:"1" maximum:"10" doc:"including the first run; default 3"`
	RenderCheck bool `json:"render_check,omitempty" doc:"block the write unless the render check passes (while no renderer can run it, the job fails with RENDER_SERVICE_UNAVAILABLE)"`
}
