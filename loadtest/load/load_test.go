package load

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func dur(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestPercentileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, dur(float64(i)))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{.5, dur(100)}, {.95, dur(190)}, {.99, dur(198)}, {1, dur(200)}, {.001, dur(1)}} {
		if got := Percentile(d, c.q); got != c.want {
			t.Errorf("p%v of 1..200 ms = %v, want %v", c.q*100, got, c.want)
		}
	}
	if Percentile(nil, .5) != 0 {
		t.Error("percentile of nothing should be 0")
	}
	if got := Percentile([]time.Duration{dur(7)}, .95); got != dur(7) {
		t.Errorf("p95 of one sample = %v", got)
	}
}

func TestSummarizeCountsErrorsByClassAndLeavesThemOutOfLatency(t *testing.T) {
	start := time.Unix(1_900_000_000, 0)
	var ss []Sample
	for i := range 100 {
		ss = append(ss, Sample{Op: OpValidate, Start: start.Add(time.Duration(i) * 100 * time.Millisecond), Latency: dur(float64(1000 + i)), Status: 200})
	}
	// Fast failures must not pull the percentiles down.
	for range 3 {
		ss = append(ss, Sample{Op: OpValidate, Start: start, Latency: dur(1), Status: 429, Error: "429 RENDER_QUEUE_FULL"})
	}
	ss = append(ss, Sample{Op: OpValidate, Start: start, Latency: dur(1), Error: "transport: timeout"})
	ss = append(ss, Sample{Op: OpProjectGet, Start: start, Latency: dur(2), Status: 200})
	sums := Summarize(ss, 10*time.Second)
	if len(sums) != 2 || sums[0].Op != OpProjectGet || sums[1].Op != OpValidate {
		t.Fatalf("summaries %+v", sums)
	}
	v := sums[1]
	if v.Count != 104 || v.OK != 100 {
		t.Errorf("count %d ok %d", v.Count, v.OK)
	}
	if v.Errors["429 RENDER_QUEUE_FULL"] != 3 || v.Errors["transport: timeout"] != 1 || len(v.Errors) != 2 {
		t.Errorf("errors %v", v.Errors)
	}
	if v.P50 != 1049 || v.P95 != 1094 || v.P99 != 1098 || v.Max != 1099 {
		t.Errorf("p50 %v p95 %v p99 %v max %v", v.P50, v.P95, v.P99, v.Max)
	}
	if v.PerSec != 10 {
		t.Errorf("throughput %v/s, want 10 (100 ok in 10 s)", v.PerSec)
	}
	if v.Category != "interactive" || sums[0].Category != "" {
		t.Errorf("categories %q %q", v.Category, sums[0].Category)
	}
}

