package rendercontract

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func validRequest(t *testing.T) *ExecutionRequest {
	t.Helper()
	r := &ExecutionRequest{
		ContractVersion:     ContractVersion,
		Operation:           OpPageCapture,
		RequestID:           "rr_1",
		AttemptID:           "ra_1",
		WorkspaceID:         "ws_1",
		TraceID:             "tr_1",
		SnapshotRef:         "snap_1",
		InputDigest:         "sha256:" + strings.Repeat("1", 64),
		RenderProfileDigest: "sha256:" + strings.Repeat("2", 64),
		Viewport:            Viewport{Width: 1280, Height: 720, DeviceScaleFactor: 2},
		DeadlineAt:          time.Now().Add(time.Minute),
		RemainingBudgetMS:   60000,
		AdmissionTicket:     "x.y.z",
		PreviewAccess:       PreviewAccess{Token: "secret-token", ExpiresAt: time.Now().Add(time.Minute)},
	}
	d, err := r.ComputeRequestDigest()
	if err != nil {
		t.Fatal(err)
	}
	r.RequestDigest = d
	return r
}

func TestCheckShape(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *ExecutionRequest)
		want   Code
	}{
		{"valid", func(r *ExecutionRequest) {}, ""},
		{"wrong contract", func(r *ExecutionRequest) { r.ContractVersion = "render-execution.v0" }, CodeContractMismatch},
		{"unknown operation", func(r *ExecutionRequest) { r.Operation = "page.print" }, CodeContractMismatch},
		{"path in attempt id", func(r *ExecutionRequest) { r.AttemptID = "../etc" }, CodeContractMismatch},
		{"bad digest", func(r *ExecutionRequest) { r.InputDigest = "md5:1" }, CodeContractMismatch},
		{"digest does not match fields", func(r *ExecutionRequest) { r.Viewport.Width = 1281 }, CodeContractMismatch},
		{"side over 8192", func(r *ExecutionRequest) { r.Viewport = Viewport{Width: 4100, Height: 100, DeviceScaleFactor: 2} }, CodeOutputLimitExceeded},
		{"over 16 megapixels", func(r *ExecutionRequest) { r.Viewport = Viewport{Width: 4000, Height: 4001, DeviceScaleFactor: 1} }, CodeOutputLimitExceeded},
		{"exactly 16 megapixels", func(r *ExecutionRequest) { r.Viewport = Viewport{Width: 4000, Height: 4000, DeviceScaleFactor: 1} }, ""},
		{"zero dsf", func(r *ExecutionRequest) { r.Viewport.DeviceScaleFactor = 0 }, CodeContractMismatch},
		{"scenes on capture", func(r *ExecutionRequest) { r.OperationOptions.Scenes = []string{"a"} }, CodeContractMismatch},
		{"16 scenes", func(r *ExecutionRequest) {
			r.Operation = OpComponentDiagnose
			for i := 0; i < 15; i++ {
				r.OperationOptions.Scenes = append(r.OperationOptions.Scenes, fmt.Sprintf("s%d", i))
			}
		}, ""},
		{"17 scenes", func(r *ExecutionRequest) {
			r.Operation = OpComponentDiagnose
			for i := 0; i < 16; i++ {
				r.OperationOptions.Scenes = append(r.OperationOptions.Scenes, fmt.Sprintf("s%d", i))
			}
		}, CodeOutputLimitExceeded},
		{"no budget", func(r *ExecutionRequest) { r.RemainingBudgetMS = 0 }, CodeContractMismatch},
		{"no ticket", func(r *ExecutionRequest) { r.AdmissionTicket = "" }, CodeInputExpired},
		{"no preview access", func(r *ExecutionRequest) { r.PreviewAccess = PreviewAccess{} }, CodeInputExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest(t)
			tc.mutate(r)
			if tc.name != "digest does not match fields" {
				r.RequestDigest, _ = r.ComputeRequestDigest()
			}
			e := r.CheckShape()
			var got Code
			if e != nil {
				got = e.Code
			}
			if got != tc.want {
				t.Fatalf("CheckShape = %v, want %q", e, tc.want)
			}
		})
	}
}

func TestRequestDigestIgnoresAttemptAndCredentials(t *testing.T) {
	a := validRequest(t)
	b := validRequest(t)
	b.AttemptID = "ra_2"
	b.TraceID = "tr_2"
	b.AdmissionTicket = "other"
	b.PreviewAccess.Token = "other"
	b.DeadlineAt = b.DeadlineAt.Add(time.Hour)
	da, _ := a.ComputeRequestDigest()
	db, _ := b.ComputeRequestDigest()
	if da != db {
		t.Fatal("request digest depends on per-attempt or credential fields")
	}
	b.SnapshotRef = "snap_2"
	if db2, _ := b.ComputeRequestDigest(); db2 == da {
		t.Fatal("request digest ignores the snapshot")
	}
}

