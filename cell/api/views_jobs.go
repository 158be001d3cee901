package api

import (
	"encoding/json"
	"slidecells/cell/jobs"
	"time"
)

// JobView is a mutation job as clients poll it: GET /api/v1/jobs/mutations/{job_id} is the only
// progress channel.
type JobView struct {
	JobID           string          `json:"job_id"`
	Kind            string          `json:"kind"`
	WorkspaceID     string          `json:"workspace_id"`
	OwnerID         string          `json:"owner_id"`
	Status          string          `json:"status" enum:"pending,running,succeeded,failed,canceled"`
	AttemptCount    int             `json:"attempt_count" doc:"automatic retries already run"`
	MaxAttempts     int             `json:"max_attempts" doc:"including the first run"`
	RetryOfJobID    string          `json:"retry_of_job_id,omitempty" doc:"set on a job created by a manual retry: the original job"`
	Stage           string          `json:"stage"`
	Progress        int             `json:"progress" minimum:"0" maximum:"100"`
	CancelRequested bool            `json:"cancel_requested"`
	ErrorCode       string          `json:"error_code,omitempty" doc:"business error code of a failed job"`
	ErrorSummary    string          `json:"error_summary,omitempty" doc:"diagnostic summary of a failed job (compile errors with file:line:column)"`
	Result          json.RawMessage `json:"result,omitempty" doc:"on success: object_id and version written"`
	CreatedAt       time.Time       `json:"created_at"`
	StartedAt       *time.Time      `json:"started_at,omitempty"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
	UpdatedAt       time.Time       `json:"updated_at"`
}

// ViewOf is the view of a job.
func JobOf(j jobs.Job) JobView {
	return JobView{JobID: j.ID, Kind: j.Kind, WorkspaceID: j.WorkspaceID, OwnerID: j.OwnerID, Status: j.Status,
		AttemptCount: j.AttemptCount, MaxAttempts: j.MaxAttempts, RetryOfJobID: j.RetryOfJobID, Stage: j.Stage,
		Progress: j.Progress, CancelRequested: j.CancelRequested, ErrorCode: j.ErrorCode, ErrorSummary: j.ErrorSummary,
		Result: j.Result, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, UpdatedAt: j.UpdatedAt}
}
