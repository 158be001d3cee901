package authoring

import (
	"context"
	"encoding/json"
	"fmt"

	"slidecells/cell/auth"
	"slidecells/cell/catalog"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/jobs"
	"slidecells/cell/store"
	"slidecells/shared/digest"
	"slidecells/shared/problem"
)

// Component job kinds.
const (
	KindComponentCreate   = "component.create"
	KindComponentEdit     = "component.edit"
	KindComponentMetadata = "component.metadata"
)

// ComponentCreate is the input of a component-create job: the first draft.
type ComponentCreate struct {
	Key      string `json:"key"`
	Title    string `json:"title"`
	FileType string `json:"file_type"`
	Source   string `json:"source"`
}

// ComponentEdit is the input of a component-edit job: a new draft replacing the one whose hash
// the client read.
type ComponentEdit struct {
	ComponentID string `json:"component_id"`
	DraftHash   string `json:"draft_hash"`
	FileType    string `json:"file_type,omitempty"`
	Source      string `json:"source"`
}

// ComponentMetadata is the input of a component-metadata job.
type ComponentMetadata struct {
	ComponentID     string   `json:"component_id"`
	MetadataVersion int64    `json:"metadata_version"`
	Title           *string  `json:"title,omitempty"`
	Description     *string  `json:"description,omitempty"`
	Tags            []string `json:"tags,omitempty"`
}

// DraftHash is the content hash that identifies a component draft.
func DraftHash(fileType, source string) string {
	return digest.Bytes([]byte(fileType + "\x00" + source))
}

// SubmitComponentCreate checks a component create and enqueues its job.
func (s *Service) SubmitComponentCreate(ctx context.Context, sc auth.Scope, in ComponentCreate, maxAttempts int) (jobs.Job, error) {
	if fe := checkNew("component", in.Key, in.FileType, in.Source); len(fe) > 0 {
		return jobs.Job{}, problem.Invalid(fe...)
	}
	if err := s.Store.CheckNewComponent(ctx, sc, in.Key); err != nil {
		return jobs.Job{}, err
	}
	return s.Jobs.Enqueue(ctx, sc, jobs.NewJob{Kind: KindComponentCreate, Input: in, MaxAttempts: maxAttempts})
}

// SubmitComponentEdit checks a draft edit (a stale draft hash is a 409 now and at the commit)
// and enqueues its job.
func (s *Service) SubmitComponentEdit(ctx context.Context, sc auth.Scope, in ComponentEdit, maxAttempts int) (jobs.Job, error) {
	c, err := s.Store.CheckComponentDraft(ctx, sc, in.ComponentID, in.DraftHash)
	if err != nil {
		return jobs.Job{}, err
	}
	return s.enqueueEdit(ctx, sc, "component", KindComponentEdit, c.FileType, &in.FileType, in.Source, &in, maxAttempts)
}

// SubmitComponentMetadata checks a metadata change and enqueues its job.
func (s *Service) SubmitComponentMetadata(ctx context.Context, sc auth.Scope, in ComponentMetadata, maxAttempts int) (jobs.Job, error) {
	c, err := s.Store.GetComponent(ctx, sc, in.ComponentID)
	if err != nil {
		return jobs.Job{}, err
	}
	if c.MetadataVersion != in.MetadataVersion {
		return jobs.Job{}, problem.ErrVersionConflict("component", "metadata_version", c.MetadataVersion)
	}
	return s.Jobs.Enqueue(ctx, sc, jobs.NewJob{Kind: KindComponentMetadata, Input: in, MaxAttempts: maxAttempts})
}

// checkDraft compiles a draft; compile errors fail the job.
func (s *Service) checkDraft(ctx context.Context, r *jobs.Run, key, fileType, source string) error {
	sc, err := r.Scope(ctx)
	if err != nil {
		return commitFailure(err)
	}
	if err := r.Progress(ctx, "compile", 20); err != nil {
		return err
	}
	res, err := s.compileComponent(ctx, sc, key, fileType, source, nil)
	if err != nil {
		return err
	}
	if !res.OK() {
		return jobs.Fail(CodeCompileFailed, "%s", diagnostics(res))
	}
	return r.Progress(ctx, "commit", 80)
}

// commitDraft compiles a draft (compile errors fail the job) and commits write, which stores it
// under its hash.
func (s *Service) commitDraft(ctx context.Context, r *jobs.Run, key, fileType, source string,
	write func(ctx context.Context, sc auth.Scope, hash string) (content.Component, error)) (json.RawMessage, error) {
	if err := s.checkDraft(ctx, r, key, fileType, source); err != nil {
		return nil, err
	}
	return commit(ctx, r, func(ctx context.Context, sc auth.Scope) (content.Component, error) {
		return write(ctx, sc, DraftHash(fileType, source))
	}, func(c content.Component) any { return map[string]string{"object_id": c.ID, "draft_hash": c.DraftHash} })
}

