package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckKernelNamesWhatIsMissing: without user namespaces (or with
// unprivileged ones switched off) start-up fails saying so.
func TestCheckKernelNamesWhatIsMissing(t *testing.T) {
	saved := procSys
	defer func() { procSys = saved }()
	write := func(dir, name, v string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no user namespaces", map[string]string{}, "user namespaces unavailable"},
		{"user namespaces off", map[string]string{"user/max_user_namespaces": "0"}, "user.max_user_namespaces = 0"},
		{"unprivileged ones off", map[string]string{"user/max_user_namespaces": "100", "kernel/unprivileged_userns_clone": "0"}, "kernel.unprivileged_userns_clone = 0"},
		{"available", map[string]string{"user/max_user_namespaces": "100", "kernel/unprivileged_userns_clone": "1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procSys = t.TempDir()
			for k, v := range tc.files {
				write(procSys, k, v)
			}
			err := CheckKernel()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("CheckKernel = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSubordinateRanges: the range must be covered by the user's entries
// (by name or numeric ID), contiguous entries together.
func TestSubordinateRanges(t *testing.T) {
	p := filepath.Join(t.TempDir(), "subuid")
	if err := os.WriteFile(p, []byte("other:200000:1000\nrenderer:200000:500\n990:200500:500\nrenderer:x:1\nrenderer:300000:10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		first, last uint32
		want        bool
	}{
		{200000, 200999, true},  // two entries, by name and by ID, back to back
		{200100, 200600, true},  // inside
		{200000, 201000, false}, // one past the end
		{199999, 200100, false}, // one before
		{300000, 300009, true},
		{200900, 300005, false}, // a gap
	} {
		if got, err := subordinateCovers(p, "renderer", 990, tc.first, tc.last); err != nil || got != tc.want {
			t.Errorf("%d-%d: %v %v, want %v", tc.first, tc.last, got, err, tc.want)
		}
	}
	if got, _ := subordinateCovers(filepath.Join(t.TempDir(), "none"), "renderer", 990, 1, 2); got {
		t.Error("a missing file covers nothing")
	}
}
