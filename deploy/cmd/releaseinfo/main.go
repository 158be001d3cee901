// Command releaseinfo prints what a release is made of, as render-execution.md "Versioning"
// rule 5 asks: the image revisions of the backend, renderer, preview host and editor, the
// contract versions, the render profile digest and the database migration version list.
// `make release-info` runs it with the same build flags as the binaries.
//
//	releaseinfo [-root deploy/k8s] [-profile FILE] [-renderer bin/renderer] [-json]
//
// Images are read from the rendered overlays (the tags the manifests actually deploy). The
// profile is -profile, else RENDER_PROFILE_MANIFEST, else the release component's
// render-profile.json (what the overlays deploy); its digest is computed exactly as the cell
// computes it (cell/render.ReadManifest). With -renderer, `<renderer> profile` also computes
// this machine's profile, and a digest that differs from the pinned one is noted.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"slidecells/cell/api"
	"slidecells/cell/render"
	"slidecells/deploy/deploycheck"
	"slidecells/migrations"
	rc "slidecells/shared/rendercontract"
)

// Info is the release information (the -json output).
type Info struct {
	// Revision is `git describe --always --dirty` of the repository.
	Revision string `json:"revision"`
	// APIVersion is the version the binaries report (cell/api.Version, set by the Makefile).
	APIVersion string `json:"api_version"`
	// Images maps each component to the image references the overlays deploy.
	Images    []Image   `json:"images"`
	Contract  Contract  `json:"contract"`
	Profile   Profile   `json:"render_profile"`
	Migration Migration `json:"migrations"`
	// Notes are things a release manager should look at (tags that are not the revision).
	Notes []string `json:"notes,omitempty"`
}

// Image is one component's image.
type Image struct {
	Component string   `json:"component"`
	Refs      []string `json:"refs"`
	// Note says why there is no image (the editor is not built here).
	Note string `json:"note,omitempty"`
}

// Contract are the protocol and schema versions this release speaks.
type Contract struct {
	PublicAPI         string `json:"public_api"`
	ControlProtocol   string `json:"control_protocol"`
	ContractVersion   string `json:"contract_version"`
	ReadinessProtocol string `json:"readiness_protocol"`
	ResultSchema      string `json:"result_schema"`
	DiagnosisSchema   string `json:"diagnosis_schema"`
	PreviewHostBuild  string `json:"preview_host_build"`
}

// Profile is the render profile the release pins.
type Profile struct {
	Source       string `json:"source"`
	Digest       string `json:"digest"`
	BrowserBuild string `json:"browser_build"`
	HostBuild    string `json:"preview_host_build,omitempty"`
	ImageDigest  string `json:"image_digest,omitempty"`
	// Computed is the digest `renderer profile` gave on this machine (-renderer).
	Computed string `json:"computed_digest,omitempty"`
}

// Migration lists the migration versions of each database.
type Migration struct {
	Directory []string `json:"directory"`
	Cell      []string `json:"cell"`
}

// components names the images of this repository by what they are; the editor is not one.
var components = []struct{ name, image string }{
	{"backend", deploycheck.ImagePrefix + "cell"},
	{"renderer", deploycheck.ImagePrefix + "renderer"},
	{"preview host", deploycheck.ImagePrefix + "preview"},
	{"router", deploycheck.ImagePrefix + "router"},
	{"database", "cockroachdb/cockroach"},
}

type options struct {
	root, profile, renderer string
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", "deploy/k8s", "the manifests' folder (its overlays/* are rendered)")
	flag.StringVar(&o.profile, "profile", os.Getenv("RENDER_PROFILE_MANIFEST"), "the render profile the release pins (default RENDER_PROFILE_MANIFEST, else <root>/components/release/render-profile.json, which the overlays deploy)")
	flag.StringVar(&o.renderer, "renderer", "", "a renderer binary: also compute this machine's profile with its `profile` command and compare the digests")
	asJSON := flag.Bool("json", false, "print JSON")
	flag.Parse()
	info, err := collect(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "releaseinfo:", err)
		os.Exit(1)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(info)
		return
	}
	write(os.Stdout, info)
}

func collect(o options) (*Info, error) {
	info := &Info{Revision: gitDescribe(), APIVersion: api.Version}
	info.Contract = Contract{
		PublicAPI:         "v1 (/api/v1)",
		ControlProtocol:   "/internal/render/v1",
		ContractVersion:   rc.ContractVersion,
		ReadinessProtocol: rc.ReadinessProtocol,
		ResultSchema:      rc.ResultSchemaVersion,
		DiagnosisSchema:   rc.DiagnosisSchemaVersion,
		PreviewHostBuild:  rc.PreviewHostBuild,
	}
	if err := images(o.root, info); err != nil {
		return nil, err
	}
	if err := profile(o, info); err != nil {
		return nil, err
	}
	var err error
	if info.Migration.Directory, err = versions(migrations.Directory); err != nil {
		return nil, err
	}
	if info.Migration.Cell, err = versions(migrations.Cell); err != nil {
		return nil, err
	}
	return info, nil
}

func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	return strings.TrimSpace(string(out))
}

