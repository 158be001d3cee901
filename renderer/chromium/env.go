package chromium

import (
	"os"
	"path/filepath"
)

// ChildEnv is the complete environment of the execution child: an
// allowlist, with every writable location inside the attempt directory.
// Nothing of the control process's environment (service credentials, key
// files, database URLs) is passed on.
func ChildEnv(dir string) []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + filepath.Join(dir, "home"),
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "home", ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "home", ".cache"),
		"LANG=C.UTF-8",
		"TZ=" + Timezone,
	}
}

// makeChildDirs creates the directories ChildEnv points at.
func makeChildDirs() {
	for _, v := range []string{"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"} {
		if p := os.Getenv(v); p != "" {
			_ = os.MkdirAll(p, 0o700)
		}
	}
}