func TestTimelineBucketsBySecond(t *testing.T) {
	start := time.Unix(1_900_000_000, 0)
	ss := []Sample{
		{Op: "a", Start: start.Add(100 * time.Millisecond), Latency: dur(10)},
		{Op: "a", Start: start.Add(900 * time.Millisecond), Latency: dur(30)},
		{Op: "a", Start: start.Add(1500 * time.Millisecond), Latency: dur(5), Error: "500"},
		{Op: "b", Start: start.Add(1500 * time.Millisecond), Latency: dur(7)},
	}
	got := Timeline(ss, start)
	want := []Bucket{{Second: 0, Op: "a", Count: 2, P50: 10, P95: 30}, {Second: 1, Op: "a", Count: 1, Errors: 1}, {Second: 1, Op: "b", Count: 1, P50: 7, P95: 7}}
	if len(got) != len(want) {
		t.Fatalf("timeline %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestErrorClassUsesTheAPICode(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   string
	}{
		{200, `{}`, ""},
		{202, ``, ""},
		{429, `{"status":429,"code":"RATE_LIMITED","message":"slow down"}`, "429 RATE_LIMITED"},
		{503, `not json`, "503"},
		{500, `{"code":""}`, "500"},
	} {
		if got := ErrorClass(c.status, []byte(c.body)); got != c.want {
			t.Errorf("ErrorClass(%d, %s) = %q, want %q", c.status, c.body, got, c.want)
		}
	}
	if got := TransportClass("Post \"http://127.0.0.1:9/x\": dial tcp 127.0.0.1:9: connect: connection refused"); got != "transport: connection refused" {
		t.Errorf("transport class %q", got)
	}
	if got := TransportClass("net/http: request canceled (Client.Timeout exceeded while awaiting headers)"); got != "transport: timeout" {
		t.Errorf("transport class %q", got)
	}
}

func TestFromResultRunsTheCheckOnSuccessOnly(t *testing.T) {
	f := &Fixture{}
	check := f.ValidateAttack(nil, 1).Check
	at := time.Unix(1_900_000_000, 0)
	cases := []struct {
		r    vegeta.Result
		want string
	}{
		{vegeta.Result{Code: 200, Body: []byte(`{"valid":true,"status":"passed"}`)}, ""},
		{vegeta.Result{Code: 200, Body: []byte(`{"valid":false,"status":"unavailable","code":"RENDER_QUEUE_FULL"}`)}, "200 unavailable RENDER_QUEUE_FULL"},
		{vegeta.Result{Code: 200, Body: []byte(`{"valid":false,"status":"failed"}`)}, "200 failed"},
		{vegeta.Result{Code: 404, Body: []byte(`{"code":"NOT_FOUND"}`)}, "404 NOT_FOUND"},
		{vegeta.Result{Code: 0, Error: "dial tcp: connection refused"}, "transport: connection refused"},
	}
	for _, c := range cases {
		c.r.Timestamp, c.r.Latency = at, dur(3)
		s := FromResult(OpValidate, &c.r, check)
		if s.Error != c.want || s.Op != OpValidate || s.Start != at || s.Latency != dur(3) || s.Status != int(c.r.Code) {
			t.Errorf("%s: sample %+v, want error %q", c.r.Body, s, c.want)
		}
	}
	shot := f.ScreenshotAttack(nil, 1).Check
	png := http.Header{"Content-Type": {"image/png"}}
	if got := shot(200, png, []byte("\x89PNG\r\n\x1a\n...")); got != "" {
		t.Errorf("a PNG was classified %q", got)
	}
	if got := shot(200, http.Header{"Content-Type": {"application/json"}}, []byte(`{}`)); got != "200 not a PNG" {
		t.Errorf("JSON instead of a PNG was classified %q", got)
	}
}

func TestPoolHandsOutEachPageOnceThenStops(t *testing.T) {
	pages := []Page{{ID: "p1"}, {ID: "p2"}}
	var seen []string
	tr := pool(pages, func(t *vegeta.Target, p Page) { t.URL = p.ID })
	for range 2 {
		var tg vegeta.Target
		if err := tr(&tg); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, tg.URL)
	}
	var tg vegeta.Target
	if err := tr(&tg); err != vegeta.ErrNoTargets {
		t.Errorf("third target: %v, want ErrNoTargets", err)
	}
	if strings.Join(seen, ",") != "p1,p2" {
		t.Errorf("pages %v", seen)
	}
}

