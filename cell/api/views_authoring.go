package api

import (
	rc "slidecells/shared/rendercontract"
	"time"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/object"
)

// The views of pages and components: what the API shows of them.

// PageView is a page: its metadata and the number of its current source version.
type PageView struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	content.Labels
	FileType        string `json:"file_type" enum:"tsx,jsx,html"`
	Version         int64  `json:"version" doc:"current source version: the baseline a page edit carries"`
	MetadataVersion int64  `json:"metadata_version"`
	object.Stamps
}

// PageOf is the view of a page.
func PageOf(_ auth.Scope, p content.Page) (PageView, error) {
	return PageView{ID: p.ID, ProjectID: p.ProjectID, Labels: labels(p.Labels), FileType: p.FileType, Version: p.Version,
		MetadataVersion: p.MetadataVersion, Stamps: p.Stamps}, nil
}

// ComponentView is a component: its key (imported as @components/<key>), metadata, draft
// identity and last published version.
type ComponentView struct {
	ID string `json:"id"`
	content.Labels
	FileType         string `json:"file_type" enum:"tsx,jsx"`
	DraftHash        string `json:"draft_hash" doc:"identifies the draft: the baseline a draft edit or a publish carries in If-Match"`
	PublishedVersion int64  `json:"published_version" doc:"0 until the first publish; pages compile against it"`
	MetadataVersion  int64  `json:"metadata_version"`
	object.Stamps
}

// ComponentOf is the view of a component.
func ComponentOf(_ auth.Scope, c content.Component) (ComponentView, error) {
	return ComponentView{ID: c.ID, Labels: labels(c.Labels), FileType: c.FileType, DraftHash: c.DraftHash,
		PublishedVersion: c.PublishedVersion, MetadataVersion: c.MetadataVersion, Stamps: c.Stamps}, nil
}

// DependencyView is a component a version was compiled with.
type DependencyView struct {
	ComponentID string `json:"component_id,omitempty"`
	Key         string `json:"key"`
	Version     int64  `json:"version" doc:"the published version resolved"`
	Depth       int    `json:"depth" doc:"1 for a direct import"`
}

// VersionView is one immutable source version; Source is omitted in history lists.
type VersionView struct {
	Version        int64            `json:"version"`
	FileType       string           `json:"file_type"`
	Source         string           `json:"source,omitempty"`
	SourceDigest   string           `json:"source_digest"`
	DraftHash      string           `json:"draft_hash,omitempty" doc:"a component's draft only: its draft_hash, the If-Match baseline of draft edits and publish (also the ETag)"`
	CompiledDigest string           `json:"compiled_digest,omitempty" doc:"content address of the compiled module the preview host loads"`
	Dependencies   []DependencyView `json:"dependencies"`
	JobID          string           `json:"job_id,omitempty" doc:"the mutation job that wrote it"`
	CreatedBy      string           `json:"created_by"`
	CreatedAt      time.Time        `json:"created_at"`
}

// VersionOf is the view of a version, with its source or without.
func VersionOf(v content.SourceVersion, withSource bool) VersionView {
	out := VersionView{Version: v.Version, FileType: v.FileType, SourceDigest: v.SourceDigest, CompiledDigest: v.CompiledDigest,
		JobID: v.JobID, CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt, Dependencies: []DependencyView{}}
	if withSource {
		out.Source = v.Source
	}
	for _, d := range v.Dependencies {
		out.Dependencies = append(out.Dependencies, DependencyView(d))
	}
	return out
}

// DraftOf shows a component's draft as a version view (no version number, no job).
func DraftOf(c content.Component) VersionView {
	return VersionView{FileType: c.FileType, Source: c.DraftSource, SourceDigest: c.DraftHash, DraftHash: c.DraftHash, Dependencies: []DependencyView{},
		CreatedBy: c.CreatedBy, CreatedAt: c.UpdatedAt}
}

// DependenciesView lists what a page's current version (or a component's latest published one)
// was compiled with.
type DependenciesView struct {
	ObjectID     string           `json:"object_id"`
	Version      int64            `json:"version"`
	Dependencies []DependencyView `json:"dependencies"`
}

// DependenciesOf is the dependencies view of an object's version.
func DependenciesOf(id string, v content.SourceVersion) DependenciesView {
	return DependenciesView{ObjectID: id, Version: v.Version, Dependencies: VersionOf(v, false).Dependencies}
}

// labels are an object's key and metadata as the API shows them: tags are a list, never null.
func labels(l content.Labels) content.Labels {
	if l.Tags == nil {
		l.Tags = []string{}
	}
	return l
}

// PreviewArtifactResponse is a short-lived preview of a page a browser opens directly (the
// specification names its schema PreviewArtifactResponse).
type PreviewArtifactResponse struct {
	PreviewURL  string    `json:"preview_url" doc:"opens directly in a browser through the public host; short-lived: do not store it"`
	ExpiresAt   time.Time `json:"expires_at"`
	ArtifactID  string    `json:"artifact_id" doc:"the preview snapshot"`
	PageID      string    `json:"page_id"`
	Route       string    `json:"route,omitempty"`
	InputDigest string    `json:"input_digest"`
}

// previewOf shows a preview.
func previewOf(a authoring.PreviewArtifact, err error) (*Single[PreviewArtifactResponse], error) {
	return single(PreviewArtifactResponse(a), err)
}

// Stage is one stage's conclusion in a validation.
type Stage struct {
	Status      string               `json:"status" enum:"passed,failed,unavailable,skipped"`
	Code        string               `json:"code,omitempty" doc:"why the stage failed (a content code) or could not run (an infrastructure code)"`
	Message     string               `json:"message,omitempty"`
	Diagnostics []compile.Diagnostic `json:"diagnostics,omitempty" doc:"compile stage: errors and warnings with file, line and column"`
	Findings    []rc.Finding         `json:"findings,omitempty" doc:"render stage: the diagnosis items (runtime errors, content faults, layout warnings), most severe first"`
	RequestID   string               `json:"render_request_id,omitempty" doc:"render stage: the render request; a repeat of the same validation returns the same request"`
}

// Validation is the answer of a validation: valid only when every stage passed. A stage that
// could not run makes the whole unavailable, never "passed" and never "source has errors".
type Validation struct {
	Valid  bool   `json:"valid"`
	Status string `json:"status" enum:"passed,failed,unavailable"`
	Code   string `json:"code,omitempty" doc:"infrastructure error code when status is unavailable"`
	Stages struct {
		Compile Stage `json:"compile"`
		Render  Stage `json:"render"`
	} `json:"stages"`
}

// validationOf shows a validation.
func validationOf(v authoring.Validation, err error) (*Single[Validation], error) {
	out := Validation{Valid: v.Valid, Status: v.Status, Code: v.Code}
	out.Stages.Compile, out.Stages.Render = Stage(v.Stages.Compile), Stage(v.Stages.Render)
	return single(out, err)
}
