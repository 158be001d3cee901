package renderer

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"slidecells/renderer/chromium"
	"slidecells/shared/digest"
	rc "slidecells/shared/rendercontract"
)

// fontDirs and fontConfigDir decide how text renders; their content is
// hashed into the profile.
var (
	fontDirs      = []string{"/usr/share/fonts", "/usr/local/share/fonts"}
	fontConfigDir = "/etc/fonts"
)

// ComputeProfile builds the RenderProfile of this instance and, when a
// manifest is configured (RENDER_PROFILE_MANIFEST), checks it against the
// manifest: the manifest must be a complete profile, as `renderer profile`
// writes it, every field it holds must match what this instance computes,
// and the fields only the release knows (image digest, preview host build)
// are taken from it. The result is then exactly the manifest's profile, so
// this instance's environment digest is the manifest's digest, which is
// what the cells require of their renderers.
func ComputeProfile(ctx context.Context, cfg *Config) (rc.RenderProfile, error) {
	build, err := chromium.BrowserBuild(ctx, cfg.BrowserPath)
	if err != nil {
		return rc.RenderProfile{}, err
	}
	fonts, err := treeDigest(fontDirs...)
	if err != nil {
		return rc.RenderProfile{}, fmt.Errorf("fonts digest: %w", err)
	}
	fc, err := treeDigest(fontConfigDir)
	if err != nil {
		return rc.RenderProfile{}, fmt.Errorf("fontconfig digest: %w", err)
	}
	p := rc.RenderProfile{
		ContractVersion:   rc.ContractVersion,
		ReadinessProtocol: rc.ReadinessProtocol,
		SceneProtocol:     rc.ReadinessProtocol,
		ResultSchema:      rc.ResultSchemaVersion,
		DiagnosisSchema:   rc.DiagnosisSchemaVersion,
		BrowserLibrary:    chromium.LibraryVersion(),
		BrowserBuild:      build,
		HeadlessMode:      chromium.HeadlessMode,
		LaunchFlags:       chromium.ProfileFlags(),
		Sandbox:           "chromium namespace sandbox on, inside per-attempt PID, network, mount and IPC namespaces; per-attempt user, cgroup and egress proxy; no_new_privs",
		OS:                runtime.GOOS,
		Arch:              runtime.GOARCH,
		FontsDigest:       fonts,
		FontConfigDigest:  fc,
		Locale:            chromium.Locale,
		Timezone:          chromium.Timezone,
		ColorScheme:       chromium.ColorScheme,
		DSFPolicy:         chromium.DSFPolicy,
		AnimationPolicy:   chromium.AnimationPolicy,
		EngineVersion:     chromium.EngineVersion,
		DiagnosticsScript: chromium.DiagnosticsScriptVersion,
	}
	if cfg.ManifestPath == "" {
		return p, nil
	}
	b, err := os.ReadFile(cfg.ManifestPath)
	if err != nil {
		return p, fmt.Errorf("RENDER_PROFILE_MANIFEST: %w", err)
	}
	return checkManifest(p, b)
}

// releaseFields are the profile fields only the release knows; a manifest
// sets them and the instance adopts them.
var releaseFields = map[string]bool{"image_digest": true, "preview_host_build": true}

// checkManifest compares the computed profile with a manifest and returns
// the manifest's profile.
func checkManifest(p rc.RenderProfile, manifest []byte) (rc.RenderProfile, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(manifest, &m); err != nil {
		return p, fmt.Errorf("RENDER_PROFILE_MANIFEST: not a JSON object: %w", err)
	}
	var computed map[string]json.RawMessage
	cb, _ := json.Marshal(p)
	_ = json.Unmarshal(cb, &computed)
	var mismatches, missing []string
	for k, v := range m {
		have, known := computed[k]
		switch {
		case releaseFields[k]:
			continue
		case !known:
			return p, fmt.Errorf("RENDER_PROFILE_MANIFEST: unknown field %q", k)
		case !jsonEqual(have, v):
			mismatches = append(mismatches, k)
		}
	}
	for k := range computed {
		if _, ok := m[k]; !ok && !releaseFields[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return p, fmt.Errorf("RENDER_PROFILE_MANIFEST lacks %s: write it whole with `renderer profile`", strings.Join(missing, ", "))
	}
	if len(mismatches) > 0 {
		sort.Strings(mismatches)
		return p, fmt.Errorf("%s: this instance does not match RENDER_PROFILE_MANIFEST in %s", rc.CodeProfileMismatch, strings.Join(mismatches, ", "))
	}
	var want rc.RenderProfile
	if err := json.Unmarshal(manifest, &want); err != nil {
		return p, fmt.Errorf("RENDER_PROFILE_MANIFEST: %w", err)
	}
	p.ImageDigest, p.PreviewHostBuild = want.ImageDigest, want.PreviewHostBuild
	got, err1 := p.Digest()
	exp, err2 := want.Digest()
	if err1 != nil || err2 != nil || got != exp {
		return p, fmt.Errorf("%s: the profile this instance adopted does not have the manifest's digest", rc.CodeProfileMismatch)
	}
	return p, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	ca, err1 := digest.Canonical(a)
	cb, err2 := digest.Canonical(b)
	return err1 == nil && err2 == nil && string(ca) == string(cb)
}

// treeDigest hashes every regular file below dirs (path and content), so a
// changed, added or removed font changes the digest. Missing directories
// count as empty.
func treeDigest(dirs ...string) (string, error) {
	h := sha256.New()
	for _, root := range dirs {
		var files []string
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		sort.Strings(files)
		for _, f := range files {
			// Symlinks (fontconfig's conf.d) count by their target's
			// content.
			r, err := os.Open(f)
			if err != nil {
				fmt.Fprintf(h, "%s\x00dangling\x00", f)
				continue
			}
			fmt.Fprintf(h, "%s\x00", f)
			_, err = io.Copy(h, r)
			r.Close()
			if err != nil {
				return "", err
			}
		}
	}
	return digest.FromSum(h.Sum(nil)), nil
}