// images collects the image references every overlay deploys, by component.
func images(root string, info *Info) error {
	overlays, err := deploycheck.Overlays(root)
	if err != nil {
		return err
	}
	refs := map[string]map[string]bool{}
	for _, ov := range overlays {
		objs, findings, err := deploycheck.Render(root, ov)
		if err != nil {
			return fmt.Errorf("overlay %s: %w", ov, err)
		}
		if len(findings) > 0 {
			return fmt.Errorf("overlay %s: %s (run make deploy-check)", ov, findings[0])
		}
		for _, o := range objs {
			for _, img := range deploycheck.ContainerImages(o) {
				for _, c := range components {
					if imageName(img) == c.image || strings.HasSuffix(imageName(img), "/"+c.image) {
						if refs[c.name] == nil {
							refs[c.name] = map[string]bool{}
						}
						refs[c.name][img] = true
					}
				}
			}
		}
	}
	for _, c := range components {
		var list []string
		for r := range refs[c.name] {
			list = append(list, r)
		}
		sort.Strings(list)
		im := Image{Component: c.name, Refs: list}
		if len(list) == 0 {
			im.Note = "no overlay deploys it"
		}
		if len(list) > 1 {
			info.Notes = append(info.Notes, fmt.Sprintf("%s: the overlays deploy %d different images", c.name, len(list)))
		}
		for _, r := range list {
			if tag := imageTag(r); strings.HasPrefix(c.image, deploycheck.ImagePrefix) && tag != info.Revision {
				info.Notes = append(info.Notes, fmt.Sprintf("%s: the manifests deploy tag %q, the repository is at %q (make release-tag sets the tags)", c.name, tag, info.Revision))
			}
		}
		info.Images = append(info.Images, im)
		if c.name == "preview host" {
			info.Images = append(info.Images, Image{Component: "editor", Note: "not built from this repository"})
		}
	}
	return nil
}

func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

func imageTag(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}

// profile reads the release's render profile and computes its digest as the cell does; with
// a renderer binary it also computes this machine's profile and compares the two.
func profile(o options, info *Info) error {
	path := o.profile
	if path == "" {
		path = filepath.Join(o.root, "components", "release", "render-profile.json")
	}
	prof, digest, err := render.ReadManifest(path)
	if err != nil {
		return fmt.Errorf("render profile %s: %w", path, err)
	}
	info.Profile = Profile{Source: path, Digest: digest, BrowserBuild: prof.BrowserBuild,
		HostBuild: prof.PreviewHostBuild, ImageDigest: prof.ImageDigest}
	if prof.PreviewHostBuild != "" && prof.PreviewHostBuild != rc.PreviewHostBuild {
		info.Notes = append(info.Notes, fmt.Sprintf("the render profile pins preview host build %q; this release's is %q: renderers would refuse every document", prof.PreviewHostBuild, rc.PreviewHostBuild))
	}
	if o.renderer == "" {
		return nil
	}
	local, err := profileFromRenderer(o.renderer)
	if err != nil {
		return err
	}
	defer os.Remove(local)
	_, ld, err := render.ReadManifest(local)
	if err != nil {
		return fmt.Errorf("`%s profile`: %w", o.renderer, err)
	}
	info.Profile.Computed = ld
	if ld != digest {
		info.Notes = append(info.Notes, fmt.Sprintf("`%s profile` computes %s, not the pinned %s: this renderer would not start with the release's profile (regenerate render-profile.json in the renderer image)", o.renderer, ld, digest))
	}
	return nil
}

// profileFromRenderer runs `renderer profile` and returns a temporary file holding its output.
func profileFromRenderer(bin string) (string, error) {
	cmd := exec.Command(bin, "profile", "--preview-host-build", rc.PreviewHostBuild)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("`%s profile` failed (%v): %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	f, err := os.CreateTemp("", "render-profile-*.json")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(out); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// versions lists the migration versions of one database folder (the up files, in order).
func versions(dir string) ([]string, error) {
	entries, err := fs.ReadDir(migrations.FS, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if v, ok := strings.CutSuffix(e.Name(), ".up.sql"); ok {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("migrations/%s holds no migration", dir)
	}
	return out, nil
}

func write(w io.Writer, info *Info) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("release")
	p("  revision               %s (git describe)", info.Revision)
	p("  binaries report        %s (cell/api.Version)", info.APIVersion)
	p("")
	p("images (as the overlays in deploy/k8s deploy them)")
	for _, im := range info.Images {
		v := strings.Join(im.Refs, ", ")
		if im.Note != "" {
			v = "none: " + im.Note
		}
		p("  %-22s %s", im.Component, v)
	}
	p("")
	p("contract versions")
	c := info.Contract
	p("  public API             %s", c.PublicAPI)
	p("  render control         %s on %s", c.ContractVersion, c.ControlProtocol)
	p("  readiness protocol     %s", c.ReadinessProtocol)
	p("  result schema          %s", c.ResultSchema)
	p("  diagnosis schema       %s", c.DiagnosisSchema)
	p("  preview host build     %s", c.PreviewHostBuild)
	p("")
	p("render profile")
	p("  source                 %s", info.Profile.Source)
	p("  digest                 %s", info.Profile.Digest)
	p("  browser                %s", info.Profile.BrowserBuild)
	if info.Profile.HostBuild != "" {
		p("  pins preview host      %s", info.Profile.HostBuild)
	}
	if info.Profile.ImageDigest != "" {
		p("  renderer image         %s", info.Profile.ImageDigest)
	}
	if info.Profile.Computed != "" {
		p("  this machine's         %s (renderer profile)", info.Profile.Computed)
	}
	p("")
	p("database migrations")
	p("  directory              %s", strings.Join(info.Migration.Directory, " "))
	p("  cell                   %s", strings.Join(info.Migration.Cell, " "))
	if len(info.Notes) > 0 {
		p("")
		p("notes")
		for _, n := range info.Notes {
			p("  - %s", n)
		}
	}
}
