// Package authoring changes page and component source, which happens only through persisted
// mutation jobs (spec rule 3): it validates and checks a submission, enqueues its job in the
// request's transaction, and runs the job kinds: compile (cell/compile, with the components the
// workspace has published), store the compiled module by its content address, and commit the
// next immutable version in one transaction (cell/jobs Run.Commit) that rechecks permission,
// cancellation, the baseline and the workspace's write fence.
//
// It knows neither HTTP nor SQL: cell/api calls Submit*, cell/store does the reads and writes.
package authoring

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/blob"
	"slidecells/cell/catalog"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/jobs"
	"slidecells/cell/render"
	"slidecells/cell/snapshot"
	"slidecells/cell/store"
	"slidecells/shared/digest"
	"slidecells/shared/problem"
	rc "slidecells/shared/rendercontract"
)

// DefaultRenderWait is how long a request waits for its render before it answers that the
// render goes on (a repeat returns its result): below the router's wait for a cell's answer
// (ROUTER_CELL_TIMEOUT, 30 s), so a slow render never looks like a dead cell.
const DefaultRenderWait = 20 * time.Second

// Job kinds.
const (
	KindPageCreate = "page.create"
	KindPageEdit   = "page.edit"
)

// Codes a page job fails with besides the compile's.
const (
	// CodeCompileFailed: the source has errors; the summary lists them with file, line and column.
	CodeCompileFailed = "COMPILE_FAILED"
	// CodeRenderUnavailable: the job asked for a render check and no renderer can run it yet; the
	// write is blocked (retry manually once rendering is available). Never "source has errors".
	CodeRenderUnavailable = "RENDER_SERVICE_UNAVAILABLE"
	// CodeRenderCheckFailed: the job's render check ran and found errors in the rendered
	// content (runtime errors, blocking content faults).
	CodeRenderCheckFailed = "RENDER_CHECK_FAILED"
)

// Service runs page and component authoring.
type Service struct {
	Store    *store.Store
	Jobs     *jobs.Queue
	Compiler *compile.Compiler
	Modules  *blob.Store
	// Render is the cell's render control plane; nil when the cell has no renderers configured
	// (every render stage is then unavailable).
	Render *render.Coordinator
	// RenderWait bounds how long a validation or a screenshot waits for its render (default
	// DefaultRenderWait, below the router's 30 s wait for a cell's answer); the
	// request goes on after that and a repeat of the same validation returns its result.
	RenderWait time.Duration
	// Previews signs public preview URLs; nil when previews are not configured.
	Previews *Previews
	// Failpoint, when set, is consulted at BeforeCommit (fault tests: a replica killed between
	// its compile and its commit).
	Failpoint func(name string) error
}

// BeforeCommit is the failpoint a page job passes after its compile, before its commit.
const BeforeCommit = "authoring.before-commit"

func (s *Service) failpoint(name string) error {
	if s.Failpoint != nil {
		return s.Failpoint(name)
	}
	return nil
}

// KitItems are the runtime kit's item names, the @kit/<item> a module may import.
func KitItems() []string {
	out := make([]string, 0, len(catalog.RuntimeKit))
	for _, k := range catalog.RuntimeKit {
		out = append(out, k.Name)
	}
	return out
}

var objectKey = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)

// PageCreate is the input of a page-create job.
type PageCreate struct {
	ProjectID   string `json:"project_id"`
	Key         string `json:"key"`
	Title       string `json:"title"`
	FileType    string `json:"file_type"`
	Source      string `json:"source"`
	RenderCheck bool   `json:"render_check,omitempty"`
}

// PageEdit is the input of a page-edit job.
type PageEdit struct {
	PageID      string `json:"page_id"`
	Version     int64  `json:"version"`
	FileType    string `json:"file_type,omitempty"`
	Source      string `json:"source"`
	RenderCheck bool   `json:"render_check,omitempty"`
}

