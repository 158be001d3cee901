package deploycheck

import (
	"fmt"
	"regexp"
	"strings"
)

// ImagePrefix is the repository of the images built from this repository: slidecells/<stage>
// is built by the Dockerfile stage <stage>.
const ImagePrefix = "slidecells/"

// externalImages are the third-party images the manifests may run, each pinned to an exact
// release (never a floating tag).
var externalImages = map[string]*regexp.Regexp{
	"cockroachdb/cockroach": regexp.MustCompile(`^v\d+\.\d+\.\d+$`),
}

var stageRE = regexp.MustCompile(`(?im)^\s*FROM\s+(?:--\S+\s+)*\S+\s+AS\s+([a-z0-9][a-z0-9._-]*)\s*$`)

// dockerStages returns the named stages of a Dockerfile.
func dockerStages(dockerfile string) map[string]bool {
	out := map[string]bool{}
	for _, m := range stageRE.FindAllStringSubmatch(dockerfile, -1) {
		out[strings.ToLower(m[1])] = true
	}
	return out
}

// splitImage splits an image reference into name, tag and digest.
func splitImage(ref string) (name, tag, digest string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	// A colon after the last slash is a tag (one before it is a registry port).
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, tag = ref[:i], ref[i+1:]
	}
	return ref, tag, digest
}

// checkImage returns why an image reference is not allowed, or "".
func checkImage(ref string, stages map[string]bool) string {
	name, tag, digest := splitImage(ref)
	if tag == "latest" || (tag == "" && digest == "") {
		return fmt.Sprintf("image %q is not pinned (no tag or digest, or latest)", ref)
	}
	// Images of this repository may carry a registry in front (the overlay's images: newName).
	if i := strings.Index(name, ImagePrefix); i >= 0 && (i == 0 || name[i-1] == '/') {
		stage := name[i+len(ImagePrefix):]
		if !stages[stage] {
			return fmt.Sprintf("image %q: the Dockerfile has no stage %q that builds it", ref, stage)
		}
		return ""
	}
	re, ok := externalImages[name]
	if !ok {
		return fmt.Sprintf("image %q is neither built by the Dockerfile (%s<stage>) nor an allowed third-party image", ref, ImagePrefix)
	}
	if digest == "" && !re.MatchString(tag) {
		return fmt.Sprintf("image %q: third-party images are pinned to an exact release (%s)", ref, re)
	}
	return ""
}
