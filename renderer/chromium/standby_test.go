package chromium

import (
	"encoding/json"
	"testing"
)

// TestStandbyLaunchesAsTheJobWould: a standby's browser is handed to a job
// only when the job would have launched its own browser with exactly the same
// binary, logging and launch flags (the release profile's); any difference
// makes the job start its own.
func TestStandbyLaunchesAsTheJobWould(t *testing.T) {
	sb := Job{Standby: true, Browser: BrowserSettings{Path: DefaultBrowserPath, Locale: Locale, Timezone: Timezone},
		Document: DocumentSettings{AllowedOrigins: []string{"http://127.0.0.1:8081", "http://assets.example"}}, EgressProxy: "127.0.0.1:3128"}
	job := sb
	job.Standby = false
	job.Document = DocumentSettings{URL: "http://127.0.0.1:8081/preview/snapshots/s1", AllowedOrigins: sb.Document.AllowedOrigins,
		AccessToken: "token", ArtifactID: "s1", InputDigest: "sha256:x"}
	if !sameLaunch(sb, job) {
		t.Fatal("a job with the standby's launch parameters does not take it")
	}
	// The standby's message holds no request data.
	b, _ := json.Marshal(sb)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	doc, _ := m["document"].(map[string]any)
	if doc["url"] != "" || doc["access_token"] != "" || m["attempt_id"] != "" || m["budget"] != float64(0) {
		t.Fatalf("standby message carries request fields: %s", b)
	}
	for name, mutate := range map[string]func(*Job){
		"browser path":    func(j *Job) { j.Browser.Path = "/usr/bin/chromium" },
		"allowed origins": func(j *Job) { j.Document.AllowedOrigins = []string{"http://127.0.0.1:8081"} },
		"egress proxy":    func(j *Job) { j.EgressProxy = "127.0.0.1:3129" },
		"browser gate":    func(j *Job) { j.NoBrowserGate = true },
		"browser log":     func(j *Job) { j.BrowserLog = true },
	} {
		other := job
		mutate(&other)
		if sameLaunch(sb, other) {
			t.Errorf("a job with another %s takes the standby", name)
		}
	}
}
