package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	rc "slidecells/shared/rendercontract"
)

const root = "../../k8s"

var pinnedProfile = filepath.Join(root, "components/release/render-profile.json")

// TestReleaseInfo: every item of render-execution.md "Versioning" rule 5 is there and comes
// from its source: the images the overlays deploy, the contract constants, the digest of the
// pinned profile, the migration files.
func TestReleaseInfo(t *testing.T) {
	info, err := collect(options{root: root})
	if err != nil {
		t.Fatal(err)
	}
	kust, err := os.ReadFile(filepath.Join(root, "components/release/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tags := regexp.MustCompile(`name: (\S+)\n\s+newTag: (\S+)`).FindAllStringSubmatch(string(kust), -1)
	pinned := map[string]string{}
	for _, m := range tags {
		pinned[m[1]] = m[2]
	}
	byComponent := map[string]Image{}
	for _, im := range info.Images {
		byComponent[im.Component] = im
	}
	for comp, image := range map[string]string{"backend": "slidecells/cell", "renderer": "slidecells/renderer", "preview host": "slidecells/preview", "router": "slidecells/router"} {
		im := byComponent[comp]
		want := image + ":" + pinned[image]
		if len(im.Refs) != 1 || im.Refs[0] != want {
			t.Errorf("%s images = %v, want [%s] (the release component's tag)", comp, im.Refs, want)
		}
	}
	if ed := byComponent["editor"]; ed.Note == "" || len(ed.Refs) != 0 {
		t.Errorf("editor = %+v, want a note that it is not built here", ed)
	}

	c := info.Contract
	if c.ContractVersion != rc.ContractVersion || c.ReadinessProtocol != rc.ReadinessProtocol || c.ResultSchema != rc.ResultSchemaVersion ||
		c.DiagnosisSchema != rc.DiagnosisSchemaVersion || c.PreviewHostBuild != rc.PreviewHostBuild {
		t.Errorf("contract = %+v", c)
	}

	var p rc.RenderProfile
	b, err := os.ReadFile(pinnedProfile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	d, err := p.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if info.Profile.Digest != d || !strings.HasPrefix(d, "sha256:") {
		t.Errorf("profile digest = %s, want %s", info.Profile.Digest, d)
	}

	for dir, got := range map[string][]string{"directory": info.Migration.Directory, "cell": info.Migration.Cell} {
		files, _ := filepath.Glob(filepath.Join("../../../migrations", dir, "*.up.sql"))
		if len(files) == 0 || len(got) != len(files) {
			t.Fatalf("%s migrations = %v, files %v", dir, got, files)
		}
		for i, f := range files {
			if want := strings.TrimSuffix(filepath.Base(f), ".up.sql"); got[i] != want {
				t.Errorf("%s migration %d = %s, want %s", dir, i, got[i], want)
			}
		}
	}

	var out strings.Builder
	write(&out, info)
	for _, want := range []string{"backend ", "renderer ", "preview host ", "editor ", "render control ", rc.ContractVersion,
		"digest                 " + d, "directory ", "cell                   0001_"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestProfileOfAnotherContractFails: a profile the cell would refuse is not a release's.
func TestProfileOfAnotherContractFails(t *testing.T) {
	b, err := os.ReadFile(pinnedProfile)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), rc.ContractVersion, "render-execution.v0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := collect(options{root: root, profile: p}); err == nil || !strings.Contains(err.Error(), "render-execution.v0") {
		t.Fatalf("collect = %v, want a refusal naming the other contract", err)
	}
}

// TestRendererProfileIsCompared: with -renderer, the digest `renderer profile` prints is
// compared with the pinned one. The stand-in checks it is called as `profile
// --preview-host-build <this release's build>` and prints a profile of another browser.
func TestRendererProfileIsCompared(t *testing.T) {
	b, err := os.ReadFile(pinnedProfile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(strings.Replace(string(b), `"browser_build": "`, `"browser_build": "other `, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "renderer")
	script := "#!/bin/sh\n[ \"$1 $2 $3\" = \"profile --preview-host-build " + rc.PreviewHostBuild + "\" ] || exit 2\ncat " + other + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := collect(options{root: root, renderer: bin})
	if err != nil {
		t.Fatal(err)
	}
	if info.Profile.Computed == "" || info.Profile.Computed == info.Profile.Digest {
		t.Fatalf("computed %q, pinned %q: want a different computed digest", info.Profile.Computed, info.Profile.Digest)
	}
	if !strings.Contains(strings.Join(info.Notes, "\n"), "would not start with the release's profile") {
		t.Errorf("notes = %v", info.Notes)
	}
}