// checkSource checks a source against the standard of kind ("page" or "component").
func checkSource(kind, fileType, source string) []problem.FieldError {
	var fe []problem.FieldError
	std := catalog.Standards[kind]
	if !slices.Contains(std.FileTypes, fileType) {
		fe = append(fe, problem.FieldError{Field: "file_type", Message: "must be one of " + strings.Join(std.FileTypes, ", ")})
	}
	if strings.TrimSpace(source) == "" {
		fe = append(fe, problem.FieldError{Field: "source", Message: "must not be empty"})
	}
	if len(source) > std.Limits.MaxSourceBytes {
		fe = append(fe, problem.FieldError{Field: "source", Message: fmt.Sprintf("is larger than %d bytes", std.Limits.MaxSourceBytes)})
	}
	return fe
}

// checkNew checks a new object's key and first source against the standard of kind.
func checkNew(kind, key, fileType, source string) []problem.FieldError {
	fe := checkSource(kind, fileType, source)
	if !objectKey.MatchString(key) {
		fe = append(fe, problem.FieldError{Field: "key", Message: "1-64 of a-z, 0-9 and '-', starting with a letter"})
	}
	return fe
}

// enqueueEdit checks an edit's source against the standard of kind, its file type defaulting to
// the object's current one (fileType points into in, the job's input), and enqueues the job.
func (s *Service) enqueueEdit(ctx context.Context, sc auth.Scope, kind, jobKind, current string, fileType *string, source string, in any, maxAttempts int) (jobs.Job, error) {
	*fileType = cmp.Or(*fileType, current)
	if fe := checkSource(kind, *fileType, source); len(fe) > 0 {
		return jobs.Job{}, problem.Invalid(fe...)
	}
	return s.Jobs.Enqueue(ctx, sc, jobs.NewJob{Kind: jobKind, Input: in, MaxAttempts: maxAttempts})
}

// SubmitPageCreate checks a page create (422 for bad input; 404 for a project that is not live;
// 409 NAME_CONFLICT for a taken key) and enqueues its job in the request's transaction.
func (s *Service) SubmitPageCreate(ctx context.Context, sc auth.Scope, in PageCreate, maxAttempts int) (jobs.Job, error) {
	fe := checkNew("page", in.Key, in.FileType, in.Source)
	if len(in.Title) > 200 {
		fe = append(fe, problem.FieldError{Field: "title", Message: "at most 200 characters"})
	}
	if len(fe) > 0 {
		return jobs.Job{}, problem.Invalid(fe...)
	}
	if err := s.Store.CheckNewPage(ctx, sc, in.ProjectID, in.Key); err != nil {
		return jobs.Job{}, err
	}
	return s.Jobs.Enqueue(ctx, sc, jobs.NewJob{Kind: KindPageCreate, Input: in, MaxAttempts: maxAttempts})
}

// SubmitPageCopy enqueues a page-create job whose source is the current version of a live page
// (copying creates source, so it goes through a job like any create); the copy goes into
// projectID (default: the page's own project) under key.
func (s *Service) SubmitPageCopy(ctx context.Context, sc auth.Scope, pageID, projectID, key, title string, maxAttempts int) (jobs.Job, error) {
	p, err := s.Store.GetPage(ctx, sc, pageID)
	if err != nil {
		return jobs.Job{}, err
	}
	v, err := s.Store.PageVersion(ctx, sc, pageID, 0)
	if err != nil {
		return jobs.Job{}, err
	}
	if projectID == "" {
		projectID = p.ProjectID
	}
	if title == "" {
		title = p.Title
	}
	return s.SubmitPageCreate(ctx, sc, PageCreate{ProjectID: projectID, Key: key, Title: title, FileType: v.FileType, Source: v.Source}, maxAttempts)
}

