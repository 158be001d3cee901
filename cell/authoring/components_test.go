package authoring

import (
	"encoding/json"
	"strings"
	"testing"

	"slidecells/cell/jobs"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// TestComponentJobs: a component's draft changes only through a job on the draft hash the
// client read (a stale hash is a 409 at submission and at the commit), and its metadata on its
// metadata version; a draft that does not compile fails its job and leaves the draft.
func TestComponentJobs(t *testing.T) {
	f, ctx := setup(t)
	stop := f.run(t)
	c := f.publish(t, f.a, "card", cardSource)
	hash := DraftHash("tsx", cardSource)

	// Submission checks.
	for _, tc := range []struct {
		name string
		err  func() error
		code problem.Code
	}{
		{"create with a taken key", func() error {
			_, err := f.svc.SubmitComponentCreate(ctx, f.a, ComponentCreate{Key: "card", FileType: "tsx", Source: cardSource}, 1)
			return err
		}, problem.NameConflict},
		{"create an html component", func() error {
			_, err := f.svc.SubmitComponentCreate(ctx, f.a, ComponentCreate{Key: "other", FileType: "html", Source: "<p>"}, 1)
			return err
		}, problem.ValidationFailed},
		{"edit on a stale draft hash", func() error {
			_, err := f.svc.SubmitComponentEdit(ctx, f.a, ComponentEdit{ComponentID: c.ID, DraftHash: DraftHash("tsx", "old"), Source: cardSource}, 1)
			return err
		}, problem.VersionConflict},
		{"edit without a draft hash", func() error {
			_, err := f.svc.SubmitComponentEdit(ctx, f.a, ComponentEdit{ComponentID: c.ID, Source: cardSource}, 1)
			return err
		}, problem.ValidationFailed},
		{"edit of another workspace's component", func() error {
			_, err := f.svc.SubmitComponentEdit(ctx, f.b, ComponentEdit{ComponentID: c.ID, DraftHash: hash, Source: cardSource}, 1)
			return err
		}, problem.NotFound},
		{"metadata on a stale version", func() error {
			_, err := f.svc.SubmitComponentMetadata(ctx, f.a, ComponentMetadata{ComponentID: c.ID, MetadataVersion: c.MetadataVersion + 1}, 1)
			return err
		}, problem.VersionConflict},
		{"metadata of a component that does not exist", func() error {
			_, err := f.svc.SubmitComponentMetadata(ctx, f.a, ComponentMetadata{ComponentID: ids.New(ids.Component), MetadataVersion: 1}, 1)
			return err
		}, problem.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(); code(err) != tc.code {
				t.Fatalf("want %s, got %v", tc.code, err)
			}
		})
	}

	// A draft edit and a metadata change, each through its job.
	edited := strings.Replace(cardSource, "card</div>", "new card</div>", 1)
	j, err := f.svc.SubmitComponentEdit(ctx, f.a, ComponentEdit{ComponentID: c.ID, DraftHash: hash, Source: edited}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if done := f.finished(t, f.a, j.ID); done.Status != jobs.Succeeded || !strings.Contains(string(done.Result), DraftHash("tsx", edited)) {
		t.Fatalf("edit: %s %s %s", done.Status, done.ErrorCode, done.Result)
	}
	title := "Card v2"
	j, err = f.svc.SubmitComponentMetadata(ctx, f.a, ComponentMetadata{ComponentID: c.ID, MetadataVersion: c.MetadataVersion, Title: &title, Tags: []string{"ui"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if done := f.finished(t, f.a, j.ID); done.Status != jobs.Succeeded {
		t.Fatalf("metadata: %s %s", done.ErrorCode, done.ErrorSummary)
	}
	got, err := f.svc.Store.GetComponent(ctx, f.a, c.ID)
	if err != nil || got.DraftHash != DraftHash("tsx", edited) || got.DraftSource != edited || got.Title != "Card v2" ||
		got.MetadataVersion != c.MetadataVersion+1 || got.PublishedVersion != 1 {
		t.Fatalf("component %+v %v", got, err)
	}

	// A draft that does not compile fails its job and leaves the draft as it was.
	j, err = f.svc.SubmitComponentEdit(ctx, f.a, ComponentEdit{ComponentID: c.ID, DraftHash: got.DraftHash, Source: "export default () => <div>"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if done := f.finished(t, f.a, j.ID); done.Status != jobs.Failed || done.ErrorCode != CodeCompileFailed {
		t.Fatalf("broken draft: %s %s", done.Status, done.ErrorCode)
	}

	// Two edits on the same draft accepted before either ran: one wins, the other fails at
	// its commit with VERSION_CONFLICT.
	stop()
	var jobIDs []string
	for _, word := range []string{"first", "second"} {
		j, err := f.svc.SubmitComponentEdit(ctx, f.a, ComponentEdit{ComponentID: c.ID, DraftHash: got.DraftHash, Source: strings.Replace(edited, "new", word, 1)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		jobIDs = append(jobIDs, j.ID)
	}
	f.run(t)
	codes := map[string]int{}
	for _, id := range jobIDs {
		done := f.finished(t, f.a, id)
		codes[done.Status+" "+done.ErrorCode]++
	}
	if codes["succeeded "] != 1 || codes["failed "+string(problem.VersionConflict)] != 1 {
		t.Fatalf("outcomes %v", codes)
	}
}

// TestPageCopy: a copy is a page create of the source's current version, into the page's own
// project by default; a page of another workspace cannot be copied, nor copied into another
// workspace's project.
func TestPageCopy(t *testing.T) {
	f, ctx := running(t)
	p := f.createPage(t, f.a, f.prjA, "intro", simplePage)
	other, err := f.svc.Store.CreateProject(ctx, f.a, "Other", "")
	if err != nil {
		t.Fatal(err)
	}
	j, err := f.svc.SubmitPageCopy(ctx, f.a, p.ID, "", "intro-copy", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	var in PageCreate
	if err := json.Unmarshal(j.Input, &in); err != nil || in.ProjectID != f.prjA || in.Source != simplePage || in.FileType != "tsx" || in.Title != p.Title || j.Kind != KindPageCreate {
		t.Fatalf("copy job %s input %+v %v", j.Kind, in, err)
	}
	if done := f.finished(t, f.a, j.ID); done.Status != jobs.Succeeded {
		t.Fatalf("copy: %s %s", done.ErrorCode, done.ErrorSummary)
	}
	if j, err = f.svc.SubmitPageCopy(ctx, f.a, p.ID, other.ID, "intro", "Elsewhere", 1); err != nil {
		t.Fatalf("copy into another project under the same key: %v", err)
	}
	if err := json.Unmarshal(j.Input, &in); err != nil || in.ProjectID != other.ID || in.Title != "Elsewhere" {
		t.Fatalf("copy input %+v", in)
	}
	if _, err := f.svc.SubmitPageCopy(ctx, f.a, p.ID, "", "intro", "", 1); code(err) != problem.NameConflict {
		t.Fatalf("copy onto a taken key: %v", err)
	}
	if _, err := f.svc.SubmitPageCopy(ctx, f.b, p.ID, f.prjB, "stolen", "", 1); code(err) != problem.NotFound {
		t.Fatalf("B copies A's page: %v", err)
	}
	if _, err := f.svc.SubmitPageCopy(ctx, f.a, p.ID, f.prjB, "pushed", "", 1); code(err) != problem.NotFound {
		t.Fatalf("A copies into B's project: %v", err)
	}
}
