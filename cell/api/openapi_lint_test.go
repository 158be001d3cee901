package api_test

import (
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.uber.org/zap"

	"slidecells/cell/api"
)

// writeOpenAPI30 names a file to write the 3.0 document to (make api-client generates the
// e2e tests' client from it).
var writeOpenAPI30 = flag.String("write-openapi30", "", "write /openapi-3.0.json to this file")

// TestOpenAPIDocumentIsValid loads the served document (/openapi.json, OpenAPI 3.1) with a
// standard OpenAPI library (kin-openapi) and validates it: no errors (structure, references,
// schemas, parameters, examples). (huma's 3.0 down-conversion, /openapi-3.0.json, keeps
// contentMediaType on the upload bodies, which 3.0 does not have: not checked here.)
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
	for _, path := range []string{"/openapi.json"} {
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
		})
	}
}