func (s *Service) runComponentCreate(ctx context.Context, r *jobs.Run, in ComponentCreate) (json.RawMessage, error) {
	return s.commitDraft(ctx, r, in.Key, in.FileType, in.Source, func(ctx context.Context, sc auth.Scope, hash string) (content.Component, error) {
		return s.Store.CreateComponent(ctx, sc, in.Key, in.Title, in.FileType, in.Source, hash)
	})
}

func (s *Service) runComponentEdit(ctx context.Context, r *jobs.Run, in ComponentEdit) (json.RawMessage, error) {
	sc, err := r.Scope(ctx)
	if err != nil {
		return nil, commitFailure(err)
	}
	c, err := s.Store.GetComponent(ctx, sc, in.ComponentID)
	if err != nil {
		return nil, commitFailure(err)
	}
	return s.commitDraft(ctx, r, c.Key, in.FileType, in.Source, func(ctx context.Context, sc auth.Scope, hash string) (content.Component, error) {
		return s.Store.EditComponentDraft(ctx, sc, in.ComponentID, in.DraftHash, in.FileType, in.Source, hash)
	})
}

func (s *Service) runComponentMetadata(ctx context.Context, r *jobs.Run, in ComponentMetadata) (json.RawMessage, error) {
	return commit(ctx, r, func(ctx context.Context, sc auth.Scope) (content.Component, error) {
		return store.Components.UpdateMetadata(ctx, s.Store, sc, in.ComponentID, in.MetadataVersion, in.Title, in.Description, in.Tags)
	}, func(c content.Component) any {
		return map[string]any{"object_id": c.ID, "metadata_version": c.MetadataVersion}
	})
}

// Publish freezes a component's draft, whose hash the caller read, as its next published
// version: the draft must compile (422 with the diagnostics otherwise). Pages compiled after it
// use the new version. It changes no source, so it is a direct operation rather than a job.
func (s *Service) Publish(ctx context.Context, sc auth.Scope, id, draftHash string) (content.Component, error) {
	c, err := s.Store.CheckComponentDraft(ctx, sc, id, draftHash)
	if err != nil {
		return c, err
	}
	ids := map[string]string{}
	res, err := s.compileComponent(ctx, sc, c.Key, c.FileType, c.DraftSource, ids)
	if err != nil {
		return c, err
	}
	if !res.OK() {
		var fe []problem.FieldError
		for _, d := range res.Diagnostics {
			if d.Severity == compile.SeverityError {
				fe = append(fe, problem.FieldError{Field: fmt.Sprintf("draft:%s:%d:%d", d.File, d.Line, d.Column), Message: string(d.Code) + ": " + d.Message})
			}
		}
		return c, problem.Invalid(fe...)
	}
	if s.Modules != nil {
		if _, err := s.Modules.PutModule(ctx, sc, res.Digest, res.Code); err != nil {
			return c, err
		}
	}
	deps := make([]content.Dependency, 0, len(res.Dependencies))
	for _, d := range res.Dependencies {
		deps = append(deps, content.Dependency{ComponentID: ids[d.Key], Key: d.Key, Version: d.Version, Depth: d.Depth})
	}
	return s.Store.PublishComponent(ctx, sc, id, draftHash, content.NewSource{SourceDigest: c.DraftHash, CompiledDigest: res.Digest, Dependencies: deps})
}

// compileComponent compiles a component source against the workspace's published components.
func (s *Service) compileComponent(ctx context.Context, sc auth.Scope, key, fileType, source string, ids map[string]string) (*compile.Result, error) {
	std := catalog.Standards["component"].Limits
	resolver := s.resolver(sc, ids)
	if key == "" {
		key = "draft"
	}
	return s.Compiler.Compile(ctx, compile.Request{Kind: compile.KindComponent, Resolver: resolver,
		Entry:  compile.Module{Key: key, FileType: compile.FileType(fileType), Source: []byte(source), Hash: "draft"},
		Limits: compile.Limits{MaxSourceBytes: std.MaxSourceBytes, MaxComponentSourceBytes: std.MaxSourceBytes, MaxDependencies: std.MaxDependencies, MaxImportDepth: std.MaxImportDepth, MaxKeyLength: std.MaxKeyLength}})
}