func TestPacerRates(t *testing.T) {
	if p := (Attack{Rate: 0}).pacer().(vegeta.ConstantPacer); p.Freq != 0 {
		t.Errorf("closed loop pacer %v", p)
	}
	if p := (Attack{Rate: 35}).pacer().(vegeta.ConstantPacer); p.Freq != 35 || p.Per != time.Second {
		t.Errorf("35/s pacer %v", p)
	}
	if p := (Attack{Rate: 0.5}).pacer().(vegeta.ConstantPacer); p.Freq != 1 || p.Per != 2*time.Second {
		t.Errorf("0.5/s pacer %v", p)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:80/x", "http://127.3.4.5"} {
		if err := CheckLoopback(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://192.168.1.2", "https://example.com", "http://0.0.0.0:80", "ftp://127.0.0.1", "127.0.0.1:8080", ""} {
		if err := CheckLoopback(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, ok := range []string{"postgres://u:p@127.0.0.1:5432/directory", "postgres://u@localhost/d", "host=/var/run/postgresql dbname=d"} {
		if err := CheckLoopbackDatabase(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"postgres://u:p@10.1.2.3:5432/directory", "postgres://u@db.example.com/d"} {
		if err := CheckLoopbackDatabase(bad); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), ":p@") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if _, err := NewFixture(t.Context(), "http://10.0.0.1", nil, FixtureOptions{}); err == nil {
		t.Error("a fixture for a non-loopback router was made")
	}
}

func TestReadEnvFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(p, []byte("export BASE_URL=http://127.0.0.1:8080\n# comment\nexport PAT='svc_pat_x'\nDIRECTORY_DATABASE_URL=postgres://a@127.0.0.1/d?x=1\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := ReadEnvFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if env["BASE_URL"] != "http://127.0.0.1:8080" || env["PAT"] != "svc_pat_x" || env["DIRECTORY_DATABASE_URL"] != "postgres://a@127.0.0.1/d?x=1" || len(env) != 3 {
		t.Errorf("env %v", env)
	}
}

func TestWriteTableShowsErrorsByCode(t *testing.T) {
	var b bytes.Buffer
	WriteTable(&b, []Summary{{Op: OpScreenshot, Count: 10, OK: 7, Errors: map[string]int{"503 RENDER_SERVICE_UNAVAILABLE": 1, "429 RENDER_QUEUE_FULL": 2},
		P50: 1234.5, P95: 2000, P99: 2500, Max: 3000, PerSec: 1.5}})
	out := b.String()
	for _, want := range []string{"render.screenshot", "1.23s", "2.00s", "1.5", "2  429 RENDER_QUEUE_FULL", "1  503 RENDER_SERVICE_UNAVAILABLE"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "429 RENDER_QUEUE_FULL") > strings.Index(out, "503 RENDER_SERVICE_UNAVAILABLE") {
		t.Errorf("errors not sorted by count:\n%s", out)
	}
}

func TestPlotIsSelfContained(t *testing.T) {
	start := time.Unix(1_900_000_000, 0)
	var ss []Sample
	for i := range 5000 {
		ss = append(ss, Sample{Op: OpProjectGet, Start: start.Add(time.Duration(i) * time.Millisecond * 4), Latency: dur(2 + float64(i%7))})
	}
	ss = append(ss, Sample{Op: OpValidate, Start: start.Add(3 * time.Second), Latency: dur(1500)},
		Sample{Op: OpValidate, Start: start.Add(5 * time.Second), Latency: dur(900), Error: "200 unavailable RENDER_QUEUE_FULL"})
	var b bytes.Buffer
	if err := WritePlot(&b, "test <run>", ss); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "<svg"); n != 2 {
		t.Errorf("%d panels, want one per operation (2)", n)
	}
	if !strings.Contains(out, "test &lt;run&gt;") {
		t.Error("the title is not escaped")
	}
	if n := strings.Count(out, "<circle"); n > 3000+2 || n < 2500 {
		t.Errorf("%d dots: the 5,000 samples should be thinned to about 3,000", n)
	}
	if !strings.Contains(out, `fill="#d62728"`) {
		t.Error("the failed sample is not drawn in red")
	}
	if !strings.Contains(out, `class="p95"`) {
		t.Error("no p95 line")
	}
	// Self-contained: nothing to load from anywhere.
	for _, ref := range []string{"<script src", "<link", "src=", "href=", "url("} {
		if strings.Contains(out, ref) {
			t.Errorf("the plot references something outside itself (%q)", ref)
		}
	}
}

func TestReportFiles(t *testing.T) {
	start := time.Unix(1_900_000_000, 0)
	ss := []Sample{{Op: OpProjectCreate, Start: start, Latency: dur(3), Status: 201}, {Op: OpProjectCreate, Start: start.Add(time.Second), Latency: dur(1), Status: 429, Error: "429 RATE_LIMITED"}}
	r := NewReport("api", start, 2*time.Second, ss)
	r.Settings["api_rate_per_s"] = "100"
	dir := t.TempDir()
	rp, pp, err := r.WriteFiles(dir, ss)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	raw, err := os.ReadFile(rp)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	op := back.Op(OpProjectCreate)
	if op.Count != 2 || op.OK != 1 || op.Errors["429 RATE_LIMITED"] != 1 || op.PerSec != 0.5 || back.Settings["api_rate_per_s"] != "100" || len(back.Timeline) != 2 {
		t.Errorf("report read back: %+v", back)
	}
	if fi, err := os.Stat(pp); err != nil || fi.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
}
