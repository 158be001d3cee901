package authoring

import (
	"testing"

	"slidecells/cell/render"
	rc "slidecells/shared/rendercontract"
)

// A render request that failed because of its content — a content error, or output beyond the
// contract's limits — fails the check (a content outcome, named in the findings); one that failed
// for the infrastructure makes it unavailable, never "failed" and never "passed".
func TestFailedRenderRequestsMakeTheRightCheck(t *testing.T) {
	for _, tc := range []struct {
		code   rc.Code
		status string
	}{
		{rc.CodeContentError, "failed"},
		{rc.CodeOutputLimitExceeded, "failed"},
		{rc.CodeBrowserLost, "unavailable"},
		{rc.CodeContractMismatch, "unavailable"},
		{rc.CodeInputExpired, "unavailable"},
	} {
		got := failedCheck(render.Request{State: render.StateFailed, ErrorCode: string(tc.code), ErrorMessage: "m"})
		if got.Status != tc.status || got.Code != string(tc.code) {
			t.Errorf("%s: check %s/%s, want %s", tc.code, got.Status, got.Code, tc.status)
		}
		if tc.status == "failed" && (len(got.Findings) != 1 || got.Findings[0].Severity != rc.SeverityError || got.Findings[0].Code != string(tc.code)) {
			t.Errorf("%s: findings %+v, want the one error", tc.code, got.Findings)
		}
	}
}