// SubmitPageEdit checks a page edit (a stale baseline is a 409 now, and the commit checks it
// again) and enqueues its job in the request's transaction.
func (s *Service) SubmitPageEdit(ctx context.Context, sc auth.Scope, in PageEdit, maxAttempts int) (jobs.Job, error) {
	p, err := s.Store.CheckPageBaseline(ctx, sc, in.PageID, in.Version)
	if err != nil {
		return jobs.Job{}, err
	}
	return s.enqueueEdit(ctx, sc, "page", KindPageEdit, p.FileType, &in.FileType, in.Source, &in, maxAttempts)
}

// Handlers are the job kinds this service runs.
func (s *Service) Handlers() map[string]jobs.Handler {
	return map[string]jobs.Handler{
		KindPageCreate:        typed(s.runPageCreate),
		KindPageEdit:          typed(s.runPageEdit),
		KindComponentCreate:   typed(s.runComponentCreate),
		KindComponentEdit:     typed(s.runComponentEdit),
		KindComponentMetadata: typed(s.runComponentMetadata),
	}
}

// typed is a job handler that gets the job's input decoded; an input that cannot be read fails
// the job (not retried).
func typed[T any](run func(context.Context, *jobs.Run, T) (json.RawMessage, error)) jobs.Handler {
	return func(ctx context.Context, r *jobs.Run) (json.RawMessage, error) {
		var in T
		if err := json.Unmarshal(r.Job.Input, &in); err != nil {
			return nil, jobs.Fail("JOB_INPUT_INVALID", "the job input cannot be read: %v", err)
		}
		return run(ctx, r, in)
	}
}

// Result is what a page job stores on success: the object and version it wrote.
type Result struct {
	ObjectID       string `json:"object_id"`
	Version        int64  `json:"version"`
	CompiledDigest string `json:"compiled_digest"`
}

// pageResult is the result of a page job that wrote src.
func pageResult(src content.NewSource) func(content.Page) any {
	return func(p content.Page) any {
		return Result{ObjectID: p.ID, Version: p.Version, CompiledDigest: src.CompiledDigest}
	}
}

// commit runs a job's business write in the job's commit and stores result(the row written) as
// the job's result.
func commit[T any](ctx context.Context, r *jobs.Run, write func(context.Context, auth.Scope) (T, error), result func(T) any) (json.RawMessage, error) {
	return nil, commitFailure(r.Commit(ctx, func(ctx context.Context, sc auth.Scope, _ pgx.Tx) (json.RawMessage, error) {
		row, err := write(ctx, sc)
		if err != nil {
			return nil, err
		}
		return json.Marshal(result(row))
	}))
}

func (s *Service) runPageCreate(ctx context.Context, r *jobs.Run, in PageCreate) (json.RawMessage, error) {
	src, err := s.build(ctx, r, Target{Kind: snapshot.KindPage, Key: in.Key, ProjectID: in.ProjectID}, in.FileType, in.Source, in.RenderCheck)
	if err != nil {
		return nil, err
	}
	if err := s.failpoint(BeforeCommit); err != nil {
		return nil, err
	}
	return commit(ctx, r, func(ctx context.Context, sc auth.Scope) (content.Page, error) {
		return s.Store.CreatePage(ctx, sc, in.ProjectID, in.Key, in.Title, src)
	}, pageResult(src))
}

func (s *Service) runPageEdit(ctx context.Context, r *jobs.Run, in PageEdit) (json.RawMessage, error) {
	src, err := s.build(ctx, r, Target{Kind: snapshot.KindPage, ID: in.PageID, Version: in.Version + 1}, in.FileType, in.Source, in.RenderCheck)
	if err != nil {
		return nil, err
	}
	return commit(ctx, r, func(ctx context.Context, sc auth.Scope) (content.Page, error) {
		return s.Store.EditPage(ctx, sc, in.PageID, in.Version, src)
	}, pageResult(src))
}