func TestEveryCodeHasACategory(t *testing.T) {
	all := []Code{CodeQueueFull, CodeWorkerBusy, CodeServiceUnavailable, CodeContractMismatch, CodeProfileMismatch,
		CodeInputExpired, CodeInputNotReproducible, CodeContentError, CodeAssetNotReady, CodeBrowserLost,
		CodeDeadlineExceeded, CodeResultLost, CodeOutputLimitExceeded, CodeCancelled, CodeInternal, CodeUnauthenticated}
	if len(all) != len(codes) {
		t.Fatalf("code table has %d entries, spec lists %d", len(codes), len(all))
	}
	want := map[Code]Category{CodeWorkerBusy: CategoryCapacity, CodeContentError: CategoryContent, CodeDeadlineExceeded: CategoryTimeout, CodeCancelled: CategoryCancellation, CodeOutputLimitExceeded: CategoryResource}
	for c, cat := range want {
		if c.Category() != cat {
			t.Errorf("%s category = %s, want %s", c, c.Category(), cat)
		}
	}
	e := NewError(CodeWorkerBusy, StageAdmission, "slot taken by %s", "x").WithTrace("tr")
	b, _ := json.Marshal(e)
	for _, field := range []string{`"code":"RENDER_WORKER_BUSY"`, `"category":"capacity"`, `"stage":"admission"`, `"retryable":true`, `"message":"slot taken by x"`, `"trace_id":"tr"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("error JSON %s misses %s", b, field)
		}
	}
}

func TestSceneList(t *testing.T) {
	got := OperationOptions{Scenes: []string{"default", "dense", "dense", "empty"}}.SceneList()
	if strings.Join(got, ",") != "default,dense,empty" {
		t.Fatalf("SceneList = %v", got)
	}
}

func TestPreviewAccessNeverPrintsToken(t *testing.T) {
	r := validRequest(t)
	for _, s := range []string{fmt.Sprint(r.PreviewAccess), fmt.Sprintf("%v", r.PreviewAccess), fmt.Sprintf("%+v", *r)} {
		if strings.Contains(s, "secret-token") {
			t.Fatalf("token printed: %s", s)
		}
	}
}

func TestPreviewPath(t *testing.T) {
	if got := PreviewPath("/preview/", "snap_1"); got != "/preview/snapshots/snap_1" {
		t.Fatalf("PreviewPath = %s", got)
	}
	if got := PreviewPath("", "a b"); got != "/snapshots/a%20b" {
		t.Fatalf("PreviewPath escapes: %s", got)
	}
}

func TestReadyStateShape(t *testing.T) {
	good := ReadyState{Protocol: ReadinessProtocol, Init: InitOK, Mount: MountMounted}
	if msg, ok := good.CheckShape(); !ok {
		t.Fatal(msg)
	}
	for name, s := range map[string]ReadyState{
		"wrong version":  {Protocol: "render-ready.v2", Init: InitOK, Mount: MountMounted},
		"missing":        {},
		"unknown init":   {Protocol: ReadinessProtocol, Init: "done", Mount: MountMounted},
		"unknown mount":  {Protocol: ReadinessProtocol, Init: InitOK, Mount: "yes"},
		"negative count": {Protocol: ReadinessProtocol, Init: InitOK, Mount: MountMounted, Resources: ResourceSummary{Fonts: ResourceCounts{Pending: -1}}},
		"bad receipt":    {Protocol: ReadinessProtocol, Init: InitOK, Mount: MountMounted, SceneReceipts: []SceneReceipt{{State: "maybe"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok := s.CheckShape(); ok {
				t.Fatal("accepted an undeterminable state")
			}
		})
	}
}

func TestArtifactNames(t *testing.T) {
	if !ArtifactCapture.Valid() || ArtifactName("../x").Valid() {
		t.Fatal("artifact name set wrong")
	}
	if ArtifactFor(OpPageCapture) != ArtifactCapture || ArtifactFor(OpComponentDiagnose) != ArtifactDiagnosis {
		t.Fatal("artifact per operation wrong")
	}
	if ArtifactCapture.MaxBytes() != 32<<20 || ArtifactDiagnosis.MaxBytes() != 1<<20 {
		t.Fatal("artifact limits wrong")
	}
}

func TestHTTPStatusTable(t *testing.T) {
	cases := []struct {
		code Code
		sit  Situation
		want int
	}{
		{CodeUnauthenticated, "", 401},
		{CodeContractMismatch, "", 400},
		{CodeContractMismatch, SituationConflict, 409},
		{CodeInputExpired, "", 403},
		{CodeInputExpired, SituationConflict, 409},
		{CodeWorkerBusy, "", 429},
		{CodeServiceUnavailable, "", 503},
		{CodeResultLost, "", 404},
		{CodeResultLost, SituationGone, 410},
		{CodeResultLost, SituationConflict, 409},
		{CodeCancelled, SituationGone, 409}, // unlisted situation: the code's default
		{Code("RENDER_NO_SUCH"), "", 500},
	}
	for _, c := range cases {
		if got := NewError(c.code, StageAdmission, "x").In(c.sit).HTTPStatus(); got != c.want {
			t.Errorf("%s in %q: %d, want %d", c.code, c.sit, got, c.want)
		}
	}
	for code := range codes {
		if _, ok := httpStatus[code]; !ok {
			t.Errorf("%s has no HTTP status", code)
		}
	}
}
