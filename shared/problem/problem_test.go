package problem

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriteHidesCause(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, Wrap(errors.New("dial tcp 10.0.0.1: secret-host"), "internal error"), "tr1")
	if rec.Code != 500 {
		t.Fatalf("status %d", rec.Code)
	}
	if strings.Contains(rec.Body.String(), "secret-host") {
		t.Fatalf("cause leaked: %s", rec.Body)
	}
	var b Body
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Code != Internal || b.TraceID != "tr1" {
		t.Fatalf("body %+v err %v", b, err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Fatalf("content type %q", ct)
	}
}

func TestRetryAfterAndFields(t *testing.T) {
	rec := httptest.NewRecorder()
	e := New(RateLimited, "slow down")
	e.RetryAfter = 3
	Write(rec, e, "t")
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "3" {
		t.Fatalf("got %d %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	rec = httptest.NewRecorder()
	Write(rec, Invalid(FieldError{Field: "/name", Message: "required"}), "t")
	if rec.Code != 422 || !strings.Contains(rec.Body.String(), `"field":"/name"`) {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}

func TestEveryCodeHasStatus(t *testing.T) {
	for c := range statuses {
		if Status(c) < 400 {
			t.Errorf("%s maps to %d", c, Status(c))
		}
	}
}