// build compiles a page source against the workspace's published components and stores the
// module by its content address; compile errors fail the job (not retried).
func (s *Service) build(ctx context.Context, r *jobs.Run, t Target, fileType, source string, renderCheck bool) (content.NewSource, error) {
	sc, err := r.Scope(ctx)
	if err != nil {
		return content.NewSource{}, commitFailure(err)
	}
	if err := r.Progress(ctx, "compile", 20); err != nil {
		return content.NewSource{}, err
	}
	res, ids, err := s.compilePage(ctx, sc, fileType, source)
	if err != nil {
		return content.NewSource{}, err // infrastructure: retried
	}
	if !res.OK() {
		return content.NewSource{}, jobs.Fail(CodeCompileFailed, "%s", diagnostics(res))
	}
	if renderCheck {
		if t.ID != "" && t.ProjectID == "" {
			if p, err := s.Store.GetPage(ctx, sc, t.ID); err == nil {
				t.ProjectID, t.Key = p.ProjectID, p.Key
			}
		}
		if err := r.Progress(ctx, "render-check", 40); err != nil {
			return content.NewSource{}, err
		}
		if err := s.jobRenderCheck(ctx, r, sc, t, fileType, res, ids); err != nil {
			return content.NewSource{}, err
		}
	}
	if err := r.Progress(ctx, "store", 60); err != nil {
		return content.NewSource{}, err
	}
	if s.Modules != nil {
		if _, err := s.Modules.PutModule(ctx, sc, res.Digest, res.Code); err != nil {
			return content.NewSource{}, err
		}
	}
	deps := make([]content.Dependency, 0, len(res.Dependencies))
	for _, d := range res.Dependencies {
		deps = append(deps, content.Dependency{ComponentID: ids[d.Key], Key: d.Key, Version: d.Version, Depth: d.Depth})
	}
	if err := r.Progress(ctx, "commit", 80); err != nil {
		return content.NewSource{}, err
	}
	return content.NewSource{FileType: fileType, Source: source, SourceDigest: digest.Bytes([]byte(source)),
		CompiledDigest: res.Digest, Dependencies: deps, JobID: r.Job.ID}, nil
}

// compilePage compiles a page source against the workspace's published components; it also
// returns the component IDs it resolved, by key.
func (s *Service) compilePage(ctx context.Context, sc auth.Scope, fileType, source string) (*compile.Result, map[string]string, error) {
	ids := map[string]string{}
	resolver := s.resolver(sc, ids)
	std := catalog.Standards["page"].Limits
	res, err := s.Compiler.Compile(ctx, compile.Request{Kind: compile.KindPage, Resolver: resolver,
		Entry:  compile.Module{FileType: compile.FileType(fileType), Source: []byte(source)},
		Limits: compile.Limits{MaxSourceBytes: std.MaxSourceBytes, MaxDependencies: std.MaxDependencies, MaxImportDepth: std.MaxImportDepth, MaxKeyLength: std.MaxKeyLength}})
	return res, ids, err
}

// resolver resolves @components/<key> to the component's latest published version, noting the
// component IDs it resolved in ids (when not nil).
func (s *Service) resolver(sc auth.Scope, ids map[string]string) compile.Resolver {
	return compile.ResolverFunc(func(ctx context.Context, key string) (compile.Module, error) {
		c, err := s.Store.PublishedComponent(ctx, sc, key)
		if problem.As(err).Code == problem.NotFound {
			return compile.Module{}, fmt.Errorf("%w: no published component %q", compile.ErrNotFound, key)
		}
		if err != nil {
			return compile.Module{}, err
		}
		if ids != nil {
			ids[key] = c.ID
		}
		return compile.Module{Key: c.Key, FileType: compile.FileType(c.FileType), Source: []byte(c.Source), Version: c.Version}, nil
	})
}

// Stage is one stage's conclusion in a validation: Status is passed, failed, unavailable or
// skipped; Code says why a stage failed (a content code) or could not run (an infrastructure
// code); the compile stage has Diagnostics, the render stage Findings (most severe first) and
// its render request (a repeat of the same validation returns the same request). cell/api
// shows it as its Stage.
type Stage struct {
	Status      string               `json:"status"`
	Code        string               `json:"code,omitempty"`
	Message     string               `json:"message,omitempty"`
	Diagnostics []compile.Diagnostic `json:"diagnostics,omitempty"`
	Findings    []rc.Finding         `json:"findings,omitempty"`
	RequestID   string               `json:"render_request_id,omitempty"`
}

