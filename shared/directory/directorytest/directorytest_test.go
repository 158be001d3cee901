package directorytest

import (
	"context"
	"errors"
	"testing"

	"slidecells/shared/directory"
)

func TestAnswersWhatTheTestPutInAndNotFoundOtherwise(t *testing.T) {
	ctx := context.Background()
	burst := int64(9)
	p := Placements{"ws_a": {WorkspaceID: "ws_a", CellID: "cell-b", Epoch: 5, State: "moving"}}
	l := Limits{"ws_a": {WorkspaceID: "ws_a", Burst: &burst}}
	for name, get := range map[string]func(string) (string, error){
		"placement":       func(ws string) (string, error) { pl, err := p.Placement(ctx, ws); return pl.CellID, err },
		"fresh placement": func(ws string) (string, error) { pl, err := p.FreshPlacement(ctx, ws); return pl.CellID, err },
		"limits": func(ws string) (string, error) {
			li, err := l.Limits(ctx, ws)
			if li.Burst == nil {
				return "", err
			}
			return "burst", err
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := get("ws_a"); err != nil || got == "" {
				t.Fatalf("known workspace: %q %v", got, err)
			}
			if got, err := get("ws_b"); !errors.Is(err, directory.ErrNotFound) || got != "" {
				t.Fatalf("unknown workspace: %q %v, want directory.ErrNotFound", got, err)
			}
		})
	}
	p["ws_b"] = directory.Placement{CellID: "cell-a"}
	if pl, err := p.Placement(ctx, "ws_b"); err != nil || pl.CellID != "cell-a" {
		t.Fatalf("a placement added later: %+v %v", pl, err)
	}
}
