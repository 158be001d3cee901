package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/jobs"
)

const jobsPath = "/api/v1/jobs/mutations"

// accepted answers a submitted job: 202 with the job and its address.
func accepted(j jobs.Job, err error) (*Accepted[JobView], error) {
	if err != nil {
		return nil, err
	}
	return &Accepted[JobView]{Location: jobsPath + "/" + j.ID, Body: JobOf(j)}, nil
}

type jobsAPI struct {
	q   *jobs.Queue
	svc *authoring.Service
}

type jobIn = struct{ ObjectID }

func (s *Server) registerJobs(q *jobs.Queue, svc *authoring.Service) {
	h := &jobsAPI{q: q, svc: svc}
	op := func(id, method, path, summary string) Operation {
		return Op(id, method, jobsPath+"/{job_id}"+path, summary, "jobs", auth.WorkspaceRead)
	}
	// Which of page or component scopes a job needs depends on its kind: the handler checks
	// the job's own; OneOf declares them.
	reads := [][]auth.Permission{{auth.PageRead}, {auth.ComponentRead}}
	writes := [][]auth.Permission{{auth.PageRead, auth.PageWrite}, {auth.ComponentRead, auth.ComponentWrite}}
	get := op("get-mutation-job", http.MethodGet, "", "Mutation job status (poll it: the only progress channel); needs the read scope of the job's kind")
	get.OneOf = reads
	Scoped(s, get, h.get)
	cancel := op("cancel-mutation-job", http.MethodPost, "/cancel", "Cancel a job: a pending one at once, a running one cooperatively before any write; a finished one is 409")
	cancel.OneOf = writes
	Scoped(s, cancel, h.cancel)
	retry := op("retry-mutation-job", http.MethodPost, "/retry", "Retry a failed or canceled job manually: a new job linked by retry_of_job_id")
	retry.Status, retry.OneOf = http.StatusAccepted, writes
	Scoped(s, retry, h.retry)
}

func (h *jobsAPI) get(ctx context.Context, sc auth.Scope, in *jobIn) (*Single[JobView], error) {
	return jobView(h.svc.Job(ctx, sc, in.ID(), false))
}

func (h *jobsAPI) cancel(ctx context.Context, sc auth.Scope, in *jobIn) (*Single[JobView], error) {
	if _, err := h.svc.Job(ctx, sc, in.ID(), true); err != nil {
		return nil, err
	}
	j, err := h.q.Cancel(ctx, sc, in.ID())
	if err == nil {
		// The job's render work (its render check) is cancelled now, not at the job's next
		// lease renewal: the cancel is persisted, then the renderer is told, and the slot
		// comes back when it stops. A failure here leaves it to the job's own cancel watch.
		_ = h.svc.CancelRenderWork(ctx, sc, j.ID)
	}
	return jobView(j, err)
}

func jobView(j jobs.Job, err error) (*Single[JobView], error) {
	return single(JobOf(j), err)
}

func (h *jobsAPI) retry(ctx context.Context, sc auth.Scope, in *jobIn) (*Accepted[JobView], error) {
	if _, err := h.svc.Job(ctx, sc, in.ID(), true); err != nil {
		return nil, err
	}
	return accepted(h.q.Retry(ctx, sc, in.ID()))
}

// JobOptions are what every job submission may add.
type JobOptions struct {
	MaxAttempts int  `json:"max_attempts,omitempty" minimum:"1" maximum:"10" doc:"including the first run; default 3"`
	RenderCheck bool `json:"render_check,omitempty" doc:"block the write unless the render check passes (while no renderer can run it, the job fails with RENDER_SERVICE_UNAVAILABLE)"`
}