// Validation is the answer of a validation: valid only when every stage passed. A stage that
// could not run makes the whole unavailable (Status passed, failed or unavailable; Code the
// infrastructure error code when unavailable), never "passed" and never "source has errors".
type Validation struct {
	Valid  bool   `json:"valid"`
	Status string `json:"status"`
	Code   string `json:"code,omitempty"`
	Stages struct {
		Compile Stage `json:"compile"`
		Render  Stage `json:"render"`
	} `json:"stages"`
}

// ValidatePage runs the validation stages on a page source: compile, then render (page.diagnose
// through the render control plane, on the page's project presentation).
func (s *Service) ValidatePage(ctx context.Context, sc auth.Scope, t Target, fileType, source string) (Validation, error) {
	var v Validation
	if fe := checkSource("page", fileType, source); len(fe) > 0 {
		return v, problem.Invalid(fe...)
	}
	res, ids, err := s.compilePage(ctx, sc, fileType, source)
	if err != nil {
		return v, err
	}
	t.Kind = snapshot.KindPage
	return s.conclude(ctx, sc, t, fileType, res, ids, rc.OpPageDiagnose)
}

// ValidateComponent runs the validation stages on a component source (its imports resolve to
// published components, like a page's).
func (s *Service) ValidateComponent(ctx context.Context, sc auth.Scope, key, fileType, source string) (Validation, error) {
	if fe := checkSource("component", fileType, source); len(fe) > 0 {
		return Validation{}, problem.Invalid(fe...)
	}
	res, err := s.compileComponent(ctx, sc, key, fileType, source, nil)
	if err != nil {
		return Validation{}, err
	}
	return s.conclude(ctx, sc, Target{Kind: snapshot.KindComponent, Key: key}, fileType, res, nil, rc.OpComponentDiagnose)
}

// conclude runs the render stage on a compiled source and states the validation: valid only
// when both stages passed; a render stage that could not run makes it unavailable (valid=false
// with the infrastructure code), never "passed" and never "source has errors".
func (s *Service) conclude(ctx context.Context, sc auth.Scope, t Target, fileType string, res *compile.Result, ids map[string]string, op rc.Operation) (Validation, error) {
	var v Validation
	v.Stages.Compile = Stage{Status: "passed", Diagnostics: res.Diagnostics}
	if !res.OK() {
		v.Stages.Compile.Status = "failed"
		v.Stages.Render = Stage{Status: "skipped"}
		v.Status = "failed"
		return v, nil
	}
	var check RenderCheck
	m, err := s.BuildSnapshot(ctx, sc, t, fileType, res, ids)
	switch {
	case problem.As(err).Code == problem.RenderInputNotReproducible:
		check = RenderCheck{Status: "failed", Code: string(rc.CodeInputNotReproducible), Message: problem.As(err).Message}
	case err != nil:
		return v, err
	default:
		check = s.renderCheck(ctx, sc, "validation:"+sc.Principal().UserID, "validate", op, m, cmp.Or(s.RenderWait, DefaultRenderWait), true)
	}
	v.Stages.Render = Stage{Status: check.Status, Code: check.Code, Message: check.Message, Findings: check.Findings, RequestID: check.Request.ID}
	v.Status, v.Valid = check.Status, check.Status == "passed"
	if check.Status == "unavailable" {
		v.Code = check.Code
	}
	return v, nil
}

