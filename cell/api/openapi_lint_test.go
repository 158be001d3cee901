package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.uber.org/zap"

	"slidecells/cell/api"
)

// writeOpenAPI30 names a file to write the 3.0 document to (make api-client generates the
// e2e tests' client from it).
var writeOpenAPI30 = flag.String("write-openapi30", "", "write /openapi-3.0.json to this file")

// TestOpenAPIDocumentIsValid loads the served documents (/openapi.json, OpenAPI 3.1, and its
// down-conversion /openapi-3.0.json) with a standard OpenAPI library (kin-openapi) and
// validates them: no errors (structure, references, schemas, parameters, examples). The 3.0
// document must not carry 3.1-only keywords (huma's down-conversion kept contentMediaType on
// 36 upload bodies), and its YAML form must say the same as its JSON.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	srv := httptest.NewServer(api.New(api.Config{CellID: "cell-lint", Log: zap.NewNop()}).Handler())
	defer srv.Close()
	if *writeOpenAPI30 != "" {
		resp, err := srv.Client().Get(srv.URL + "/openapi-3.0.json")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || os.WriteFile(*writeOpenAPI30, b, 0o644) != nil {
			t.Fatalf("write %s: %v", *writeOpenAPI30, err)
		}
	}
	for _, path := range []string{"/openapi.json", "/openapi-3.0.json"} {
		t.Run(path, func(t *testing.T) {
			resp, err := srv.Client().Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
			}
			loader := openapi3.NewLoader()
			doc, err := loader.LoadFromData(body)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if err := doc.Validate(loader.Context); err != nil {
				t.Fatalf("%s is not a valid OpenAPI document: %v", path, err)
			}
			if len(doc.Paths.Map()) < 40 {
				t.Fatalf("only %d paths", len(doc.Paths.Map()))
			}
			if path != "/openapi-3.0.json" {
				return
			}
			if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
				t.Fatalf("openapi %q, want 3.0.x", doc.OpenAPI)
			}
			if bytes.Contains(body, []byte(`"contentMediaType"`)) {
				t.Fatal("the 3.0 document carries contentMediaType, a 3.1 keyword")
			}
			binary := 0
			for _, item := range doc.Paths.Map() {
				if op := item.Post; op != nil && op.RequestBody != nil && op.RequestBody.Value != nil {
					for _, mt := range op.RequestBody.Value.Content {
						if mt.Schema != nil && mt.Schema.Value != nil && mt.Schema.Value.Format == "binary" {
							binary++
						}
					}
				}
			}
			if binary == 0 {
				t.Fatal("no upload body with format: binary: the binary bodies lost their 3.0 form")
			}
			resp, err = srv.Client().Get(srv.URL + "/openapi-3.0.yaml")
			if err != nil {
				t.Fatal(err)
			}
			y, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("/openapi-3.0.yaml: %d %v", resp.StatusCode, err)
			}
			fromYAML, err := openapi3.NewLoader().LoadFromData(y)
			if err != nil {
				t.Fatalf("load the YAML: %v", err)
			}
			a, _ := json.Marshal(doc)
			b, _ := json.Marshal(fromYAML)
			if !bytes.Equal(a, b) {
				t.Fatal("/openapi-3.0.yaml differs from /openapi-3.0.json")
			}
		})
	}
}
