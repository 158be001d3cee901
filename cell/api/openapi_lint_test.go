package api_test

import (
	"io"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.uber.org/zap"

	"slidecells/cell/api"
)

// TestOpenAPIDocumentIsValid loads the served document (/openapi.json, OpenAPI 3.1) with a
// standard OpenAPI library (kin-openapi) and validates it: no errors (structure, references,
// schemas, parameters, examples). (huma's 3.0 down-conversion, /openapi-3.0.json, keeps
// contentMediaType on the upload bodies, which 3.0 does not have: not checked here.)
func TestOpenAPIDocumentIsValid(t *testing.T) {
	srv := httptest.NewServer(api.New(api.Config{CellID: "cell-lint", Log: zap.NewNop()}).Handler())
	defer srv.Close()
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