// jobRenderCheck runs a job's render check: a write whose check finds content errors fails;
// one whose check cannot run is blocked (retried by the job queue within its attempts, each
// under the same job owner, so a re-claimed job re-links to its render request).
func (s *Service) jobRenderCheck(ctx context.Context, r *jobs.Run, sc auth.Scope, t Target, fileType string, res *compile.Result, ids map[string]string) error {
	m, err := s.BuildSnapshot(ctx, sc, t, fileType, res, ids)
	if problem.As(err).Code == problem.RenderInputNotReproducible {
		return jobs.Fail(string(rc.CodeInputNotReproducible), "%s", problem.As(err).Message)
	}
	if err != nil {
		return err
	}
	wait := 2 * time.Minute
	if s.Render != nil {
		wait = s.Render.Config().RequestTimeout + 5*time.Second
	}
	// A cancel of the job (seen at its lease renewal; the cancel endpoint also cancels the
	// render work at once) cancels its render request.
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-watch.Done():
				return
			case <-t.C:
				if r.CancelRequested() {
					_ = s.CancelRenderWork(context.WithoutCancel(watch), sc, r.Job.ID)
					return
				}
			}
		}
	}()
	check := s.renderCheck(ctx, sc, r.Job.ID, "render-check", rc.OpPageDiagnose, m, wait, false)
	switch check.Status {
	case "passed":
		return nil
	case "failed":
		return jobs.Fail(CodeRenderCheckFailed, "%s", findingsSummary(check))
	}
	if check.Request.State == render.StateCancelled {
		// Only the job's cancel cancels its render request (CancelRenderWork): the job
		// converges to canceled, even before its lease renewal has seen the cancel.
		return jobs.ErrCanceled
	}
	if render.Terminal(check.Request.State) {
		// The render request spent its budget (attempts or deadline) or was cancelled: a job
		// retry would only re-link to it (the spec forbids renewing a render budget), so the job
		// fails now with the render's code.
		return jobs.Fail(cmp.Or(check.Code, CodeRenderUnavailable), "the render check could not run: %s", check.Message)
	}
	return &jobs.Failure{Code: cmp.Or(check.Code, CodeRenderUnavailable), Summary: "the render check could not run: " + check.Message, Retryable: true}
}

// findingsSummary lists a failed render check's errors, one per line.
func findingsSummary(c RenderCheck) string {
	var b strings.Builder
	b.WriteString(c.Message)
	for _, f := range c.Findings {
		if f.Severity == rc.SeverityError {
			fmt.Fprintf(&b, "\n%s [%s] %s", f.Code, f.Scene, f.Message)
		}
	}
	return b.String()
}

// diagnostics renders compile errors as the job's summary: one "file:line:col: CODE: message"
// per line.
func diagnostics(res *compile.Result) string {
	var b strings.Builder
	for _, d := range res.Diagnostics {
		if d.Severity != compile.SeverityError {
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d: %s: %s\n", d.File, d.Line, d.Column, d.Code, d.Message)
	}
	if res.DiagnosticsOmitted > 0 {
		fmt.Fprintf(&b, "… %d more\n", res.DiagnosticsOmitted)
	}
	return strings.TrimSpace(b.String())
}

// commitFailure turns a business error of the commit (the baseline moved, the key was taken,
// the project or the owner's permission went away) into the job's failure; other errors stay
// infrastructure errors and are retried.
func commitFailure(err error) error {
	if err == nil || errors.Is(err, jobs.ErrCanceled) || errors.Is(err, jobs.ErrLeaseLost) || errors.Is(err, jobs.ErrFenced) {
		return err
	}
	var f *jobs.Failure
	if errors.As(err, &f) {
		return f
	}
	var pe *problem.Error
	if errors.As(err, &pe) && (pe.Code == problem.WorkspaceMisdirected || pe.Code == problem.WorkspaceMoving) {
		// The workspace is being moved: this cell takes no more writes for it. The job goes back
		// to the queue with its attempt unused and runs on the owner after the move.
		return fmt.Errorf("%w: %w", jobs.ErrFenced, err)
	}
	if errors.As(err, &pe) && pe.Code != problem.Internal && pe.Code != problem.DirectoryUnavailable && pe.Code != problem.ClientClosedRequest {
		return jobs.Fail(string(pe.Code), "%s", pe.Message)
	}
	return err
}
