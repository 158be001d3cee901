package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"testing"

	"go.uber.org/zap"

	"slidecells/cell/api"
)

var updateGolden = flag.Bool("update-openapi", false, "rewrite testdata/openapi.json from the current document")

// TestOpenAPIGolden pins the whole OpenAPI document, normalized (every object's keys sorted,
// so only the order of schemas may change): a change of any path, status, field, constraint
// or description fails it. After a deliberate change of the contract, rewrite the file with
// go test ./cell/api -run TestOpenAPIGolden -update-openapi and review its diff.
func TestOpenAPIGolden(t *testing.T) {
	srv := httptest.NewServer(api.New(api.Config{CellID: "cell-golden", Log: zap.NewNop()}).Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(doc, "", "  ") // maps marshal with sorted keys
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const golden = "testdata/openapi.json"
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := 0; i < min(len(gl), len(wl)); i++ {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("the OpenAPI document differs from %s at line %d:\n got: %s\nwant: %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("the OpenAPI document differs from %s in length (%d lines, want %d)", golden, len(gl), len(wl))
	}
}
