// Command fakepreview stands in for the preview host binary in the stack's wiring test only: it
// listens where PREVIEW_LISTEN_ADDR says and answers every request with what it was started
// with and what reached it, so the test can see the environment the stack gave it and what
// the router forwards. It is not a preview host: it serves no documents.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"sync"
)

func main() {
	cred, err := os.ReadFile(os.Getenv("PREVIEW_SERVICE_CREDENTIAL_FILE"))
	if err != nil {
		os.Stderr.WriteString("fakepreview: PREVIEW_SERVICE_CREDENTIAL_FILE unreadable\n")
		os.Exit(2)
	}
	sum := sha256.Sum256(cred)
	var mu sync.Mutex
	var paths []string
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fake/paths" {
			mu.Lock()
			defer mu.Unlock()
			_ = json.NewEncoder(w).Encode(paths)
			return
		}
		if r.URL.Path != "/livez" {
			mu.Lock()
			paths = append(paths, r.URL.Path)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"path":          r.URL.Path,
			"query":         r.URL.RawQuery,
			"authorization": r.Header.Get("Authorization") != "",
			"cookie":        r.Header.Get("Cookie"),
			"backend":       os.Getenv("PREVIEW_BACKEND_URL"),
			"credential":    hex.EncodeToString(sum[:]),
		})
	})
	if err := http.ListenAndServe(os.Getenv("PREVIEW_LISTEN_ADDR"), nil); err != nil {
		os.Stderr.WriteString("fakepreview: " + err.Error() + "\n")
		os.Exit(1)
	}
}
